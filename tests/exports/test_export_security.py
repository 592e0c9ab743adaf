"""A hostile plan: the name and the command carry quotes, $(), backticks, newlines and `; rm -rf /`.
Every export must be inert: shell words quoted, YAML and JSON strings encoded, names DNS-1035."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from export_validators import check_bash, validate

from budgetdsl.exports import FORMATS, export
from budgetdsl.exports.spec import ExportError, launch_spec
from budgetdsl.plan.loader import load_plan

REPO = Path(__file__).resolve().parents[2]
EVIL_NAME = "x'; rm -rf / #\"$(touch PWNED)`touch PWNED`\nrm -rf /\r\u2028"
EVIL_ARGS = ["train.py", "--tag", "$(touch PWNED)", "`touch PWNED`", "a'b\"c", "; rm -rf /", "line\nbreak"]


@pytest.fixture
def evil(tmp_path: Path):
    plan_file = tmp_path / "evil.yaml"
    plan_file.write_text(
        f"extends: {REPO / 'plans' / 'llama2-7b.yaml'}\n"
        f"name: {json.dumps(EVIL_NAME)}\n"
        "launch:\n"
        f"  command: {json.dumps(EVIL_ARGS)}\n"
        f"  env: {{NOTE: {json.dumps('$(touch PWNED); `touch PWNED`')}}}\n")
    from budgetdsl.solve.solver import solve

    plan = load_plan(plan_file)
    return launch_spec(plan, solve(plan))


@pytest.mark.parametrize("fmt", list(FORMATS))
def test_hostile_plan_exports_inert(evil, fmt: str, tmp_path: Path, monkeypatch) -> None:
    try:
        text = export(evil, fmt)
    except ExportError as exc:  # a clear refusal is fine too
        assert str(exc)
        return
    validate(fmt, text, evil, tmp_path, monkeypatch)  # the real tools read back the exact strings
    if fmt in ("kubeflow", "pytorchjob"):
        job = yaml.safe_load(text)
        assert job["metadata"]["annotations"]["budgetdsl.dev/plan"] == EVIL_NAME
    if fmt == "hf":
        assert json.loads(text)["run_name"] == EVIL_NAME
    for line in text.splitlines():  # comments stay comments: no line starts a command from the plan
        assert not line.lstrip().startswith(("rm ", "touch")), line


@pytest.mark.parametrize("fmt", ["slurm", "torchrun"])
def test_shell_exports_expand_nothing(evil, fmt: str, tmp_path: Path) -> None:
    """Run the script with stubs for the launchers that print their argv: the program arguments and
    the environment arrive exactly as written, and no command from the plan ran."""
    stubs = tmp_path / "bin"
    stubs.mkdir()
    for tool in ("srun", "torchrun", "scontrol"):
        (stubs / tool).write_text(
            "#!/usr/bin/env python3\nimport json, os, sys\n"
            f"if {tool!r} == 'scontrol':\n    print('node1'); sys.exit()\n"
            "print(json.dumps({'argv': sys.argv[1:], 'note': os.environ.get('NOTE'),"
            " 'name': os.environ.get('BUDGETDSL_RUN_NAME')}))\n")
        (stubs / tool).chmod(0o755)
    script = tmp_path / "job.sh"
    script.write_text(export(evil, fmt))
    check_bash(script.read_text(), tmp_path, "check.sh")
    env = {**os.environ, "PATH": f"{stubs}:{os.environ['PATH']}", "SLURM_JOB_NODELIST": "node1",
           "SLURM_JOB_ID": "7", "SLURM_CPUS_ON_NODE": "2", "MASTER_ADDR": "10.0.0.1"}
    done = subprocess.run(["bash", str(script)], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert not (tmp_path / "PWNED").exists()
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["argv"][-len(EVIL_ARGS):] == EVIL_ARGS
    assert seen["note"] == "$(touch PWNED); `touch PWNED`"
    assert seen["name"] == EVIL_NAME


def test_names_become_dns_labels(evil) -> None:
    job = yaml.safe_load(export(evil, "pytorchjob"))
    name = job["metadata"]["name"]
    assert name.startswith("x-rm-rf-touch-pwned") and len(name) <= 40
    assert shlex.quote(name) == name


def test_cli_reports_hostile_launch_values(tmp_path: Path) -> None:
    plan_file = tmp_path / "bad.yaml"
    plan_file.write_text(f"extends: {REPO / 'plans' / 'llama2-7b.yaml'}\nlaunch:\n"
                         "  image: 'img $(reboot)'\n")
    done = subprocess.run([sys.executable, "-m", "budgetdsl", "export", str(plan_file), "--to", "slurm"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and done.stdout == ""
    assert "bad.yaml:3:" in done.stderr and "container image" in done.stderr
