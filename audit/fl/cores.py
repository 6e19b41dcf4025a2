"""The cores this process may use: a low module without torch, read by the engine's bench,
the runner and the process pool alike."""
from __future__ import annotations

import os


def usable_cores() -> int:
    """The cores this process may run on (``os.sched_getaffinity``: a container's or a
    ``taskset``'s share of the machine, not ``os.cpu_count``'s whole machine); every
    thread count and the process pool's size follow it, so a process confined to a few
    cores does not oversubscribe them."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # no affinity on this platform (macOS, Windows)
        return max(1, os.cpu_count() or 1)
