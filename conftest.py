"""Root conftest: loads the audit pytest plugin and a numeric-friendly hypothesis profile."""
import os

from hypothesis import settings

pytest_plugins = ["audit.pytest_plugin"]

# Numeric property tests: no per-example deadline (the built-in "ci" profile, loaded by
# hypothesis itself when CI is set, does the same), and a derandomised search in CI so
# that a run is repeatable.
settings.register_profile("audit", deadline=None)
settings.register_profile("audit-ci", deadline=None, derandomize=True)
settings.load_profile("audit-ci" if os.environ.get("CI") else "audit")
