"""Safe writing of output files: names checked, paths kept inside their folder, every
file replaced atomically and no symlink followed.

A write goes to a fresh temporary file in the target's own folder (created exclusively,
so never through an existing link) and is then renamed over the target with
``os.replace``: a reader sees the old file or the new one, never half of one, and a
symlink at the target is replaced by the file rather than written through.
"""
from __future__ import annotations

import contextlib
import os
import re
import stat
import tempfile
from pathlib import Path

from audit.errors import AuditError

# A report id or figure name becomes a file name: letters, digits, '.', '_', '-' only,
# starting with a letter or digit, at most 81 characters, and never '..'.
SAFE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,80}")


@contextlib.contextmanager
def folder_lock(folder: Path):
    """Hold an exclusive advisory lock (``flock``) on ``folder`` for a read-modify-write
    of a file in it: two processes updating the lock file or the reports index at once
    (pytest-xdist workers, two sweeps) then take turns instead of losing an update. The
    lock is on the folder itself, so no lock file is left behind; where ``flock`` does
    not exist (Windows) it is a no-op."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not on Linux/macOS
        yield
        return
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError as exc:
        raise AuditError(f"cannot open {str(folder)!r} to lock it for writing: "
                         f"{exc.strerror or exc}") from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
        except OSError as exc:  # a file system without locks (ENOLCK): one clear line
            raise AuditError(f"cannot lock {str(folder)!r} for writing: "
                             f"{exc.strerror or exc}") from None
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock


def check_name(value: object, what: str, source: str) -> str:
    """``value`` if it is a safe file-name stem, else an AuditError naming ``source``."""
    if not isinstance(value, str) or not SAFE_NAME.fullmatch(value) or ".." in value:
        raise AuditError(f"{source}: {what} {value!r} is not a safe name (letters, digits, "
                         "'.', '_', '-'; no '..'; at most 81 characters)")
    return value


def inside(root: Path, path: Path) -> Path:
    """``path`` when its folder, resolved, lies inside ``root`` resolved; else AuditError.

    The file itself may be a symlink: writes replace a link, they never follow it.
    """
    base = Path(root).resolve()
    folder = Path(path).parent.resolve()
    if folder != base and base not in folder.parents:
        raise AuditError(f"refusing to write {str(path)!r}: it is outside {str(root)!r}")
    return Path(path)


def make_dir(root: Path, path: Path) -> Path:
    """Create folder ``path`` (inside ``root``); a symlink there is refused, not followed."""
    path = Path(path)
    if path.is_symlink():
        raise AuditError(f"refusing to write into {str(path)!r}: it is a symlink")
    inside(root, path / "x")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise AuditError(f"cannot create folder {str(path)!r} ({exc.strerror or exc})") from None
    if not path.is_dir() or path.is_symlink():
        raise AuditError(f"cannot write into {str(path)!r}: not a folder")
    return path


def _mode(path: Path) -> int:
    try:
        st = os.lstat(path)
        if stat.S_ISREG(st.st_mode):
            return stat.S_IMODE(st.st_mode)
    except OSError:
        pass
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


def atomic_write(path: Path, data: str | bytes) -> None:
    """Replace ``path`` with ``data`` atomically; a symlink at ``path`` is replaced, not
    followed; any failure is one AuditError and leaves the old file as it was."""
    path = Path(path)
    blob = data.encode("utf-8") if isinstance(data, str) else bytes(data)
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        with os.fdopen(fd, "wb") as fh:
            fh.write(blob)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, _mode(path))
        os.replace(tmp, path)
        tmp = None
    except OSError as exc:
        raise AuditError(f"cannot write {str(path)!r} ({exc.strerror or exc})") from None
    finally:
        if tmp is not None and os.path.lexists(tmp):
            os.unlink(tmp)


def probe_dir(out_dir: Path) -> None:
    """Create ``out_dir`` if needed and write (then remove) a temporary file there, so an
    output folder that cannot be written is found before any work, not after it."""
    out_dir = Path(out_dir)
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=out_dir, prefix=".audit-probe.", suffix=".tmp")
        os.close(fd)
        os.unlink(tmp)
    except OSError as exc:
        raise AuditError(f"output directory {str(out_dir)!r} cannot be written "
                         f"({exc.strerror or exc})") from None


# ----------------------------------------------------------------- reading files safely
#: The largest JSON file (report, lock file, review record) read: 64 MiB.
MAX_JSON_BYTES = 64 << 20


def open_regular(path: Path, what: str = "file"):
    """A binary file object for ``path`` if it is a regular file (a link to one is
    followed); a FIFO, socket, device (``/dev/zero``) or folder is one AuditError, found
    without blocking: the file is opened with ``O_NONBLOCK`` and checked with ``fstat``
    before a byte is read."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0)
                     | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise AuditError(f"{what} {path} cannot be read ({exc.strerror or exc})") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise AuditError(f"{what} {path} is not a regular file (a FIFO, device, socket "
                             "or folder); refusing to read it")
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_regular(path: Path, what: str = "file", limit: int = MAX_JSON_BYTES) -> bytes:
    """The bytes of regular file ``path``, at most ``limit`` of them: a special file
    (see :func:`open_regular`) or a larger file is one AuditError, never a hang and never
    an unbounded read."""
    with open_regular(path, what) as fh:
        try:
            blob = fh.read(limit + 1)
        except OSError as exc:
            raise AuditError(f"{what} {path} cannot be read ({exc.strerror or exc})") \
                from None
    if len(blob) > limit:
        raise AuditError(f"{what} {path} is larger than {limit >> 20} MiB; refusing to read "
                         "it")
    return blob


def read_json(path: Path, what: str) -> object:
    """The JSON value in ``path``; any way the file can be bad (not a regular file, too
    large, not UTF-8, not JSON, nested too deeply, a number too long to convert, a lone
    surrogate, unreadable) is one AuditError that begins with ``{what} {path}`` and says
    which. Nothing in the file is executed: plain JSON only."""
    import json

    blob = read_regular(path, what)
    try:
        value = json.loads(blob.decode("utf-8"))
    except json.JSONDecodeError as exc:
        raise AuditError(f"{what} {path} is not valid JSON ({exc.msg} at line {exc.lineno} "
                         f"column {exc.colno})") from None
    except UnicodeDecodeError as exc:
        raise AuditError(f"{what} {path} is not UTF-8 text ({exc.reason})") from None
    except RecursionError:
        raise AuditError(f"{what} {path} is nested too deeply to be a {what}") from None
    except ValueError as exc:  # an integer of more digits than int() converts
        raise AuditError(f"{what} {path} holds a number that cannot be read "
                         f"({' '.join(str(exc).split())[:80]})") from None
    problem = text_problem(value)
    if problem:
        raise AuditError(f"{what} {path} {problem}")
    return value


def text_problem(value: object, _depth: int = 0) -> str | None:
    """Why a parsed JSON value cannot be used as text (a lone surrogate in a string,
    which no file or terminal can encode), or None."""
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, str):
            try:
                v.encode("utf-8")
            except UnicodeEncodeError:
                return "holds a lone surrogate (\\ud800-\\udfff) in a string"
        elif isinstance(v, dict):
            stack.extend(v.keys())
            stack.extend(v.values())
        elif isinstance(v, list):
            stack.extend(v)
    return None


# ------------------------------------------------------------ text from elsewhere, shown
_ANSI = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)?|[@-Z\\-_])")


def term_text(value: object) -> str:
    """``value`` as text safe to print on a terminal: ANSI escape sequences (colour,
    clear screen, window title) removed, every other C0/C1 control character (and a
    newline or tab) shown as ``\\xNN``/``\\n``; lone surrogates as ``\\udNNN``. Ordinary
    letters, including non-ASCII ones, are kept."""
    text = value if isinstance(value, str) else str(value)
    text = _ANSI.sub("", text)

    def esc(m):
        c = m.group(0)
        return {"\n": "\\n", "\t": "\\t", "\r": "\\r"}.get(c, f"\\x{ord(c):02x}")

    text = re.sub(r"[\x00-\x1f\x7f-\x9f]", esc, text)
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


_MD_SPECIAL = str.maketrans({"<": "&lt;", ">": "&gt;", "|": "\\|", "&": "&amp;"})


def md_text(value: object) -> str:
    """``value`` as one line of inert markdown (a table cell or a line of a list): control
    characters and ANSI sequences removed as by :func:`term_text`, newlines joined into
    spaces, ``<``, ``>`` and ``&`` as HTML entities (no raw HTML), ``|`` escaped (no new
    table cell), and a leading ``#``, ``>``, ``-``, ``+``, ``*``, ``=``, or ordered-list
    number escaped (no heading, quote, list or rule); no link either: ``](`` becomes
    ``]\\(`` (no inline link or image, a ``javascript:`` one included, and no way out of
    an image's alt text) and a leading ``[label]:`` is escaped (no link definition)."""
    text = value if isinstance(value, str) else str(value)
    text = _ANSI.sub("", text)
    text = " ".join(re.sub(r"[\x00-\x1f\x7f-\x9f]", " ", text).split())
    text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    text = text.translate(_MD_SPECIAL).replace("](", "]\\(")
    if re.match(r"\[[^\]]*\]:", text):
        text = "\\" + text
    elif re.match(r"[#>+*=`~-]", text):
        text = "\\" + text
    elif re.match(r"\d+[.)]", text):  # "1. x" would start an ordered list: "1\. x"
        n = len(re.match(r"\d+", text).group(0))
        text = text[:n] + "\\" + text[n:]
    return text


# ------------------------------------------------------------- output folders we own
#: The file that marks a folder as an audit output folder (written by the CLI the first
#: time it writes there; ``reports/`` and ``reports/full/`` carry one).
OUTPUT_MARKER = ".audit-output"
_MARKER_TEXT = ("This folder holds output written by the `audit` command (reports, their "
                "index, coverage.md). `audit run/report/review --out` writes only into an "
                "empty folder or one holding this file.\n")
# index files the CLI writes, recognised by their first line where no marker exists yet
_OUR_HEADINGS = {"README.md": "# Audit reports",
                 "coverage.md": "# Coverage of the review records by claims",
                 "CHANGES.md": "# What changed in the verdicts"}


def _first_line_of(path: Path) -> str:
    try:
        with open_regular(path) as fh:
            return fh.read(200).decode("utf-8", "replace").split("\n", 1)[0].strip()
    except AuditError:
        return ""


def _is_our_report(path: Path) -> bool:
    try:
        data = read_json(path, "report")
    except AuditError:
        return False
    required = ("id", "paper", "verdict", "scale", "seeds", "arms", "parts")
    return isinstance(data, dict) and all(k in data for k in required) \
        and data.get("id") == path.stem


def foreign_entry(out_dir: Path) -> str | None:
    """The name of an entry of existing folder ``out_dir`` that the audit CLI did not
    write (so that writing there could replace it), or None when the folder is empty,
    carries :data:`OUTPUT_MARKER`, or holds only what we recognise as ours: reports
    (``<id>.json`` that reads as an audit report of that id, with its ``<id>.md`` and
    figure folder ``<id>/``), the index files by their heading, and our temporary files."""
    out_dir = Path(out_dir)
    if not out_dir.is_dir():
        return None
    marker = out_dir / OUTPUT_MARKER
    if marker.is_file() and not marker.is_symlink():
        return None
    try:
        names = sorted(os.listdir(out_dir))
    except OSError:
        return None  # found by the writability check
    reports = {n[:-5] for n in names if n.endswith(".json")
               and _is_our_report(out_dir / n)}
    for name in names:
        path = out_dir / name
        if name.startswith((".audit-probe.", ".")) and name.endswith(".tmp"):
            continue
        if name.endswith(".json") and name[:-5] in reports:
            continue
        if name.endswith(".md") and name[:-3] in reports and path.is_file() \
                and not path.is_symlink():
            continue
        if name in reports and path.is_dir() and not path.is_symlink():
            continue
        if path.is_dir() and not path.is_symlink() and (path / OUTPUT_MARKER).is_file():
            continue  # a nested audit output folder (reports/full)
        if name in _OUR_HEADINGS and not path.is_symlink() and \
                _first_line_of(path).startswith(_OUR_HEADINGS[name]):
            continue
        return name
    return None


def check_output_folder(out_dir: Path, what: str = "--out") -> None:
    """Refuse (one AuditError) an existing ``out_dir`` holding files the audit CLI did not
    write: writing there would replace a user's README.md or a ``<id>.json`` of theirs.
    An empty or missing folder, or an audit output folder, passes. Writes nothing."""
    name = foreign_entry(out_dir)
    if name is not None:
        raise AuditError(f"refusing to write into {what} {str(out_dir)!r}: it holds "
                         f"{name!r}, which audit did not write; use an empty folder or "
                         f"an audit output folder (one holding {OUTPUT_MARKER})")


def mark_output_folder(out_dir: Path) -> None:
    """Create ``out_dir`` if needed and write :data:`OUTPUT_MARKER` there (if absent):
    call it after :func:`check_output_folder` passed, just before the first write."""
    out_dir = Path(out_dir)
    marker = out_dir / OUTPUT_MARKER
    if marker.is_file() and not marker.is_symlink():
        return
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise AuditError(f"cannot create folder {str(out_dir)!r} ({exc.strerror or exc})") \
            from None
    atomic_write(marker, _MARKER_TEXT)


def strict_json(obj):
    """``obj`` with every non-finite float as null: reports and regime maps are strict
    JSON (no bare NaN or Infinity, which other JSON readers refuse)."""
    import math
    from collections.abc import Mapping

    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, Mapping):
        return {k: strict_json(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [strict_json(v) for v in obj]
    return obj
