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
    b = _write(tmp_path / "b", moved)
    assert cli.main(["diff", str(a), str(a)]) == 0
    assert "no difference in what decides" in capsys.readouterr().out
    assert cli.main(["diff", str(a), str(b)]) == 1
    assert "verdict: " in capsys.readouterr().out
    # folders: claim by claim, and a claim found in one folder only is named
    shutil.copy(REPO / "reports" / "flayer-eq4-unbounded.json", tmp_path / "a")
    assert cli.main(["diff", str(tmp_path / "a"), str(tmp_path / "b")]) == 1
    out = capsys.readouterr().out
    assert "genefl-uplink-bytes: 1 difference(s)" in out
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
