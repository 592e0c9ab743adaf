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


def pytest_sessionfinish(session):
    """Collect the session's garbage now and freeze what survives, so that pytest's own cleanup
    (five gc.collect passes, for unraisable exceptions) walks an almost empty heap.

    Under pytest-xdist this hook runs before a worker reports that it has finished; once it has,
    the controller tears the worker down and execnet gives it 5 seconds before it sends the worker
    a SIGINT. Five full collections of a worker's heap (torch, hypothesis, the solver's caches)
    took 0.7-0.8 s each on a shared 2-core machine, so the last worker could overrun; the SIGINT
    then landed in hypothesis's gc callback and `make test` printed a
    PytestUnraisableExceptionWarning ... KeyboardInterrupt. Collecting here, with pytest's
    unraisable hook still installed, loses no report."""
    import gc

    gc.collect()
    gc.freeze()
