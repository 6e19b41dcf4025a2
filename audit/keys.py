"""What every cache and checkpoint key carries besides the run itself: the code version
and the identity of the data files a run reads.

Low in the package: it imports nothing of it but the package's version (and, only when
a run names a data directory, :func:`audit.fl.data.data_fingerprint`), so the run-context
type (:meth:`audit.claims.RunContext.cache_version`, ``.checkpoint``), the runner's cache
and the tuning pilots all key on the same two values. ``audit.runner`` re-exports both
names where they used to live.
"""
from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

import audit

PACKAGE_DIR = Path(audit.__file__).resolve().parent


def code_version() -> str:
    """A hash of the package source: any code change invalidates cached runs."""
    h = hashlib.sha256(audit.__version__.encode())
    for path in sorted(PACKAGE_DIR.rglob("*.py")):
        h.update(str(path.relative_to(PACKAGE_DIR)).encode())
        h.update(path.read_bytes())
    return f"{audit.__version__}+{h.hexdigest()[:12]}"


def data_identity(ctx: Any) -> dict[str, str]:
    """The fingerprint of the data files a run with ``ctx`` (a
    :class:`audit.claims.RunContext`: its ``config`` and ``data_dir``) reads: for each
    paper-scale data set its config names, a sha256 over the relative path, size and
    content of each of its files under ``ctx.data_dir`` (or ``$AUDIT_DATA``); file hashes
    are memoised per (path, size, mtime, inode) within a process. Empty (a stable key)
    when the run reads no data directory: digits, synthetic data, the stdlib corpus. See
    :func:`audit.fl.data.data_fingerprint`."""
    if ctx.data_dir is None and os.environ.get("AUDIT_DATA") is None:
        return {}
    from audit.fl.data import data_fingerprint

    return data_fingerprint(ctx.config, ctx.data_dir)
