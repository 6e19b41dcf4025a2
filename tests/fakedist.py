"""An installed package without pip: a ``*.dist-info`` folder on a sys.path entry.

``importlib.metadata`` finds distributions by scanning the folders on ``sys.path`` for
``<name>-<version>.dist-info``; one with an ``entry_points.txt`` is, to the harness, an
installed package declaring those entry points. Nothing is installed into the venv.
"""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Mapping


def fake_install(site: Path, dist: str, entry_points: Mapping[str, str],
                 files: Mapping[str, str] = (), version: str = "0.1") -> Path:
    """Write ``files`` (relative path -> text) under ``site`` and a dist-info for ``dist``
    declaring ``entry_points`` (name -> "module" or "module:attr") in group
    ``audit.claims``. Returns ``site`` (put it on sys.path / PYTHONPATH)."""
    site = Path(site)
    for rel, text in dict(files).items():
        path = site / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    info = site / f"{dist.replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n")
    lines = ["[audit.claims]"] + [f"{k} = {v}" for k, v in entry_points.items()]
    (info / "entry_points.txt").write_text("\n".join(lines) + "\n")
    return site


def forget(*prefixes: str) -> None:
    """Drop imported modules (a test's package) so the next test imports afresh."""
    for name in list(sys.modules):
        if any(name == p or name.startswith(p + ".") for p in prefixes):
            del sys.modules[name]
