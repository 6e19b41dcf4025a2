"""Hostile and broken input to the CLI: report paths stay inside --out, no symlink is
followed, bad lock files and review records are one line before any work, verify fails
without a lock, a corrupt sibling does not break the index, the package metadata does
not cap PyTorch; and a property-based sweep of bad arguments and files."""
from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import toyclaim
from audit import claims as claims_mod
from audit import report
from audit.claims import AuditError
from audit.cli import main
from audit.runner import SCALES, Cache, execute, make_context

REPO = Path(__file__).resolve().parents[1]
TOY_LOCK = {"toy-claim": {"smoke": {"verdict": "CONFIRMED", "parts": {"gain": "CONFIRMED"}}}}


def _one_error_line(capsys, start: str = "audit") -> str:
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert "Traceback" not in err and lines[0].startswith(start), err
    return lines[0]


def _tree(root: Path) -> dict[str, str]:
    """Every entry under root (not following links): path -> content hash or link text."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = Path(dirpath) / name
            rel = str(p.relative_to(root))
            if p.is_symlink():
                out[rel] = "link:" + os.readlink(p)
            elif p.is_file():
                out[rel] = hashlib.sha256(p.read_bytes()).hexdigest()
            else:
                out[rel] = "dir"
    return out


@pytest.fixture
def toy_report(toy, tmp_path):
    """A valid toy report's JSON data (computed once, no files written)."""
    res = execute(toy.CLAIM, make_context(toy.CLAIM, "smoke"), cache=Cache(tmp_path / "c0"),
                  progress=False)
    return report.to_json(res)


# ------------------------------------------------------------------ 1. report paths
@pytest.mark.parametrize("bad_id", ["../../elsewhere/x", "../x", "/tmp/abs-x", "a/b", "..",
                                    ".hidden", "x" * 90, "", "a\nb"])
def test_write_data_refuses_an_id_that_is_not_a_safe_name(toy_report, tmp_path, bad_id):
    out = tmp_path / "a" / "b" / "out"
    out.mkdir(parents=True)
    before = _tree(tmp_path)
    data = dict(toy_report, id=bad_id)
    with pytest.raises(AuditError, match="not a safe name"):
        report.write_data(data, out)
    assert _tree(tmp_path) == before


@pytest.mark.parametrize("bad_name", ["../../../escaped", "../x", "/tmp/abs-fig", "a/b"])
def test_write_data_refuses_a_figure_name_outside_out(toy_report, tmp_path, bad_name):
    out = tmp_path / "a" / "out"
    out.mkdir(parents=True)
    before = _tree(tmp_path)
    figures = [dict(toy_report["figures"][0], name=bad_name)]
    with pytest.raises(AuditError, match="figure name"):
        report.write_data(dict(toy_report, figures=figures), out)
    assert _tree(tmp_path) == before


def test_audit_report_refuses_a_report_whose_id_points_elsewhere(toy, tmp_path, capsys,
                                                                 monkeypatch):
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "deep" / "er" / "out"
    out.parent.mkdir(parents=True)
    assert main(["run", "toy-claim", "--out", str(out), "--quiet"]) == 0
    capsys.readouterr()
    data = json.loads((out / "toy-claim.json").read_text())
    data["id"] = "../../elsewhere/x"
    (out / "toy-claim.json").write_text(json.dumps(data))
    before = _tree(tmp_path)
    assert main(["report", "--out", str(out)]) == 2
    assert "has id '../../elsewhere/x', not 'toy-claim'" in _one_error_line(capsys)
    assert _tree(tmp_path) == before and not (tmp_path / "deep" / "elsewhere").exists()


def test_writes_replace_symlinks_and_never_write_through_them(toy, tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["run", "toy-claim", "--out", str(out), "--quiet"]) == 0
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    targets = [out / "toy-claim.md", out / "README.md", out / "toy-claim" / "curve.png"]
    for t in targets:
        t.unlink()
        t.symlink_to(victim)
    assert main(["report", "--out", str(out)]) == 0
    assert victim.read_text() == "keep me"
    for t in targets:
        assert t.is_file() and not t.is_symlink(), t
    # the JSON too, when written from data (`audit report` reads it, so not linked there)
    data = json.loads((out / "toy-claim.json").read_text())
    (out / "toy-claim.json").unlink()
    (out / "toy-claim.json").symlink_to(victim)
    report.write_data(data, out)
    assert victim.read_text() == "keep me"
    assert json.loads((out / "toy-claim.json").read_text()) == data
    assert not (out / "toy-claim.json").is_symlink()
    assert not [p for p in out.rglob("*.tmp")]


def test_a_figure_folder_that_is_a_symlink_is_refused(toy, tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["run", "toy-claim", "--out", str(out), "--quiet"]) == 0
    capsys.readouterr()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    shutil.rmtree(out / "toy-claim")
    (out / "toy-claim").symlink_to(elsewhere, target_is_directory=True)
    assert main(["report", "--out", str(out)]) == 2
    line = _one_error_line(capsys)
    assert "symlink" in line or "outside" in line
    assert list(elsewhere.iterdir()) == []


def test_audit_report_refuses_malformed_figures_in_one_line(toy, tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["run", "toy-claim", "--out", str(out), "--quiet"]) == 0
    capsys.readouterr()
    data = json.loads((out / "toy-claim.json").read_text())
    data["figures"][0]["series"] = [{"label": "x", "x": [0, 1], "y": "not numbers"}]
    (out / "toy-claim.json").write_text(json.dumps(data))
    before = _tree(out)
    assert main(["report", "--out", str(out)]) == 2
    assert "can be rendered" in _one_error_line(capsys)
    assert _tree(out) == before


@pytest.mark.parametrize("key,value", [
    ("settings", [{"setting": "base", "verdict": []}]), ("settings", 5),
    ("searches", 5), ("searches", [{"question": 1}]), ("premise", {"effect": "x"}),
    ("premise", "reproduced")], ids=["settings-verdict", "settings-number", "searches-number",
                                     "searches-question", "premise-no-status",
                                     "premise-string"])
def test_audit_report_refuses_malformed_settings_searches_premise(toy, tmp_path, capsys,
                                                                  key, value):
    out = tmp_path / "out"
    assert main(["run", "toy-claim", "--out", str(out), "--quiet"]) == 0
    capsys.readouterr()
    data = json.loads((out / "toy-claim.json").read_text())
    data[key] = value
    (out / "toy-claim.json").write_text(json.dumps(data))
    before = _tree(out)
    assert main(["report", "--out", str(out)]) == 2
    assert repr(key) in _one_error_line(capsys)
    assert _tree(out) == before


# ------------------------------------------------------------------ 2. review --markdown
def _record(arxiv: str = "2412.07062") -> dict:
    return {"arxiv_id": arxiv,
            "skeptic_critique": {"concrete_test": "Toy test.", "load_bearing_attack": "Toy."},
            "falsifier": "Toy falsifier.",
            "referee_report": {"major_comments": [{"comment": "Toy major."}],
                               "minor_comments": ["Toy minor."]}}


def test_review_markdown_with_a_bad_record_keeps_coverage_md(tmp_path, capsys):
    out = tmp_path / "reports"
    out.mkdir()
    (out / ".audit-output").write_text("")  # an audit output folder (issue 28, item 1)
    (out / "coverage.md").write_text("the old coverage of four records")
    good = tmp_path / "good.json"
    good.write_text(json.dumps(_record()))
    bad = tmp_path / "bad.json"
    bad.write_text('{"arxiv_id": ')
    before = _tree(tmp_path)
    assert main(["review", str(good), str(bad), "--markdown", "--out", str(out)]) == 2
    line = _one_error_line(capsys, "audit: error: ")
    assert "bad.json" in line and "left as it was" in line
    assert _tree(tmp_path) == before
    # all good: written (atomically, through no symlink)
    victim = tmp_path / "victim.md"
    victim.write_text("keep")
    (out / "coverage.md").unlink()
    (out / "coverage.md").symlink_to(victim)
    assert main(["review", str(good), "--markdown", "--out", str(out)]) == 0
    assert victim.read_text() == "keep"
    assert not (out / "coverage.md").is_symlink()
    assert "Coverage of the review records" in (out / "coverage.md").read_text()


@pytest.mark.parametrize("markdown", [False, True])
def test_deeply_nested_review_json_is_one_line(tmp_path, capsys, markdown):
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 200_000 + "]" * 200_000)
    argv = ["review", str(deep), "--out", str(tmp_path / "out")]
    assert main(argv + (["--markdown"] if markdown else [])) == (2 if markdown else 1)
    assert "nested too deeply" in _one_error_line(capsys)
    assert not (tmp_path / "out").exists()


def test_a_record_with_several_problems_is_one_line(tmp_path, capsys):
    rec = tmp_path / "r.json"
    rec.write_text(json.dumps({"arxiv_id": 5}))
    assert main(["review", str(rec)]) == 1
    assert "arxiv_id" in _one_error_line(capsys, "audit review: ")


# ---------------------------------------------------------------------- 3. lock files
BAD_LOCKS = {
    "list": [1, 2],
    "entry-not-object": {"toy-claim": ["CONFIRMED"]},
    "scale-not-object": {"toy-claim": {"smoke": "CONFIRMED"}},
    "bad-verdict": {"toy-claim": {"smoke": {"verdict": "MAYBE"}}},
    "no-verdict": {"toy-claim": {"smoke": {"parts": {}}}},
    "parts-not-object": {"toy-claim": {"smoke": {"verdict": "CONFIRMED", "parts": [1]}}},
    "bad-part-verdict": {"toy-claim": {"smoke": {"verdict": "CONFIRMED",
                                                 "parts": {"gain": None}}}},
    "seeds-not-ints": {"toy-claim": {"smoke": {"verdict": "CONFIRMED", "seeds": "0-4"}}},
}


@pytest.mark.parametrize("name", sorted(BAD_LOCKS))
@pytest.mark.parametrize("argv", [["list"], ["run", "toy-claim", "--quiet"],
                                  ["verify", "toy-claim", "--quiet"]], ids=lambda a: a[0])
def test_a_malformed_lock_file_is_one_line_before_any_run(toy, tmp_path, capsys,
                                                          monkeypatch, name, argv):
    monkeypatch.chdir(tmp_path)
    locks = tmp_path / "locks.json"
    locks.write_text(json.dumps(BAD_LOCKS[name]))
    assert main(argv + (["--out", str(tmp_path / "out")] if argv[0] == "run" else [])) == 2
    line = _one_error_line(capsys, "audit: error: lock file ")
    assert str(locks) in line and "malformed" in line
    assert toy.CALLS == [] and not (tmp_path / "out").exists()


def test_write_lock_is_atomic(tmp_path, monkeypatch):
    from audit.verdict import Outcome

    locks = tmp_path / "locks.json"
    locks.write_text(json.dumps(TOY_LOCK))
    before = locks.read_bytes()

    def broken_fsync(fd):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", broken_fsync)
    with pytest.raises(AuditError, match="No space left"):
        claims_mod.write_lock("toy-claim", "full", Outcome.REFUTED, (), (0, 1), path=locks)
    assert locks.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["locks.json"]
    monkeypatch.undo()
    claims_mod.write_lock("toy-claim", "full", Outcome.REFUTED, (), (0, 1), path=locks)
    assert claims_mod.read_locks(locks)["toy-claim"]["full"]["verdict"] == "REFUTED"


def test_a_lock_file_in_a_missing_folder_or_without_flock_is_one_line(tmp_path,
                                                                      monkeypatch):
    import fcntl

    from audit.verdict import Outcome

    with pytest.raises(AuditError, match="cannot open .* to lock it"):
        claims_mod.write_lock("toy-claim", "full", Outcome.REFUTED, (), (0, 1),
                              path=tmp_path / "missing" / "locks.json")

    def no_locks(fd, op):
        raise OSError(37, "No locks available")

    monkeypatch.setattr(fcntl, "flock", no_locks)
    with pytest.raises(AuditError, match="cannot lock .*: No locks available"):
        claims_mod.write_lock("toy-claim", "full", Outcome.REFUTED, (), (0, 1),
                              path=tmp_path / "locks.json")
    assert not (tmp_path / "locks.json").exists()


# ------------------------------------------------------------------------ 4. --out
def test_an_out_that_cannot_be_written_is_found_before_the_run(toy, tmp_path, capsys):
    a_file = tmp_path / "a_file"
    a_file.write_text("x")
    dangling = tmp_path / "dangling"
    dangling.symlink_to(tmp_path / "missing" / "deeper")
    for out in (a_file / "reports", dangling):
        assert main(["run", "toy-claim", "--out", str(out), "--quiet"]) == 2
        assert "cannot be written" in _one_error_line(capsys, "audit: error: ")
    assert toy.CALLS == []


# ------------------------------------------------------------------------- 5. verify
def test_verify_without_a_lock_at_the_scale_fails_and_does_not_run(toy, tmp_path, capsys):
    (tmp_path / "locks.json").write_text(json.dumps(
        {"toy-claim": {"full": {"verdict": "CONFIRMED"}}}))
    assert main(["verify", "toy-claim", "--quiet"]) == 1
    line = _one_error_line(capsys, "NO LOCK toy-claim")
    assert "smoke scale" in line
    assert toy.CALLS == []
    (tmp_path / "locks.json").unlink()  # no lock file at all: the same
    assert main(["verify", "toy-claim", "--quiet"]) == 1
    _one_error_line(capsys, "NO LOCK toy-claim")


# ---------------------------------------------------------------- 6. corrupt sibling
@pytest.mark.parametrize("content", ["{oops", "[1, 2]", '{"id": "flayer-masked-zero"}'])
def test_a_corrupt_sibling_report_is_left_out_of_the_index(toy, tmp_path, capsys, content):
    out = tmp_path / "out"
    out.mkdir()
    (out / ".audit-output").write_text("")  # an audit output folder (issue 28, item 1)
    (out / "flayer-masked-zero.json").write_text(content)
    assert main(["run", "toy-claim", "--out", str(out), "--quiet"]) == 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("audit: warning: ")
    assert "flayer-masked-zero.json" in err[0] and "left out of the index" in err[0]
    index = (out / "README.md").read_text()
    assert "[`toy-claim`](toy-claim.md)" in index and "report unreadable" in index


# ------------------------------------------------------------------ 7. dependency caps
def test_pyproject_does_not_cap_torch_but_ci_pins_the_tested_pair():
    import tomllib

    meta = tomllib.loads((REPO / "pyproject.toml").read_text())
    deps = {d.split(">")[0].split("<")[0].split("=")[0].strip(): d
            for d in meta["project"]["dependencies"]}
    for name in ("torch", "torchvision"):
        assert ">=" in deps[name] and "<" not in deps[name].replace(">=", ""), deps[name]
    ci = (REPO / ".ci" / "run").read_text()
    assert "torch==" in ci and "torchvision==" in ci


# --------------------------------------------------------- 8. property-based sweep
KNOWN_IDS = set(claims_mod.registry()) | {"toy-claim"}
ROUNDS_CLAIMS = ["flayer-masked-zero", "fedtlu-lower-bound", "genefl-inverted-cosine",
                 "genefl-uplink-bytes"]
NAME = st.text("abcdefghijklmnopqrstuvwxyz0123456789-_", min_size=1, max_size=24)
JUNK = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=8),
                    lambda inner: st.lists(inner, max_size=3)
                    | st.dictionaries(st.text(max_size=5), inner, max_size=3),
                    max_leaves=6)
DEEP = "[" * 100_000 + "]" * 100_000
NOT_JSON = st.sampled_from(["{oops", "", "[1, 2", "{'single': 1}", "\x00", "nan nan"])


def _case(argv, rc=2, files=None, start="audit", may_write=()):
    return {"argv": argv, "rc": rc, "files": files or {}, "start": start,
            "may_write": tuple(may_write)}


@st.composite
def unknown_id(draw):
    cid = draw(NAME.filter(lambda s: s not in KNOWN_IDS and not s.startswith("-")))
    return _case([draw(st.sampled_from(["run", "verify", "estimate"])), cid])


@st.composite
def bad_scale(draw):
    scale = draw(st.text("abcdefghijklmnopqrstuvwxyz0123456789_.", min_size=1,
                         max_size=12).filter(lambda s: s not in SCALES))
    return _case([draw(st.sampled_from(["run", "verify"])), "toy-claim", "--scale", scale])


@st.composite
def bad_seeds(draw):
    n = draw(st.integers(-10**9, 1) | st.integers(10**3, 10**6))  # big: refused, not OOM
    return _case(["run", "toy-claim", "--seeds", str(n), "--quiet"])


@st.composite
def bad_seed_list(draw):
    seeds = draw(st.lists(st.integers(-3, 12), max_size=6))
    bad = len(seeds) < 2 or len(set(seeds)) < len(seeds) or min(seeds) < 0
    tokens = [str(s) for s in seeds]
    if not bad or draw(st.booleans()):
        tokens.insert(draw(st.integers(0, len(tokens))),
                      draw(st.sampled_from(["x", "1.5", "0x3", "--", "一", "1e3", "+-1"])))
    return _case(["run", "toy-claim", "--seed-list", ",".join(tokens), "--quiet"])


@st.composite
def bad_set(draw):
    kind = draw(st.sampled_from(["toy-value", "toy-unknown", "rounds"]))
    values = st.sampled_from(["abc", "-5", "0", "-0.5", "[1]", "{}", "true", "null", "NaN",
                              "Infinity", '"1"', "1e999"])
    if kind == "toy-value":  # 0 is a valid effect or noise (an ablation), so not drawn
        cid, key = "toy-claim", draw(st.sampled_from(["effect", "noise"]))
        value = draw(values.filter(lambda v: v != "0"))
    elif kind == "toy-unknown":
        cid, value = "toy-claim", draw(values)
        key = draw(NAME.filter(lambda k: k not in toyclaim.CLAIM.scales["smoke"]))
    else:
        cid, key = draw(st.sampled_from(ROUNDS_CLAIMS)), "rounds"
        value = draw(st.sampled_from(["abc", "-5", "0", "1.5", "[1]", "{}", "true", "null"]))
    return _case(["run", cid, "--set", f"{key}={value}", "--quiet"])


def _bad_report(draw, base: dict) -> str | bytes:
    how = draw(st.sampled_from(["not-json", "not-object", "missing", "wrong-type", "id",
                                "figure-name", "figures", "deep", "bytes"]))
    data = json.loads(json.dumps(base))
    if how == "not-json":
        return draw(NOT_JSON)
    if how == "not-object":
        return json.dumps(draw(st.lists(JUNK, max_size=3) | st.integers() | st.text()))
    if how == "missing":
        for key in draw(st.lists(st.sampled_from(report.REQUIRED_KEYS), min_size=1,
                                 unique=True)):
            del data[key]
    elif how == "wrong-type":
        wrong = {"seeds": ["0,1", 3, [None], [1.5], {"a": 1}],
                 "arms": ["a", [None], [1], {"a": 1}],
                 "estimates": ["x", [None], [{"value": 1}], {"a": 1}],
                 "parts": ["x", [None], [{"id": "p", "verdict": "MAYBE", "rule": "r"}]],
                 "environment": ["x", [1], None, 3],
                 "runtime_s": ["3", None, True, [1]],
                 "verdict": ["MAYBE", None, 1, "confirmed"],
                 "paper": ["x", None, {"short": "only"}]}
        key = draw(st.sampled_from(sorted(wrong)))
        data[key] = draw(st.sampled_from(wrong[key]))
    elif how == "id":
        data["id"] = draw(st.sampled_from(["../../elsewhere/x", "../x", "/tmp/x", "other",
                                           "a/b", None, 5]))
    elif how == "figure-name":
        data["figures"][0]["name"] = draw(st.sampled_from(
            ["../../../escaped", "../x", "/tmp/fig", "a/b", "", None, ".."]))
    elif how == "figures":
        data["figures"] = draw(st.sampled_from(["x", 5, [1], [{"name": "ok"}],
                                                [{"name": "ok", "series": "x"}]]))
    elif how == "deep":
        return DEEP
    else:
        return b"\xff\xfe{" + os.urandom(draw(st.integers(0, 8)))
    return json.dumps(data)


@st.composite
def bad_report(draw, base):
    content = _bad_report(draw, base)
    return _case(["report", "--out", "out"], files={"out/toy-claim.json": content})


@st.composite
def bad_lock(draw):
    how = draw(st.sampled_from(["not-json", "top", "entry", "lock", "verdict", "parts",
                                "seeds", "deep", "bytes"]))
    if how == "not-json":
        content = draw(NOT_JSON)
    elif how == "top":
        content = json.dumps(draw(st.lists(JUNK, max_size=3) | st.integers() | st.text()))
    elif how == "entry":
        content = json.dumps({"toy-claim": draw(st.lists(JUNK) | st.text() | st.integers())})
    elif how == "lock":
        content = json.dumps({"toy-claim": {"smoke": draw(st.lists(JUNK) | st.text())}})
    elif how == "verdict":
        v = draw(JUNK.filter(lambda v: v not in claims_mod.LOCK_VERDICTS))
        content = json.dumps({"toy-claim": {"smoke": {"verdict": v}}})
    elif how == "parts":
        parts = draw(st.lists(JUNK, max_size=2) | st.text() | st.dictionaries(
            st.text(max_size=4), JUNK.filter(lambda v: v not in claims_mod.LOCK_VERDICTS),
            min_size=1, max_size=2))
        content = json.dumps({"toy-claim": {"smoke": {"verdict": "CONFIRMED",
                                                      "parts": parts}}})
    elif how == "seeds":
        seeds = draw(st.text() | st.lists(st.text(max_size=3), min_size=1, max_size=3))
        content = json.dumps({"toy-claim": {"smoke": {"verdict": "CONFIRMED",
                                                      "seeds": seeds}}})
    elif how == "deep":
        content = DEEP
    else:
        content = b"\xff\xfe{" + os.urandom(draw(st.integers(0, 8)))
    argv = draw(st.sampled_from([["list"], ["run", "toy-claim", "--quiet", "--out", "out"],
                                 ["verify", "toy-claim", "--quiet"],
                                 ["report", "--out", "out"]]))
    files = {"locks.json": content}
    if argv[0] == "report":
        files["out/.keep"] = ""
    return _case(argv, files=files, start="audit: error: lock file ")


@st.composite
def bad_review(draw):
    how = draw(st.sampled_from(["not-json", "not-object", "arxiv", "lists", "items",
                                "concrete", "deep", "bytes"]))
    rec = _record()
    if how == "not-json":
        content = draw(NOT_JSON)
    elif how == "not-object":
        content = json.dumps(draw(st.lists(JUNK, max_size=3) | st.integers() | st.text()))
    elif how == "deep":
        content = DEEP
    elif how == "bytes":
        content = b"\xff\xfe{" + os.urandom(draw(st.integers(0, 8)))
    else:
        if how == "arxiv":
            rec["arxiv_id"] = draw(st.sampled_from([None, 5, "", "   ", [], "0000.00000"]))
        elif how == "lists":
            rec["referee_report"][draw(st.sampled_from(["major_comments", "minor_comments"]))
                                  ] = draw(st.sampled_from([None, "x", 5, {"a": 1}]))
        elif how == "items":
            rec["referee_report"]["major_comments"].append(
                draw(st.sampled_from([None, 5, {"comment": 5}, {"no": "comment"}, []])))
        else:
            rec["skeptic_critique"] = draw(st.sampled_from(
                [None, "x", {}, {"concrete_test": 5}]))
        content = json.dumps(rec)
    markdown = draw(st.booleans())
    if markdown:
        argv = ["review", "rec.json", "--markdown", "--out", "out"]
        files = {"rec.json": content, "out/coverage.md": "old coverage"}
        return _case(argv, rc=2, files=files, start="audit: error: ")
    return _case(["review", "rec.json", "--out", "out"], rc=1, files={"rec.json": content},
                 start="audit review: ")


@st.composite
def verify_mismatch(draw):
    how = draw(st.sampled_from(["flip", "no-lock"]))
    if how == "flip":
        lock = {"toy-claim": {"smoke": {"verdict": draw(st.sampled_from(
            ["REFUTED", "INCONCLUSIVE"]))}}}
        return _case(["verify", "toy-claim", "--quiet"], rc=1,
                     files={"locks.json": json.dumps(lock)}, start="FLIPPED toy-claim",
                     may_write=["cache"])
    scale = draw(st.sampled_from(["full", "other"]))
    lock = {"toy-claim": {scale: {"verdict": "CONFIRMED"}}}
    return _case(["verify", "toy-claim", "--quiet"], rc=1,
                 files={"locks.json": json.dumps(lock)}, start="NO LOCK toy-claim")


class _RunStarted(Exception):
    pass


def _repo_snapshot() -> dict[str, str]:
    snap = {"audit/locks.json": hashlib.sha256(
        (REPO / "audit" / "locks.json").read_bytes()).hexdigest()}
    snap.update({f"reports/{k}": v for k, v in _tree(REPO / "reports").items()})
    snap["(top level)"] = ",".join(sorted(p.name for p in REPO.iterdir()))
    return snap


@settings(max_examples=90, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                 HealthCheck.data_too_large])
@given(data=st.data())
def test_bad_arguments_and_files_give_one_line_and_write_nothing(data, toy, toy_report,
                                                                 tmp_path, monkeypatch):
    import audit.cli as cli

    repo_before = _repo_snapshot()
    case = data.draw(st.one_of(unknown_id(), bad_scale(), bad_seeds(), bad_seed_list(),
                               bad_set(), bad_report(toy_report), bad_lock(), bad_review(),
                               verify_mismatch()))
    real_execute = execute  # audit.runner's, not a guard left by an earlier example

    def guarded_execute(claim, *args, **kwargs):  # only the instant toy claim may run
        if claim.id != "toy-claim" or case["start"] != "FLIPPED toy-claim":
            raise _RunStarted(f"{claim.id} started running for {case['argv']}")
        return real_execute(claim, *args, **kwargs)

    monkeypatch.setattr(cli, "execute", guarded_execute)
    monkeypatch.delenv("AUDIT_MAX_SEEDS", raising=False)
    root = Path(tempfile.mkdtemp(dir=tmp_path))
    scratch = root / "work"
    scratch.mkdir()
    monkeypatch.setenv("AUDIT_LOCKS", str(scratch / "locks.json"))
    monkeypatch.setenv("AUDIT_CACHE", str(scratch / "cache"))
    (scratch / "locks.json").write_text(json.dumps(TOY_LOCK))
    for rel, content in case["files"].items():
        path = scratch / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        (path.write_bytes if isinstance(content, bytes) else path.write_text)(content)
    before = _tree(root)
    toy.CALLS.clear()
    cwd = os.getcwd()
    err, out = io.StringIO(), io.StringIO()
    os.chdir(scratch)
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
            try:
                rc = main(case["argv"])
            except SystemExit as exc:
                rc = exc.code
    finally:
        os.chdir(cwd)
    lines = err.getvalue().strip().splitlines()
    assert rc == case["rc"], (case["argv"], rc, err.getvalue())
    assert len(lines) == 1, (case["argv"], err.getvalue())
    assert "Traceback" not in err.getvalue() and lines[0].startswith(case["start"]), (
        case["argv"], lines)
    after = _tree(root)
    changed = {k for k in set(before) | set(after) if before.get(k) != after.get(k)}
    allowed = tuple(f"work/{w}" for w in case["may_write"])
    assert all(k.startswith(allowed) for k in changed) if allowed else not changed, (
        case["argv"], sorted(changed))
    if case["start"] != "FLIPPED toy-claim":
        assert toy.CALLS == []
    shutil.rmtree(root)
    assert _repo_snapshot() == repo_before
