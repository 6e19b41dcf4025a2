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


def read_json(path: Path, what: str) -> object:
    """The JSON value in ``path``; any way the file can be bad (not UTF-8, not JSON,
    nested too deeply for the parser, unreadable) is one AuditError that begins with
    ``{what} {path}`` and says which. Nothing in the file is executed: plain JSON only."""
    import json

    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise AuditError(f"{what} {path} is not valid JSON ({exc.msg} at line {exc.lineno} "
                         f"column {exc.colno})") from None
    except UnicodeDecodeError as exc:
        raise AuditError(f"{what} {path} is not UTF-8 text ({exc.reason})") from None
    except RecursionError:
        raise AuditError(f"{what} {path} is nested too deeply to be a {what}") from None
    except OSError as exc:
        raise AuditError(f"{what} {path} cannot be read ({exc.strerror or exc})") from None
