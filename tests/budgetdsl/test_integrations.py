"""The team integrations: the pre-commit hooks run the real command (the Actions example is run by
test_actions_workflow.py, the hooks in a git repository by test_precommit_hook.py)."""

import pathlib
import shlex
import shutil
import subprocess
import sys

import pytest
import yaml

REPO = pathlib.Path(__file__).resolve().parents[2]
HOOKS = yaml.safe_load((REPO / ".pre-commit-hooks.yaml").read_text())
BUDGETDSL = shutil.which("budgetdsl", path=str(pathlib.Path(sys.executable).parent))


@pytest.mark.parametrize("hook", HOOKS, ids=lambda h: h["id"])
def test_hooks_pass_the_example_plans_and_fail_a_broken_one(hook):
    assert BUDGETDSL, "the console script is installed with the package"
    argv = shlex.split(hook["entry"])
    assert argv[0] == "budgetdsl" and hook["language"] == "python"
    plans = sorted(str(p) for p in (REPO / "plans").glob("*.yaml"))
    ok = subprocess.run([BUDGETDSL, *argv[1:], *plans], capture_output=True, text=True)
    assert ok.returncode == 0, ok.stderr
    broken = REPO / "tests/budgetdsl/broken/unknown_key.yaml"
    bad = subprocess.run([BUDGETDSL, *argv[1:], str(broken)], capture_output=True, text=True)
    assert bad.returncode == 2 and "error[unknown-key]" in bad.stderr
