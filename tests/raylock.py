"""One local Ray instance at a time across pytest-xdist workers (``-n 2``): two on a
2-core machine would compete for its CPUs and memory. The lock is the audit's own folder
lock on a folder every worker of a session shares (the parent of the workers' temporary
folders)."""
from __future__ import annotations

import contextlib

from audit.safeio import folder_lock


@contextlib.contextmanager
def one_ray_at_a_time(tmp_path_factory):
    folder = tmp_path_factory.getbasetemp().parent / "audit-ray-lock"
    folder.mkdir(exist_ok=True)
    with folder_lock(folder):
        yield
