"""Issue 28's property: every subcommand, driven with hostile paths, values and files
(FIFOs, links to /dev/zero, huge integers, lone surrogates, escape sequences, tampered
locks and checkpoints' plans, hostile plugins), exits 0 or 2, says a failure in one line
on stderr with no traceback, touches no file outside --out and the cache, and overwrites
nothing that existed before. No real experiment runs: only the instant toy claim (and a
hostile plugin built from it) may execute."""
from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import io
import json
import os
import shutil
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from audit import claims as claims_mod
from audit.runner import execute

TOY_LOCK = {"toy-claim": {"smoke": {"verdict": "CONFIRMED", "parts": {"gain": "CONFIRMED"}}}}
FIFO, DEVZERO = ("fifo",), ("link", "/dev/zero")
HUGE = "9" * 5000
ESC = "\x1b[2J\x1b]0;title\x07"
HOSTILE_TEXT = st.sampled_from(["\udc80", ESC, HUGE, "../../x", "/etc/passwd", "", "-",
                                "\x00", "a\nb", "x" * 300, "ü\u2603"])


def _tree(root: Path) -> dict[str, str]:
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
                out[rel] = "dir" if p.is_dir() else "special"
    return out


def _case(argv, files=None, plugins=()):
    return {"argv": argv, "files": files or {}, "plugins": tuple(plugins)}


@st.composite
def run_out(draw):
    kind = draw(st.sampled_from(["fresh", "foreign", "file", "fifo", "devnull", "link",
                                 "nested-foreign"]))
    files, out = {}, "out"
    if kind == "foreign":
        files["out/" + draw(st.sampled_from(["README.md", "toy-claim.json", "a.txt"]))] = "mine"
    elif kind == "file":
        files["out"] = "a file"
    elif kind == "fifo":
        files["out"] = FIFO
    elif kind == "devnull":
        out = "/dev/null"
    elif kind == "link":
        files["elsewhere/README.md"] = "theirs"
        files["out"] = ("link", "elsewhere")
    elif kind == "nested-foreign":
        files["out/sub/x"] = "mine"
    extra = draw(st.sampled_from([[], ["--data-dir", "fifo"], ["--data-dir", "dd"]]))
    if extra:
        files["fifo"], files["dd/cifar-10-batches-py/data_batch_1"] = FIFO, FIFO
    return _case(["run", "toy-claim", "--quiet", "--out", out, *extra], files)


@st.composite
def hostile_values(draw):
    cmd = draw(st.sampled_from(["run", "verify", "estimate"]))
    what = draw(st.sampled_from(["set", "seeds", "seed-list", "id", "scale", "max-seeds"]))
    cid = draw(st.sampled_from(["toy-claim", "flayer-eq4-unbounded", "fedtlu-score-undefined",
                                "genefl-uplink-bytes", "flayer-masked-zero"]))
    v = draw(HOSTILE_TEXT)
    if what in ("seeds", "seed-list", "max-seeds"):
        cid = "toy-claim"  # an exact claim takes no seeds: it would run
    if what == "set":
        key = draw(st.sampled_from(["effect", "rounds", "dataset", "model_kw", "sizes", v]))
        value = draw(st.sampled_from([v, HUGE, "-" + HUGE, "1e999", "NaN", '["x"]',
                                      '{"k": 1}', "[" * 5000, '"\\ud800"', "1e23",
                                      "100000000000000000000000"]))
        argv = [cmd, cid, "--set", f"{key}={value}"]
    elif what == "seeds":
        argv = [cmd, cid, "--seeds", draw(st.sampled_from([HUGE, "10000000000000", "-1",
                                                           v]))]
    elif what == "seed-list":
        argv = [cmd, cid, "--seed-list", draw(st.sampled_from([HUGE, "1," + HUGE, v,
                                                               "1,1", "0,4294967296"]))]
    elif what == "id":
        argv = [cmd, v or "x"]
    elif what == "scale":
        argv = [cmd, cid, "--scale", v]
    else:
        argv = ["run", cid, "--until-decided", "--max-seeds",
                draw(st.sampled_from(["1", "0", HUGE, "1000"]))]
    if argv[0] != "estimate":
        argv.append("--quiet")
    return _case(argv)


@st.composite
def hostile_lock(draw):
    plan = draw(st.sampled_from([{"looks": [5, 10, 1000000]}, {"looks": [2.7, 3.9]},
                                 {"looks": [10, 5]}, {"looks": "x"}, [1], None]))
    content = draw(st.sampled_from([
        json.dumps({"toy-claim": {"smoke": {"verdict": "CONFIRMED", "plan": plan}}}),
        '{"toy-claim": {"smoke": {"verdict": "CONFIRMED", "seeds": [' + HUGE + "]}}}",
        '{"toy-claim": {"smoke": {"verdict": "\\udc80"}}}',
        json.dumps({"toy-claim": {"smoke": {"verdict": "CONFIRMED",
                                            "questions": {"q": "MAYBE"}}}}),
        FIFO, DEVZERO]))
    argv = draw(st.sampled_from([["list"], ["verify", "toy-claim", "--quiet"],
                                 ["run", "toy-claim", "--quiet", "--out", "out"],
                                 ["report", "--out", "out"]]))
    files = {"locks.json": content}
    if argv[0] == "report":
        files["out/.audit-output"] = "marker"
    return _case(argv, files)


@st.composite
def hostile_files(draw):
    content = draw(st.sampled_from([FIFO, DEVZERO, "[" * 100_000, '{"id": "\\udc80"}',
                                    '{"id": ' + HUGE + "}", b"\xff\xfe", ESC]))
    if draw(st.booleans()):
        return _case(["report", "--out", "out"],
                     {"out/.audit-output": "marker", "out/toy-claim.json": content})
    return _case(["review", "rec.json", "--markdown", "--out", "out"], {"rec.json": content})


@st.composite
def hostile_other(draw):
    v = draw(HOSTILE_TEXT)
    which = draw(st.sampled_from(["tune", "new", "bench", "estimate"]))
    if which == "tune":
        argv = ["tune", "toy-claim", "--arms", "base", "--metric",
                draw(st.sampled_from(["curve", "nope", v])), "--seeds",
                draw(st.sampled_from(["2", "1000000000000", "20000000", HUGE]))]
        if draw(st.booleans()):
            argv += ["--grid", "effect=" + ",".join(map(str, range(300)))]
    elif which == "new":
        argv = ["new", draw(st.sampled_from(["my-claim", "../x", v or "x"])), "--paper",
                draw(st.sampled_from(["2412.07062", v or "x"])), "--out-dir", "newpkg",
                "--package", draw(st.sampled_from(["audit", "torch", "os", "json", v or "x"]))]
    elif which == "bench":
        argv = ["bench", "--device", v or "tpu", "--repeats",
                draw(st.sampled_from(["0", HUGE, "-1"]))]
    else:
        argv = ["estimate", "toy-claim", "--rounds", draw(st.sampled_from(["3,1", HUGE, v]))]
    return _case(argv)


def _evil_run(kind):
    def run(spec, ctx):
        if kind == "raise":
            raise RuntimeError(ESC + "boom")
        if kind == "exit":
            raise SystemExit(3)
        if kind == "set":
            return {"score": {1, 2}}
        return {0: 1.0}
    return run


@st.composite
def hostile_plugin(draw):
    kind = draw(st.sampled_from(["import-exit", "import-error", "no-claim", "raise", "exit",
                                 "set", "int-keys"]))
    argv = draw(st.sampled_from([["list"], ["run", "evil-claim", "--quiet", "--out", "out",
                                            "--no-cache"],
                                 ["run", "evil-claim", "--quiet", "--out", "out"]]))
    if kind.startswith("import") or kind == "no-claim":
        argv = ["list"]
    return _case(argv, plugins=[kind])


class _EP:
    name, value, dist, module = "evil", "evilpkg.claim", None, "evilpkg.claim"

    def __init__(self, kind, toy_claim):
        self.kind, self.toy_claim = kind, toy_claim

    def load(self):
        if self.kind == "import-exit":
            raise SystemExit(3)
        if self.kind == "import-error":
            raise ImportError(ESC + "no module")
        if self.kind == "no-claim":
            return object()
        return dataclasses.replace(self.toy_claim, id="evil-claim",
                                   run=_evil_run(self.kind))


class _RunStarted(Exception):
    pass


@settings(max_examples=40, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                 HealthCheck.data_too_large])
@given(data=st.data())
def test_every_subcommand_survives_hostile_input(data, toy, tmp_path, monkeypatch):
    import audit.cli as cli

    case = data.draw(st.one_of(run_out(), hostile_values(), hostile_lock(), hostile_files(),
                               hostile_other(), hostile_plugin()))
    real_execute = execute

    def guarded_execute(claim, *args, **kwargs):  # only instant claims may run
        if claim.id not in ("toy-claim", "evil-claim"):
            raise _RunStarted(f"{claim.id} started running for {case['argv']}")
        return real_execute(claim, *args, **kwargs)

    def no_estimate(*a, **k):
        raise _RunStarted(f"estimate started for {case['argv']}")

    monkeypatch.setattr(cli, "execute", guarded_execute)
    monkeypatch.setattr("audit.estimate.estimate", no_estimate)
    monkeypatch.setattr("audit.fl.bench.run_bench", no_estimate)
    monkeypatch.setattr(claims_mod, "_entry_points",
                        lambda: [_EP(k, toy.CLAIM) for k in case["plugins"]])
    monkeypatch.delenv("AUDIT_MAX_SEEDS", raising=False)
    root = Path(tempfile.mkdtemp(dir=tmp_path))
    work = root / "work"
    work.mkdir()
    monkeypatch.setenv("AUDIT_LOCKS", str(work / "locks.json"))
    monkeypatch.setenv("AUDIT_CACHE", str(work / "cache"))
    (work / "locks.json").write_text(json.dumps(TOY_LOCK))
    for rel, content in case["files"].items():
        path = work / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.exists() or path.is_symlink():
            path.unlink()
        if content == FIFO:
            os.mkfifo(path)
        elif isinstance(content, tuple):
            path.symlink_to(content[1])
        else:
            (path.write_bytes if isinstance(content, bytes) else path.write_text)(content)
    before = _tree(root)
    err, out = io.StringIO(), io.StringIO()
    cwd = os.getcwd()
    os.chdir(work)
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
            try:
                rc = cli.main(case["argv"])
            except SystemExit as exc:
                rc = exc.code
    finally:
        os.chdir(cwd)
    text = err.getvalue()
    lines = text.strip().splitlines()
    assert rc in (0, 2), (case, rc, text)
    assert "Traceback" not in text, (case, text)
    if rc == 2:
        assert len(lines) == 1 and lines[0].startswith("audit"), (case, text)
    assert len(lines) <= 1, (case, text)
    assert "\x1b" not in text + out.getvalue(), case
    after = _tree(root)
    for rel, digest in before.items():  # nothing that existed was changed or removed
        if not rel.startswith(("work/out", "work/cache")):
            assert after.get(rel) == digest, (case, rel)
    new = [k for k in after if k not in before]
    allowed = ("work/out", "work/cache", "work/newpkg")
    assert all(k.startswith(allowed) for k in new), (case, new)
    shutil.rmtree(root)
