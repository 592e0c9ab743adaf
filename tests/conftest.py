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


@pytest.fixture
def committed_repo(tmp_path, monkeypatch):
    """A factory: `committed_repo(fill)` makes a git repository at tmp_path/repo, lets `fill(root)`
    write its files, commits them and changes into it (for `diff --base` and the git sources)."""
    import subprocess

    def make(fill):
        root = tmp_path / "repo"
        root.mkdir()
        fill(root)
        git = ["git", "-c", "user.name=t", "-c", "user.email=t@t"]
        subprocess.run([*git, "init", "-q"], cwd=root, check=True)
        subprocess.run([*git, "add", "."], cwd=root, check=True)
        subprocess.run([*git, "commit", "-qm", "plans"], cwd=root, check=True)
        monkeypatch.chdir(root)
        return root
    return make
