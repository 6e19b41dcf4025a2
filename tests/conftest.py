"""Fixtures for the library's own tests: a toy claim, a private lock file and cache."""
from __future__ import annotations

import json

import pytest

import toyclaim
from audit import claims as claims_mod

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
