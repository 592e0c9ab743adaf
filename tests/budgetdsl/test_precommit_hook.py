"""The pre-commit hooks in a real git repository, run as pre-commit runs them.

pre-commit passes the staged files that match a hook's `files` pattern to its `entry`. The hooks
must pass a change to a base fragment that keeps every plan valid, fail one that breaks the plans
extending it (although no plan file changed), and check plans that extend a base transitively.
"""

import os
import pathlib
import re
import shlex
import shutil
import subprocess
import sys

import pytest
import yaml

REPO = pathlib.Path(__file__).resolve().parents[2]
HOOKS = {h["id"]: h for h in yaml.safe_load((REPO / ".pre-commit-hooks.yaml").read_text())}
BIN = pathlib.Path(sys.executable).parent


def git(cwd, *args) -> str:
    return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=cwd,
                          check=True, capture_output=True, text=True).stdout


@pytest.fixture
def repo(tmp_path):
    """A user's repository: the project's own plans (with plans/base/a100-cluster.yaml), committed."""
    shutil.copytree(REPO / "plans", tmp_path / "plans")
    (tmp_path / ".pre-commit-config.yaml").write_text("repos: []\n")
    git(tmp_path, "init", "-q", "-b", "main")
    git(tmp_path, "add", ".")
    git(tmp_path, "commit", "-qm", "plans")
    return tmp_path


def run_hook(repo, hook_id):
    """What `pre-commit run HOOK` does: the staged files matching `files`, passed to `entry`."""
    hook = HOOKS[hook_id]
    staged = git(repo, "diff", "--cached", "--name-only", "--diff-filter=ACMR").split()
    files = [f for f in staged if re.search(hook["files"], f)]
    if not files:
        return None  # pre-commit skips the hook: "(no files to check)"
    argv = shlex.split(hook["entry"])
    assert argv[0] == "budgetdsl" and hook["language"] == "python"
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"}
    return subprocess.run([*argv, *files], cwd=repo, capture_output=True, text=True, env=env)


def edit(path: pathlib.Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new))


def extending_base(repo) -> list[str]:
    return sorted(str(p.relative_to(repo)) for p in (repo / "plans").glob("*.yaml")
                  if "extends: base/a100-cluster.yaml" in p.read_text())


def test_the_hook_patterns_take_plans_and_bases_but_not_other_yaml():
    for hook in HOOKS.values():
        assert re.search(hook["files"], "plans/llama2-7b.yaml")
        assert re.search(hook["files"], "plans/base/a100-cluster.yaml")
        assert not re.search(hook["files"], ".pre-commit-config.yaml")
        assert not re.search(hook["files"], ".github/workflows/budgetdsl.yml")


@pytest.mark.parametrize("hook_id", sorted(HOOKS))
def test_a_valid_change_to_the_base_passes_and_checks_every_plan_that_extends_it(repo, hook_id):
    edit(repo / "plans/base/a100-cluster.yaml", "mfu: 0.42", "mfu: 0.45")
    git(repo, "add", "plans/base/a100-cluster.yaml")
    result = run_hook(repo, hook_id)
    assert result.returncode == 0, result.stderr
    n = len(extending_base(repo))
    assert n >= 4  # the project's plans that extend the base
    assert f"{n + 1} plans valid" in result.stderr
    assert f"{n} checked because they extend a given file" in result.stderr


def test_breaking_the_base_fails_the_hook_at_each_plan_that_extends_it(repo):
    # 3-way tensor parallelism cannot split the plans' 1024 GPUs (nor their 32/64/96 heads)
    edit(repo / "plans/base/a100-cluster.yaml", "tensor_parallel: 1", "tensor_parallel: 3")
    git(repo, "add", "plans/base/a100-cluster.yaml")
    result = run_hook(repo, "budgetdsl-check")
    assert result.returncode == 2, result.stderr
    for plan in extending_base(repo):
        if "tensor_parallel" in (repo / plan).read_text():
            continue  # sets its own degree: unaffected by the base's
        assert f"{plan}: extends plans/base/a100-cluster.yaml, which changed:" in result.stderr
        assert re.search(rf"^{re.escape(plan)}:\d+:\d+: error\[plan-rule\]", result.stderr, re.M)
    assert "error" not in "\n".join(line for line in result.stderr.splitlines()
                                    if line.startswith("plans/base/"))  # the fragment alone is fine


def test_an_invalid_value_in_the_base_fails_in_the_base_itself(repo):
    edit(repo / "plans/base/a100-cluster.yaml", "mfu: 0.42", "mfu: 42%%")
    git(repo, "add", "plans/base/a100-cluster.yaml")
    result = run_hook(repo, "budgetdsl-check")
    assert result.returncode == 2
    assert re.search(r"^plans/base/a100-cluster\.yaml:\d+:\d+: error", result.stderr, re.M)


def test_without_the_flag_a_broken_base_would_pass(repo):
    """The reason for --dependents: the fragment alone cannot see what it breaks."""
    edit(repo / "plans/base/a100-cluster.yaml", "tensor_parallel: 1", "tensor_parallel: 3")
    entry = shlex.split(HOOKS["budgetdsl-check"]["entry"])
    assert "--dependents" in entry
    alone = subprocess.run([BIN / "budgetdsl", "check", "plans/base/a100-cluster.yaml"], cwd=repo,
                           capture_output=True, text=True)
    assert alone.returncode == 0, alone.stderr


def test_plans_that_extend_the_base_through_another_base_are_checked(repo):
    (repo / "plans/base/team.yaml").write_text("fragment: true\nextends: a100-cluster.yaml\n"
                                              "budget: {usd_per_gpu_hour: 2}\n")
    (repo / "plans/team").mkdir()
    (repo / "plans/team/run.yaml").write_text(
        "name: team-run\nextends: ../base/team.yaml\nmodel: {params: 1e9, seq_len: 2048, heads: 16}\n"
        "hardware: {gpus: 64}\ntarget: {min_tokens: 20e9}\nnoise: {b_crit: 1M}\n")
    git(repo, "add", ".")
    git(repo, "commit", "-qm", "team")
    edit(repo / "plans/base/a100-cluster.yaml", "tensor_parallel: 1", "tensor_parallel: 3")
    git(repo, "add", "plans/base/a100-cluster.yaml")
    result = run_hook(repo, "budgetdsl-check")
    assert result.returncode == 2
    assert "plans/team/run.yaml: extends plans/base/a100-cluster.yaml, which changed:" in result.stderr
    assert re.search(r"^plans/team/run\.yaml:4:\d+: error\[plan-rule\]: 64 GPUs cannot be split into "
                     r"tensor_parallel × pipeline_parallel = 3 groups$", result.stderr, re.M)


def test_a_new_plan_not_yet_committed_is_found_too(repo):
    (repo / "plans/new.yaml").write_text(
        "name: new\nextends: base/a100-cluster.yaml\nmodel: {params: 1e9, seq_len: 2048}\n"
        "hardware: {gpus: 8}\ntarget: {min_tokens: 20e9}\nnoise: {b_crit: 1M}\n")
    edit(repo / "plans/base/a100-cluster.yaml", "tensor_parallel: 1", "tensor_parallel: 3")
    git(repo, "add", "plans/base/a100-cluster.yaml")  # plans/new.yaml stays untracked
    result = run_hook(repo, "budgetdsl-check")
    assert result.returncode == 2
    assert "plans/new.yaml: extends plans/base/a100-cluster.yaml, which changed:" in result.stderr


def test_outside_a_git_repository_the_directory_is_searched(tmp_path):
    shutil.copytree(REPO / "plans", tmp_path / "plans")
    edit(tmp_path / "plans/base/a100-cluster.yaml", "tensor_parallel: 1", "tensor_parallel: 3")
    result = subprocess.run([BIN / "budgetdsl", "check", "--dependents", "plans/base/a100-cluster.yaml"],
                            cwd=tmp_path, capture_output=True, text=True,
                            env={**os.environ, "GIT_CEILING_DIRECTORIES": str(tmp_path.parent)})
    assert result.returncode == 2
    assert "plans/llama2-7b.yaml: extends plans/base/a100-cluster.yaml, which changed:" in result.stderr


def test_a_changed_plan_alone_is_checked_whole(repo):
    edit(repo / "plans/llama2-7b.yaml", "gpus: 1024", "gpus: 1020")  # not whole nodes of 8
    git(repo, "add", "plans/llama2-7b.yaml")
    result = run_hook(repo, "budgetdsl-check")
    assert result.returncode == 2
    assert re.search(r"^plans/llama2-7b\.yaml:\d+:\d+: error\[plan-rule\]", result.stderr, re.M)
    assert "checked because" not in result.stderr  # nothing extends it


def test_an_unmarked_base_fails_with_a_note_on_the_mark(repo):
    """A fragment is recognised by its mark alone; the hook says so when a base lacks it."""
    edit(repo / "plans/base/a100-cluster.yaml", "fragment: true", "")
    git(repo, "add", "plans/base/a100-cluster.yaml")
    result = run_hook(repo, "budgetdsl-check")
    assert result.returncode == 2
    assert re.search(r"^plans/base/a100-cluster\.yaml:\d+:\d+: error\[missing-key\]: missing required key "
                     r"'name' in the top level$", result.stderr, re.M)
    assert "note: plans extend plans/base/a100-cluster.yaml; if it is a base fragment, mark it with " \
        "'fragment: true'" in result.stderr
    assert "plans/llama2-7b.yaml" not in result.stderr  # its plans are fine: only the mark is missing


def test_the_json_report_says_which_file_is_a_fragment_and_why_each_plan_was_checked(repo):
    import json

    result = subprocess.run([BIN / "budgetdsl", "check", "--dependents", "--format", "json",
                             "plans/base/a100-cluster.yaml"], cwd=repo, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    files = {f["file"]: f for f in json.loads(result.stdout)["files"]}
    assert files.pop("plans/base/a100-cluster.yaml")["fragment"] is True
    assert sorted(files) == extending_base(repo)
    assert all(f["extends_changed"] == "plans/base/a100-cluster.yaml" and not f["fragment"]
               for f in files.values())


# -- pre-commit itself ---------------------------------------------------------------------------

def need_pre_commit() -> str:
    """pre-commit (a validator in .ci/validators.txt): skips where missing, fails under CI."""
    path = shutil.which("pre-commit", path=str(BIN)) or shutil.which("pre-commit")
    if path is None:
        if os.environ.get("CI") == "true":
            pytest.fail("pre-commit is not installed, and CI must run it (.ci/validators.txt)")
        pytest.skip("pre-commit is not installed (pip install -r .ci/validators.txt)")
    return path


def test_pre_commit_accepts_the_manifest():
    result = subprocess.run([need_pre_commit(), "validate-manifest", str(REPO / ".pre-commit-hooks.yaml")],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr


def test_pre_commit_runs_the_hooks_on_a_commit_that_changes_only_the_base(repo, tmp_path):
    """The manifest's hooks, run by pre-commit itself. `language: python` would make pre-commit
    pip-install budgetdsl from its repository; `system` runs the same entry from this venv,
    with pre-commit's own choice of files (the `files` pattern on the staged changes)."""
    tool = need_pre_commit()
    hooks = [{**h, "language": "system"} for h in HOOKS.values()]
    (repo / ".pre-commit-config.yaml").write_text(yaml.safe_dump({"repos": [{"repo": "local", "hooks": hooks}]}))
    git(repo, "add", ".pre-commit-config.yaml")
    git(repo, "commit", "-qm", "hooks")
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}",
           "PRE_COMMIT_HOME": str(tmp_path / "pre-commit-home")}

    def pre_commit() -> subprocess.CompletedProcess:
        return subprocess.run([tool, "run"], cwd=repo, capture_output=True, text=True, env=env, timeout=300)

    edit(repo / "plans/base/a100-cluster.yaml", "mfu: 0.42", "mfu: 0.45")
    git(repo, "add", "plans/base/a100-cluster.yaml")
    ok = pre_commit()
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert re.search(r"^budgetdsl check\.+Passed$", ok.stdout, re.M)
    edit(repo / "plans/base/a100-cluster.yaml", "tensor_parallel: 1", "tensor_parallel: 3")
    git(repo, "add", "plans/base/a100-cluster.yaml")
    bad = pre_commit()
    assert bad.returncode == 1
    assert re.search(r"^budgetdsl check\.+Failed$", bad.stdout, re.M)
    assert "plans/llama2-7b.yaml: extends plans/base/a100-cluster.yaml, which changed:" in bad.stdout
