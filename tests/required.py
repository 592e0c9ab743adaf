"""Optional libraries that some tests need: skipped where they are not installed, but a failure
under CI=true, where .ci/validators.txt installs them (a skip there would hide a missing install)."""

import os

import pytest


def require(name: str):
    """Import `name`, or skip the test module (outside CI) when it is not installed."""
    if os.environ.get("CI") == "true":
        return __import__(name)
    return pytest.importorskip(name)
