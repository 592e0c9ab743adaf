"""Settings for every test.

Tests write plans into temporary directories and let them extend the repository's example plans (by
absolute path, or through a symbolic link to plans/base). A temporary directory lies in no git work
tree, so `extends` is confined to the directory BUDGETDSL_ROOT names (docs/fuzzing.md): here the
file system's root. Tests of the confinement itself make their own root (a `.git` directory, or
their own BUDGETDSL_ROOT).
"""

import pytest


@pytest.fixture(autouse=True)
def _plans_may_extend_the_repository(monkeypatch):
    monkeypatch.setenv("BUDGETDSL_ROOT", "/")
