"""`audit diff`: two reports (or folders) compared on what decides, never on presentation."""
import copy
import json
import shutil
from pathlib import Path

import pytest

from audit import cli, report

REPO = Path(__file__).resolve().parents[1]
SOURCE = REPO / "reports" / "genefl-uplink-bytes.json"


@pytest.fixture
def data():
    return json.loads(SOURCE.read_text())


def _write(folder: Path, d: dict) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{d['id']}.json"
    path.write_text(json.dumps(d))
    return path


def test_a_report_equals_itself_and_presentation_does_not_count(data):
    other = copy.deepcopy(data)
    other["notes"] = ["rewritten"]
    other["runtime_s"] = 1.0
    other["estimates"] = list(reversed(other["estimates"]))  # matched by name
    found, n_other = report.compare(data, other)
    assert found == [] and n_other == 1  # the notes; runtime is volatile


def test_an_estimate_or_a_part_that_moves_is_found(data):
    other = copy.deepcopy(data)
    e = other["estimates"][0]
    e["value"] = e["value"] * (1 + 1e-12)
    other["parts"][0]["verdict"] = "REFUTED" if data["parts"][0]["verdict"] != "REFUTED" \
        else "CONFIRMED"
    found, _ = report.compare(data, other)
    assert any(f.startswith(f"estimates.{e['name']}.value") for f in found)
    assert any(f.startswith(f"parts.{data['parts'][0]['id']}.verdict") for f in found)
    # within a relative tolerance the number is the same; the part is not
    found, _ = report.compare(data, other, rtol=1e-9)
    assert [f for f in found if f.startswith("estimates.")] == []
    assert any(f.startswith(f"parts.{data['parts'][0]['id']}.verdict") for f in found)


def test_an_added_estimate_is_named(data):
    other = copy.deepcopy(data)
    other["estimates"].append({**other["estimates"][0], "name": "new_one"})
    found, _ = report.compare(data, other)
    assert found == ["estimates.new_one: only in the second"]


def test_the_command_exits_1_on_a_difference_and_0_without(data, tmp_path, capsys):
    a = _write(tmp_path / "a", data)
    moved = copy.deepcopy(data)
    moved["verdict"] = "INCONCLUSIVE" if data["verdict"] != "INCONCLUSIVE" else "CONFIRMED"
    for q in moved.get("questions") or []:  # a flip the report's questions also say
        if q.get("kind") != "measurement":
            q["verdict"] = moved["verdict"]
    b = _write(tmp_path / "b", moved)
    assert cli.main(["diff", str(a), str(a)]) == 0
    assert "no difference in what decides" in capsys.readouterr().out
    assert cli.main(["diff", str(a), str(b)]) == 1
    assert "verdict: " in capsys.readouterr().out
    # folders: claim by claim, and a claim found in one folder only is named
    shutil.copy(REPO / "reports" / "flayer-eq4-unbounded.json", tmp_path / "a")
    assert cli.main(["diff", str(tmp_path / "a"), str(tmp_path / "b")]) == 1
    out = capsys.readouterr().out
    assert "genefl-uplink-bytes: 3 difference(s)" in out  # the verdict and two questions
    assert "flayer-eq4-unbounded: only in" in out


@pytest.mark.parametrize("second, rtol, says", [
    ("other-claim", "0", "different claims"),
    ("same", "nan", "rtol must be"),
    ("same", "-1", "rtol must be"),
    ("not-an-object", "0", "not a JSON object"),
    ("missing-folder", "0", "does not exist"),
    ("missing-file", "0", "does not exist"),
    ("a-folder", "0", "is a folder"),
    ("too-deep", "0", "nested too deeply"),
])
def test_bad_input_is_one_error_line(data, tmp_path, capsys, second, rtol, says):
    a = _write(tmp_path / "a", data)
    b = {"other-claim": REPO / "reports" / "flayer-eq4-unbounded.json", "same": a,
         "missing-folder": tmp_path / "nowhere"}.get(second)
    if second == "not-an-object":
        b = tmp_path / "list.json"
        b.write_text("[1, 2]")
    if second == "missing-folder":
        a = tmp_path / "a"
    if second in ("missing-file", "a-folder"):
        b = tmp_path / ("nothing.json" if second == "missing-file" else "a")
    if second == "too-deep":
        b = tmp_path / "deep.json"
        b.write_text(json.dumps({**data, "stability": "@"}).replace('"@"', "[" * 5000 + "]" * 5000))
    assert cli.main(["diff", str(a), str(b), "--rtol", rtol]) == 2
    err = capsys.readouterr().err
    assert err.startswith("audit: error: ") and says in err and err.count("\n") == 1


def test_hostile_field_names_print_short_and_inert(data, capsys, tmp_path):
    other = copy.deepcopy(data)
    other["estimates"].append({**other["estimates"][0], "name": "x" * 10_000})
    other["estimates"].append({**other["estimates"][0], "name": "\x1b[31mred\x1b[0m"})
    a, b = _write(tmp_path / "a", data), _write(tmp_path / "b", other)
    assert cli.main(["diff", str(a), str(b)]) == 1
    out = capsys.readouterr().out
    assert "\x1b" not in out and max(len(line) for line in out.splitlines()) < 300


def test_numbers_compare_as_numbers():
    nd = report._num_differs
    assert nd(float("inf"), 1.0, 0, 0) and nd(float("inf"), float("-inf"), 1, 1)
    assert not nd(float("inf"), float("inf"), 0, 0)
    assert not nd(float("nan"), float("nan"), 0, 0) and nd(float("nan"), 1.0, 1, 1)
    assert nd(True, 1, 0, 0) and nd(0, False, 1, 1)  # a boolean is no number
    assert nd(1.0, 1.001, 1e-4, 0) and not nd(1.0, 1.001, 1e-2, 0)
    assert not nd(0.0, 1e-12, 0.5, 1e-9)  # near 0 only an absolute tolerance helps


def test_texts_compare_their_numbers_within_the_tolerance():
    td = report._text_differs
    a, b = "mean = 0.8261, 95% CI [0.7837, 0.9233]", "mean = 0.8262, 95% CI [0.7837, 0.9233]"
    assert td(a, b, 0, 0)  # exactly, by default
    assert not td(a, b, 1e-9, 0)  # one unit in the last printed place: rounding
    assert td(a, "mean = 0.8300, 95% CI [0.7837, 0.9233]", 1e-3, 0)
    assert td(a, a.replace("mean", "median"), 1, 1)  # words never move
    assert not td("p = 1.5e-05", "p = 1.6e-05", 1e-9, 0)


def test_settings_looks_and_config_decide_and_names_that_repeat_are_kept(data):
    base = copy.deepcopy(data)
    base["settings"] = [{"setting": "base", "verdict": "CONFIRMED"},
                        {"setting": "depth=4", "verdict": "CONFIRMED"}]
    base["looks"] = [{"look": 1, "n": 10, "verdict": "CONFIRMED"}]
    base["estimates"] = base["estimates"] + [dict(base["estimates"][0])]  # a repeated name
    other = copy.deepcopy(base)
    other["settings"][1]["verdict"] = "INCONCLUSIVE"
    other["looks"][0]["verdict"] = "INCONCLUSIVE"
    other["config"] = {**(other.get("config") or {}), "rounds": 999}
    other["estimates"][-1]["value"] = 123.0  # the second of the two with one name
    found, _ = report.compare(base, other)
    name = base["estimates"][0]["name"]
    assert any(f.startswith("settings.depth=4.verdict") for f in found)
    assert any(f.startswith("looks.1.verdict") for f in found)
    assert any(f.startswith("config.rounds") for f in found)
    assert any(f.startswith(f"estimates.{name}#2.value") for f in found)


def test_folders_compare_reports_of_claims_not_registered_here(data, tmp_path, capsys):
    plugin = {**copy.deepcopy(data), "id": "someones-claim"}
    for folder in ("a", "b"):
        _write(tmp_path / folder, plugin)
    assert cli.main(["diff", str(tmp_path / "a"), str(tmp_path / "b")]) == 0
    assert "someones-claim: no difference in what decides" in capsys.readouterr().out
