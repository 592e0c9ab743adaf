"""Plans read at a git revision come with their extends chain at the same revision."""

import pathlib
import shutil
import subprocess

import pytest

from budgetdsl.plan.diagnostics import PlanError
from budgetdsl.plan.git_source import GitError, files_at, opener_at, resolve_revision
from budgetdsl.plan.loader import load_plan

REPO = pathlib.Path(__file__).resolve().parents[2]


def git(cwd, *args):
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


@pytest.fixture
def repo(tmp_path):
    shutil.copytree(REPO / "plans", tmp_path / "plans")
    git(tmp_path, "init", "-q", "-b", "main")
    git(tmp_path, "-c", "user.name=t", "-c", "user.email=t@t", "add", ".")
    git(tmp_path, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "plans")
    return tmp_path


def test_a_plan_and_its_base_are_read_at_the_revision(repo):
    commit = resolve_revision("HEAD", repo)
    base = repo / "plans/base/a100-cluster.yaml"
    base.write_text(base.read_text().replace("zero: 1", "zero: 2"))
    (repo / "plans/llama2-7b.yaml").write_text((repo / "plans/llama2-7b.yaml").read_text().replace(
        "gpus: 1024", "gpus: 2048"))
    now = load_plan(repo / "plans/llama2-7b.yaml")
    then = load_plan(repo / "plans/llama2-7b.yaml", opener=opener_at(commit, repo))
    assert (now.hardware.gpus, now.hardware.zero) == (2048, 2)
    assert (then.hardware.gpus, then.hardware.zero) == (1024, 1)


def test_files_at_a_revision_and_missing_ones(repo):
    commit = resolve_revision("HEAD", repo)
    assert "plans/llama2-7b.yaml" in files_at(commit, repo, ["plans"])
    (repo / "plans/new.yaml").write_text("name: new\n")
    with pytest.raises(PlanError) as info:
        load_plan(repo / "plans/new.yaml", opener=opener_at(commit, repo))
    assert info.value.diagnostics[0].code == "file-not-found"


def test_unknown_revisions_are_errors(repo):
    with pytest.raises(GitError):
        resolve_revision("no-such-branch", repo)
    with pytest.raises(GitError):
        resolve_revision("--output=/tmp/x", repo)


def test_a_calibration_is_read_at_the_same_revision_as_its_plan(repo):
    """`diff --base` compares a plan with the calibration it named at the base, not today's."""
    from budgetdsl.plan.diagnostics import PlanError
    from budgetdsl.solve.solver import solve

    shutil.copytree(REPO / "tests/fixtures/calibration", repo / "tests/fixtures/calibration")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "add", ".")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "calibrations")
    commit = resolve_revision("HEAD", repo)
    plan_path = repo / "plans/ramp-gpt-micro-proxy.yaml"
    then = solve(load_plan(plan_path, opener=opener_at(commit, repo)))
    for f in (repo / "tests/fixtures/calibration").glob("*.json"):
        f.unlink()  # gone from the work tree, still at the revision
    with pytest.raises(PlanError) as info:
        solve(load_plan(plan_path))
    assert info.value.diagnostics[0].code == "calibration-missing"
    assert solve(load_plan(plan_path, opener=opener_at(commit, repo))) == then
