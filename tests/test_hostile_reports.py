"""Hostile input is normal input: report JSON, regime maps, lock files and review records
come from elsewhere. What they hold is rendered as inert markdown (no table broken by a
pipe or a newline, no raw HTML), a bad value is one clear error naming its file, and
nothing is written that audit would then refuse to read back."""
from __future__ import annotations

import json
import os
import re
import warnings
from pathlib import Path

import pytest

from audit import coverage, report, safeio
from audit.claims import AuditError
from audit.cli import main
from audit.runner import Cache, execute, make_context

INJECT = "a | b\n# heading <img src=x onerror=alert(1)>"


@pytest.fixture
def data(toy, tmp_path):
    res = execute(toy.CLAIM, make_context(toy.CLAIM, "smoke"), cache=Cache(tmp_path / "c"),
                  progress=False)
    return report.to_json(res)


def _cells(line: str) -> list[str]:
    """The cells of one markdown table line (an escaped pipe is no cell boundary)."""
    return re.split(r"(?<!\\)\|", line.strip().strip("|"))


def _assert_inert(md: str) -> None:
    assert "<img" not in md and "<script" not in md
    assert not any(line.startswith("# heading") for line in md.splitlines())


def test_a_table_header_from_the_json_cannot_add_columns_or_lines(data):
    data["tables"] = [{"title": "t", "columns": [INJECT], "rows": [[1]]}]
    md = report.render_markdown(data).splitlines()
    header = md[md.index("### t") + 2]
    assert len(_cells(header)) == 1 and "a \\| b" in header
    _assert_inert("\n".join(md))


@pytest.mark.parametrize("field", ["cpu", "device", "backend"])
def test_an_environment_field_is_inert_in_the_reproduce_line(data, field):
    data["environment"][field] = INJECT + " `code` [x](javascript:alert(1))"
    md = report.render_markdown(data)
    _assert_inert(md)
    line = next(ln for ln in md.splitlines() if ln.startswith("- Environment:"))
    assert "](javascript:" not in line and "\n" not in line


def test_a_scale_name_in_the_question_table_header_is_inert(data, toy, tmp_path):
    out = tmp_path / "out"
    report.write_data({**data, "scale": INJECT}, out)
    text = report.write_index(out, {"toy-claim": toy.CLAIM}).read_text()
    _assert_inert(text)
    header = next(ln for ln in text.splitlines() if ln.startswith("| claim | question"))
    assert "a \\| b # heading &lt;img" in header


def test_a_scale_name_of_the_lock_file_is_inert_in_the_index(data, toy, tmp_path):
    lock_file = Path(os.environ["AUDIT_LOCKS"])  # the toy's own (tests/conftest.py)
    locks = json.loads(lock_file.read_text())
    locks["toy-claim"][INJECT] = {"verdict": "CONFIRMED"}
    lock_file.write_text(json.dumps(locks))
    out = tmp_path / "out"
    report.write_data(data, out)
    text = report.write_index(out, {"toy-claim": toy.CLAIM}).read_text()
    _assert_inert(text)
    row = next(ln for ln in text.splitlines() if ln.startswith("| [`toy-claim`]"))
    assert len(_cells(row)) == 10  # the columns of the index, none added


def test_a_config_key_cannot_close_its_code_span_into_raw_html(data):
    data["config"] = {"k`<script>alert(1)</script>`": 1}
    md = report.render_markdown(data)
    assert "<script" not in md and "&lt;script&gt;" in md


def _regime_maps(key: str, label: str) -> list[dict]:
    return [{"declared": {"axes": {key: [1]}, "effect": ["better", "base"],
                          "scale": "smoke", "seeds": 3, "level": 0.9},
             "cells": [{"stats": {"status": "shows", "mean": 1.0, "sd": 1.0, "n": 3,
                                  "low": 0.5, "high": 1.5},
                        "labels": {key: label}, "a": [1.0], "b": [0.0]}],
             "chosen": 0}]


def test_a_regime_map_axis_and_label_are_inert_in_its_table(data):
    data["regime_maps"] = _regime_maps("<script>k</script>", "v | w")
    md = report.render_markdown(data).splitlines()
    assert not any("<script" in ln for ln in md)
    head = md.index("## Where the paper's own effect appears (regime map)")
    table = [ln for ln in md[head:] if ln.startswith("|")][:3]
    assert [len(_cells(ln)) for ln in table] == [7, 7, 7]
    assert table[0].startswith("| &lt;script&gt;k&lt;/script&gt; |")


def test_question_text_is_escaped_once(data):
    data["questions"][0]["asks"] = "is eta*L > 2 & more?"
    md = report.render_markdown(data)
    assert "is eta*L &gt; 2 &amp; more?" in md
    assert "&amp;gt;" not in md and "&amp;amp;" not in md


@pytest.mark.parametrize("value", ["NaN", "Infinity", "-Infinity", "1e400", "1" + "0" * 400])
def test_a_non_finite_runtime_is_refused_naming_the_file(data, tmp_path, value):
    text = json.dumps(data).replace(f'"runtime_s": {json.dumps(data["runtime_s"])}',
                                    f'"runtime_s": {value}')
    (tmp_path / "toy-claim.json").write_text(text)
    with pytest.raises(AuditError, match=r"toy-claim\.json is malformed: 'runtime_s' must "
                                         r"be a finite number"):
        report.load(tmp_path, "toy-claim")


@pytest.mark.parametrize("bins", [5000, 0, -1, "auto", 2.5, True])
def test_histogram_bins_from_the_json_are_bounded(data, tmp_path, bins):
    data["figures"] = [{"name": "h", "title": "t", "xlabel": "x", "ylabel": "y",
                        "kind": "hist", "series": [{"label": "l", "y": [1, 2, 3],
                                                    "bins": bins}]}]
    with pytest.raises(AuditError, match="histogram bins; expected a whole number from 1 "
                                         "to 1000"):
        report.write_data(data, tmp_path / "out", source="x.json")
    assert not (tmp_path / "out").exists() or list((tmp_path / "out").iterdir()) == []


def test_matplotlib_warnings_about_the_data_are_not_printed(data, tmp_path):
    data["figures"] = [{"name": "f", "title": "t", "xlabel": "x", "ylabel": "y",
                        "logy": True, "series": [{"label": "l", "x": [1, 2],
                                                  "y": [-1.0, 0.0]}]}]
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        report.write_data(data, tmp_path / "out", source="x.json")
    assert [str(w.message) for w in seen] == []
    assert (tmp_path / "out" / "toy-claim" / "f.png").is_file()


def test_a_report_too_large_to_read_back_is_not_written(data, tmp_path, monkeypatch):
    monkeypatch.setattr(safeio, "MAX_JSON_BYTES", 2000)
    with pytest.raises(AuditError, match=r"x\.json would be written as more than"):
        report.write_data(data, tmp_path / "out", source="x.json")
    assert not (tmp_path / "out").exists() or list((tmp_path / "out").iterdir()) == []


def test_a_record_file_name_in_the_coverage_heading_is_inert():
    cov = coverage.RecordCoverage(source=f"/r/{INJECT}.json", arxiv_id="2412.07062",
                                  paper="FLAYER",
                                  rows=[coverage.Row("falsifier", "ours", reason="r")])
    md = coverage.render_markdown([cov])
    _assert_inert(md)
    assert "## FLAYER, arXiv 2412.07062 (a \\| b # heading &lt;img" in md


@pytest.mark.parametrize("path", ["falsifier", "skeptic_critique.load_bearing_attack"])
def test_a_record_item_that_is_not_text_is_a_problem_not_dropped(path):
    record = {"arxiv_id": "2412.07062",
              "skeptic_critique": {"concrete_test": "t", "load_bearing_attack": "a"},
              "falsifier": "f",
              "referee_report": {"major_comments": [], "minor_comments": []}}
    assert coverage.validate(record) == []
    *head, last = path.split(".")
    node = record[head[0]] if head else record
    node[last] = {"text": "x"}
    assert coverage.validate(record) == [f"field {path!r} must be a string, got dict"]
    node[last] = None  # absent in all but name: nothing to cover
    assert coverage.validate(record) == []


def test_a_record_path_that_is_a_device_is_not_called_missing():
    if not Path("/dev/null").exists():
        pytest.skip("no /dev/null here")
    with pytest.raises(AuditError, match="'/dev/null' is not a regular file or a folder"):
        coverage.record_files([Path("/dev/null")])


@pytest.mark.parametrize("command", ["report", "lock"])
def test_report_folder_that_is_a_file_is_not_called_missing(tmp_path, capsys, command):
    path = tmp_path / "file"
    path.write_text("x")
    assert main([command, "--out", str(path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"audit: error: report directory {str(path)!r} is not a directory"]


def test_md_text_leaves_no_link_from_the_data():
    # an inline link or image, a javascript: one included, and a way out of an image's
    # alt text all lose their "](", and a leading link definition is escaped; brackets
    # that make no link (an interval) are kept as they are
    from audit import safeio

    assert safeio.md_text("[c](javascript:alert(1))") == "[c]\\(javascript:alert(1))"
    assert safeio.md_text("x](javascript:alert(1)) y") == "x]\\(javascript:alert(1)) y"
    assert safeio.md_text("[r]: javascript:x") == "\\[r]: javascript:x"
    assert safeio.md_text("95% CI [0.1, 0.2] (Hall's)") == "95% CI [0.1, 0.2] (Hall's)"
    assert "](" not in safeio.md_text("![i](http://x/y.png) and [a](b)")


def test_a_huge_claim_id_or_lock_key_is_shortened_in_the_error(tmp_path, monkeypatch):
    # a lock file (from elsewhere) with a 1 MB claim id, and a 200k-character id asked
    # for: each error names it shortened, never the whole of it
    from audit import claims

    huge = "x" * 1_000_000
    locks = tmp_path / "locks.json"
    locks.write_text(json.dumps({huge: {"s": {"verdict": 5}}}))
    problem = claims._lock_problem(json.loads(locks.read_text()))
    assert problem is not None and len(problem) < 300 and "..." in problem
    problem = claims._lock_problem({huge: [1]})
    assert problem is not None and len(problem) < 300
    with pytest.raises(claims.AuditError) as err:
        claims.get("y" * 200_000)
    assert len(str(err.value)) < 2000 and "..." in str(err.value)


@pytest.mark.parametrize("stability", [
    [1, 2], "stable", {"loo_agree": "9", "loo_total": 10}, {"loo_agree": 11, "loo_total": 10},
    {"loo_agree": True, "loo_total": 3}, {"flip": "0.1", "resolution": 0.5},
    {"flip": 0.1, "resolution": -1.0}, {"flip": 0.1, "unit": ["points"]},
    {"flip_part": 7}])
def test_a_malformed_stability_is_one_error_naming_the_file(data, tmp_path, stability):
    bad = dict(data, stability=stability)
    (tmp_path / "toy-claim.json").write_text(json.dumps(bad))
    with pytest.raises(AuditError, match=r"toy-claim\.json is malformed: 'stability'"):
        report.load(tmp_path, "toy-claim")
