"""Fixtures for the TUI tests: a writable copy of the example plans."""

from __future__ import annotations

import pathlib
import shutil

import pytest

pytest.importorskip("textual")

from tui_helpers import REPO  # noqa: E402


@pytest.fixture
def plans(tmp_path: pathlib.Path) -> pathlib.Path:
    """A copy of plans/ (the Llama 2 plan and the base it extends), safe to save into."""
    shutil.copytree(REPO / "plans", tmp_path / "plans")
    return tmp_path / "plans"
