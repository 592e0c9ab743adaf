"""Hostile inputs, round 2: what a second adversarial pass over every command found (each test is the
minimal reproducer, with the old behaviour in a comment), and what it tried that already held.
docs/fuzzing.md lists the round. Every case ends in an answer or a located diagnostic, in seconds.
"""

from __future__ import annotations

import json
import pathlib
import shutil
import sys

import pytest
import yaml

from budgetdsl.cli import main
from budgetdsl.diagnostics import PlanError
from budgetdsl.plan_loader import load_plan

sys.path.insert(0, str(pathlib.Path(__file__).parent))
from fuzz_mutations import time_bound  # noqa: E402

sys.path.insert(0, str(pathlib.Path(__file__).parents[1] / "exports"))
from export_validators import k8s_container  # noqa: E402  (the kubelet's reading of a container)

REPO = pathlib.Path(__file__).resolve().parents[2]
MINIMAL = (REPO / "plans" / "minimal.yaml").read_text()
CALIBRATIONS = REPO / "tests" / "fixtures" / "calibration"


# -- exports: plan text stays data -----------------------------------------------------------------

K8S_WORDS = ["$(BUDGETDSL_RUN_NAME)", "$(HOME)", "a$$b", "$$(X)", "$", "x$", "$(", "$(NO_SUCH)"]


@pytest.mark.parametrize("fmt", ["kubeflow", "pytorchjob"])
def test_kubernetes_variable_references_in_the_plan_stay_literal(fmt, tmp_path):
    """Kubernetes expands `$(VAR)` and turns `$$` into `$` in a container's command, args and env
    values: the command `train.py a$$b` ran as `train.py a$b`, an argument `$(HOME)` read the
    container's HOME, and launch.env FOO: '$(BUDGETDSL_RUN_NAME)' became the run's name. Each `$`
    is now written as `$$`, so what the container sees is what the plan says."""
    plan = tmp_path / "k8s.yaml"
    plan.write_text(MINIMAL + "launch:\n"
                    f"  command: {json.dumps(['train$(HOME).py', *K8S_WORDS])}\n"
                    "  env: {FOO: '$(BUDGETDSL_RUN_NAME)', BAR: 'a$$b', BAZ: '$(FOO)'}\n")
    out = tmp_path / f"job.{fmt}.yaml"
    assert main(["export", str(plan), "--to", fmt, "-q", "-o", str(out)]) == 0
    doc = yaml.safe_load(out.read_text())
    containers = ([doc["spec"]["trainer"]] if fmt == "kubeflow" else
                  [r["template"]["spec"]["containers"][0] for r in doc["spec"]["pytorchReplicaSpecs"].values()])
    for c in containers:
        argv, env = k8s_container(c, {"HOME": "/root"})
        assert env["FOO"] == "$(BUDGETDSL_RUN_NAME)" and env["BAR"] == "a$$b" and env["BAZ"] == "$(FOO)"
        assert env["BUDGETDSL_RUN_NAME"] == "minimal-1b"
        assert argv[argv.index("train$(HOME).py"):] == ["train$(HOME).py", *K8S_WORDS]
