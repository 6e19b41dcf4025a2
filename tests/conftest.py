"""Fixtures for the library's own tests: a toy claim, a private lock file and cache."""
from __future__ import annotations

import json
import os

import pytest

# The library's tests run units one at a time in the test process (the reference
# backend): a process pool's fork server costs seconds per pytest worker and the tests
# of the pool itself choose it explicitly (tests/test_pool.py).
os.environ.setdefault("AUDIT_BACKEND", "local")

import toyclaim
from audit import claims as claims_mod
from raylock import one_ray_at_a_time

pytest_plugins = ["pytester"]


@pytest.fixture
def toy(monkeypatch, tmp_path):
    """Register the toy claim, with its own lock file and cache, for one test."""
    monkeypatch.setattr(claims_mod, "CLAIM_MODULES", claims_mod.CLAIM_MODULES + ("toyclaim",))
    locks = tmp_path / "locks.json"
    locks.write_text(json.dumps({"toy-claim": {"smoke": {"verdict": "CONFIRMED",
                                                         "parts": {"gain": "CONFIRMED"}}}}))
    monkeypatch.setenv("AUDIT_LOCKS", str(locks))
    monkeypatch.setenv("AUDIT_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("AUDIT_DATA", raising=False)
    toyclaim.CALLS.clear()
    return toyclaim


@pytest.fixture(autouse=True)
def _one_ray_at_a_time(request, tmp_path_factory):
    """A test marked ``ray`` that starts its own Ray instance (Flower's simulation) waits
    for any other worker's; ``local_ray`` (tests/test_distributed.py) holds the same lock
    for its module."""
    if request.node.get_closest_marker("ray") is None or "local_ray" in request.fixturenames:
        yield
        return
    with one_ray_at_a_time(tmp_path_factory):
        yield
