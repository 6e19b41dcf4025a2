"""What every cache and checkpoint key carries besides the run itself: the code version
and the identity of the data files a run reads.

Low in the package: it imports nothing of it but the package's version (and, only when
a run names a data directory, :func:`audit.fl.data.data_fingerprint`), so the run-context
type (:meth:`audit.claims.RunContext.cache_version`, ``.checkpoint``), the runner's cache
and the tuning pilots all key on the same two values. ``audit.runner`` re-exports both
names where they used to live.
"""
from __future__ import annotations

import ast
import hashlib
import os
import re
from functools import lru_cache
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


def _module_file(name: str) -> Path | None:
    """The source file of the package module ``name`` (``audit.x.y``), or None."""
    if name != "audit" and not name.startswith("audit."):
        return None
    rel = Path(*name.split(".")[1:])
    for path in (PACKAGE_DIR / rel / "__init__.py", (PACKAGE_DIR / rel).with_suffix(".py")):
        if path.is_file():
            return path
    return None


@lru_cache(maxsize=512)
def _imports(path: Path, stamp: tuple[int, int]) -> tuple[str, ...]:
    """The package modules one source file imports, at any depth of it (imports inside
    functions count): ``import a.b``, ``from a import b`` (b a module or a name of a),
    relative imports resolved. ``stamp`` (mtime, size) renews the memo on an edit."""
    tree = ast.parse(path.read_bytes(), filename=str(path))
    here = ".".join(("audit",) + path.relative_to(PACKAGE_DIR).with_suffix("").parts)
    package = here[: -len(".__init__")] if here.endswith(".__init__") else here.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)
    return tuple(sorted(n for n in found if _module_file(n) is not None))


#: A claim's presentation (``audit.papers.<paper>.present``): it builds the report's
#: estimates, tables, figures and notes from evidence already decided and never runs
#: inside a unit (import-linter keeps it off the engine, the runner and tuning, and every
#: run checks that the claim's ``decide`` agrees with its ``analyse``), so it is no part
#: of a unit's code version: editing a table or a note keeps the cached runs, and a
#: rerun rebuilds the report from them.
_PRESENTATION = re.compile(r"^audit\.papers\.[A-Za-z_][A-Za-z_0-9]*\.present(\.|$)")


def module_closure(name: str) -> list[str]:
    """``name`` and every package module it imports, directly or not, with the packages
    (``__init__``) above each: the source a unit of a claim whose ``run`` lives in
    ``name`` can execute. Imports made through ``importlib`` are not followed (the
    package uses it only to discover claims and paper notes, never inside a run), nor
    are a claim's presentation modules (:data:`_PRESENTATION`)."""
    todo, seen = [name], set()
    while todo:
        mod = todo.pop()
        if mod in seen or _module_file(mod) is None or _PRESENTATION.match(mod):
            continue
        seen.add(mod)
        parts = mod.split(".")
        todo.extend(".".join(parts[:i]) for i in range(1, len(parts)))
        path = _module_file(mod)
        st = path.stat()
        todo.extend(_imports(path, (st.st_mtime_ns, st.st_size)))
    return sorted(seen)


#: The harness modules every unit's result passes through on its way to the cache,
#: whatever the claim imports: the runner (``checked_result``, the JSON encoding), the
#: process pool's and Ray's unit wrappers, the run-context types and these keys. Their
#: source (these files only, not what they import) is in every claim's code version.
HARNESS = ("audit.claims", "audit.distributed", "audit.keys", "audit.pool", "audit.runner")


def package_module(filename: str) -> str:
    """The package module defined in ``filename`` (``audit.x.y``), or "" outside it."""
    try:
        rel = Path(filename).resolve().relative_to(PACKAGE_DIR)
    except (ValueError, OSError):
        return ""
    if rel.suffix != ".py":
        return ""
    parts = rel.with_suffix("").parts
    if parts and parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(("audit",) + parts)


def claim_code_version(module: str = "") -> str:
    """The code version of a claim whose ``run`` lives in ``module``: a hash of the source
    of :func:`module_closure` (the claim's own module, its declarations, the engine,
    statistics and every other package module it reaches by import) and of the
    :data:`HARNESS` files every result passes through, so a change
    elsewhere in the package (the CLI, the reports, another paper's claim) keeps its
    cached runs. ``module`` empty or outside the package: :func:`code_version`, the whole
    package (a plugin claim adds its own source's hash, ``Claim.plugin_version``)."""
    if not module or _module_file(module) is None:
        return code_version()
    h = hashlib.sha256(audit.__version__.encode())
    for mod in sorted(set(module_closure(module)) | {m for m in HARNESS if _module_file(m)}):
        path = _module_file(mod)
        h.update(str(path.relative_to(PACKAGE_DIR)).encode())
        h.update(path.read_bytes())
    return f"{audit.__version__}+{module.rpartition('.')[2]}:{h.hexdigest()[:12]}"


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
