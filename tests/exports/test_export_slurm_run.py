"""The single-node Slurm export, submitted to the live CI cluster and run to completion:
sbatch → srun → torchrun → 2 gloo CPU processes training the tiny payload (.ci/setup-slurm.sh
gives this host two fake GPUs in partition `local`)."""

from __future__ import annotations

import json
import os
import random
import socket
import sys
from pathlib import Path

import pytest
from export_specs import make_spec
from export_validators import need_module, need_slurm, run, validate_slurm

from budgetdsl.exports import export
from budgetdsl.plan.launch import Launch

PAYLOAD = Path(__file__).parent / "payload" / "tiny_train.py"


def _free_port() -> int:
    """A free port below the system's ephemeral range: the system never hands one of those to a
    socket that binds port 0 or connects, so none takes it between this check and the job's torchrun
    binding it. A port from bind(0), closed here, could go meanwhile to another test's gloo replicas
    (`make test` runs a file per CPU at once)."""
    ranges = Path("/proc/sys/net/ipv4/ip_local_port_range")
    first = int(ranges.read_text().split()[0]) if ranges.exists() else 32768
    for port in random.Random().sample(range(20000, max(first, 20100)), 100):
        with socket.socket() as s:
            try:
                s.bind(("", port))
            except OSError:
                continue
            return port
    raise AssertionError(f"no free port in 20000-{first}")


@pytest.mark.slow
def test_single_node_script_runs_to_completion(tmp_path, monkeypatch) -> None:
    need_module("torch")
    need_slurm()
    result = tmp_path / "result.json"
    spec = make_spec(name="it's a \"test\" $(run)", launch=Launch(
        image="python:3.11", command=[str(PAYLOAD), str(result)], partition="local",
        rdzv_port=_free_port(), env={"OMP_NUM_THREADS": "1"}, runtime="torch-distributed"))
    script = tmp_path / "job.sbatch"
    script.write_text(export(spec, "slurm"))
    validate_slurm(script.read_text(), spec, tmp_path)  # bash -n, shellcheck, --test-only

    path = f"{os.path.dirname(sys.executable)}:{os.environ.get('PATH', '')}"  # torchrun, python
    done = run(["sbatch", "--wait", f"--chdir={tmp_path}", f"--output={tmp_path}/slurm-%j.out",
                f"--export=ALL,PATH={path}", str(script)], timeout=420)
    logs = "\n".join(p.read_text() for p in tmp_path.glob("slurm-*.out"))
    assert done.returncode == 0, f"job failed:\n{done.stdout}{done.stderr}\n{logs[-4000:]}"
    seen = json.loads(result.read_text())
    assert seen["world_size"] == spec.data_parallel == 2
    assert seen["local_world_size"] == spec.gpus_per_node
    assert seen["samples"] == spec.steps * spec.global_batch_sequences
    assert seen["slurm_job_id"]
    assert seen["run_name"] == spec.name
