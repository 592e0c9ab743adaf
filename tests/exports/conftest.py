"""Fixtures of the export tests.

    pytest tests/exports --update-golden     rewrite tests/exports/golden/ from the current output

Validators that are not installed skip with a reason on a developer's machine; under CI (CI=true,
as `.ci/run` runs) a missing validator fails instead, so CI cannot pass by skipping them.
"""

from __future__ import annotations

from pathlib import Path

import pytest

GOLDEN = Path(__file__).parent / "golden"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--update-golden", action="store_true", default=False,
                     help="rewrite the export golden files instead of comparing with them")


@pytest.fixture
def golden(request: pytest.FixtureRequest):
    """`golden(name, text)`: compare text with tests/exports/golden/<name> (or rewrite it)."""
    update = request.config.getoption("--update-golden")

    def check(name: str, text: str) -> None:
        path = GOLDEN / name
        if update:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8", newline="\n")
            return
        assert path.exists(), f"no golden file {path}: run pytest tests/exports --update-golden"
        expected = path.read_text(encoding="utf-8")
        assert text == expected, (f"{name} differs from its golden file; if the change is intended, "
                                  "run pytest tests/exports --update-golden and review the diff")

    return check
