"""Several processes per sweep task (`--gpus-per-task G`, `--nodes-per-task M`): the task runs under
torchrun, its processes share each step's micro-batches from one data stream (the global batch is
unchanged), rank 0 writes; two gloo processes reach the target in the steps one process needs.
Uneven splits and requests sinfo cannot hold are refused before anything is submitted, and the
Kubeflow manifests start one process per GPU."""

from __future__ import annotations

import json
import re
import shutil
import sys
from pathlib import Path

import pytest
import yaml

torch = pytest.importorskip("torch")
pytest.importorskip("submitit")

from budgetdsl.calibrate import cluster as cl  # noqa: E402
from ddp_launch import gloo_env, two_replicas_beside  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "exports"))
from export_validators import (  # noqa: E402
    PYTORCHJOB_CRD,
    TRAINJOB_CRD,
    kubeflow_errors,
    pytorchjob_webhook_errors,
    trainjob_webhook_errors,
)

# A given target: no pilot, any task runs at once; batch 16 = 4 micro-batches of 4 per step.
GIVEN = ["calibrate", "sweep", "--quick", "--batches", "4,8,16", "--target-loss", "3.3", "--max-steps", "120"]


@pytest.mark.slow
def test_two_gloo_processes_reach_the_target_in_the_steps_of_one(cli, tmp_path):
    folder = tmp_path / "two"
    assert cli([*GIVEN, "--emit", "kubeflow", "--gpus-per-task", "2", "--sweep-dir", str(folder), "--quiet"]) == 0
    doc = yaml.safe_load((folder / "kubeflow" / "b16-s1337.yaml").read_text())
    words = doc["spec"]["trainer"]["command"] + doc["spec"]["trainer"].get("args", [])
    program = words[words.index("-m"):]  # what the pod's torchrun starts: -m MODULE DIR TASK
    assert program == ["-m", "budgetdsl.calibrate.cluster", str(folder), "b16-s1337"]
    one = tmp_path / "one"
    shutil.copytree(folder, one)
    # torchrun (--standalone, 2 gloo processes) on the task, beside one process running it here
    two_replicas_beside(program, lambda: cl.run_task(one, "b16-s1337", say=lambda _m: None),
                        env=gloo_env(REPO), cwd=tmp_path)
    a, b = (json.loads((f / "tasks" / "b16-s1337" / "result.json").read_text()) for f in (one, folder))
    assert a["world_size"] == 1 and b["world_size"] == 2
    ra, rb = a["runs"][0], b["runs"][0]
    assert ra["reached"] and rb["reached"] and ra["eval_steps"] == rb["eval_steps"]
    assert rb["steps_to_target"] == pytest.approx(ra["steps_to_target"], abs=1e-3)  # float noise only
    assert rb["eval_losses"] == pytest.approx(ra["eval_losses"], rel=1e-5)
    assert rb["grad_sq"] == pytest.approx(ra["grad_sq"], rel=1e-3)  # the replicas' micro-batches are B_small
    prov = b["calibration"]["provenance"]["batch"]
    assert prov["world_size"] == 2 and prov["accumulation"] == 2 and prov["global_batch_examples"] == 16
    # rank 0 alone wrote: one result, no checkpoint left, no error
    assert sorted(p.name for p in (folder / "tasks" / "b16-s1337").iterdir()) == ["result.json"]


def test_an_uneven_split_is_refused_before_anything_is_made(cli, tmp_path, capsys):
    folder = tmp_path / "s"
    assert cli([*GIVEN, "--emit", "kubeflow", "--gpus-per-task", "3", "--sweep-dir", str(folder)]) == 2
    err = capsys.readouterr().err
    assert "--gpus-per-task 3 x --nodes-per-task 1: 3 processes per task cannot share the micro-batches of " \
           "batch 4 (2 x 2), 8 (4 x 2), 16 (4 x 4) evenly" in err
    assert len(err.strip().splitlines()) <= 2 and not folder.exists()
    assert cli([*GIVEN, "--emit", "kubeflow", "--nodes-per-task", "0", "--sweep-dir", str(folder)]) == 2
    assert "--nodes-per-task must be between 1 and 1024" in capsys.readouterr().err


def _fake_slurm(tmp_path: Path, sinfo: str) -> Path:
    bin_dir = tmp_path / "fake-bin"
    bin_dir.mkdir()
    scripts = {
        "sbatch": f'[ "$1" = --test-only ] && exit 0; n=$(ls {bin_dir}/*.sh 2>/dev/null | wc -l); '
                  f'cp "$1" {bin_dir}/got-$n.sh; echo "Submitted batch job $((100 + n))"',
        "squeue": "exit 0",
        "scontrol": '[ "$1" = ping ] && echo "Slurmctld(primary) at vm is UP"; exit 0',
        "sinfo": f"printf '{sinfo}\\n'",
    }
    for name, body in scripts.items():
        (bin_dir / name).write_text(f"#!/bin/sh\n{body}\n")
        (bin_dir / name).chmod(0o755)
    return bin_dir


@pytest.mark.parametrize("flags, said", [
    (["--gpus-per-task", "4"], "a task asks for 1 node(s) of 4 GPU(s)"),
    (["--gpus-per-task", "2", "--nodes-per-task", "2"], "a task asks for 2 node(s) of 2 GPU(s)"),
])
def test_sinfo_is_asked_for_the_nodes_and_gpus_a_task_needs(cli, tmp_path, monkeypatch, capsys, flags, said):
    bin_dir = _fake_slurm(tmp_path, "local|up|1|gpu:2\\ncloud|up|0|(null)")
    monkeypatch.setenv("PATH", f"{bin_dir}:{Path(sys.executable).parent}:/usr/bin:/bin")
    folder = tmp_path / "s"
    # batches of 4 micro-batches per step: any of 1, 2 or 4 processes can share them
    assert cli([*GIVEN, "--batches", "8,16,32", "--executor", "slurm", "--partition", "local", *flags,
                "--sweep-dir", str(folder)]) == 2
    err = capsys.readouterr().err
    assert said in err and "sinfo lists local: 1 node(s) of 2 GPU(s); nothing was submitted" in err
    assert not list(bin_dir.glob("got-*.sh")) and not folder.exists()
    # what the partition holds is submitted: one Slurm task per process, the GPUs on each node
    assert cli([*GIVEN, "--executor", "slurm", "--partition", "local", "--gpus-per-task", "2", "--sweep-dir",
                str(folder), "--no-wait", "--quiet"]) == 0
    script = next(iter(sorted(bin_dir.glob("got-*.sh")))).read_text()
    directives = [line for line in script.splitlines() if line.startswith("#SBATCH")]
    assert "#SBATCH --nodes=1" in directives and "#SBATCH --ntasks-per-node=2" in directives
    assert "#SBATCH --gpus-per-node=2" in directives
    assert any(re.search(r"srun .*--ntasks=2|srun", line) for line in script.splitlines())


def test_kubeflow_and_pytorchjob_start_one_process_per_gpu_on_every_node(cli, tmp_path):
    folder = tmp_path / "kf"
    assert cli([*GIVEN, "--batches", "8,16,32", "--emit", "kubeflow", "--gpus-per-task", "2", "--nodes-per-task", "2",
                "--sweep-dir", str(folder), "--quiet"]) == 0
    for p in sorted((folder / "kubeflow").glob("*.yaml")):
        doc = yaml.safe_load(p.read_text())
        assert kubeflow_errors(doc, TRAINJOB_CRD) == [] and trainjob_webhook_errors(doc) == []
        trainer = doc["spec"]["trainer"]
        assert trainer["numNodes"] == 2 and trainer["numProcPerNode"] == 2
        assert trainer["resourcesPerNode"] == {"limits": {"nvidia.com/gpu": 2}}
    folder = tmp_path / "pj"
    assert cli([*GIVEN, "--batches", "8,16,32", "--emit", "pytorchjob", "--gpus-per-task", "2", "--nodes-per-task", "2",
                "--sweep-dir", str(folder), "--quiet"]) == 0
    for p in sorted((folder / "pytorchjob").glob("*.yaml")):
        doc = yaml.safe_load(p.read_text())
        assert kubeflow_errors(doc, PYTORCHJOB_CRD) == [] and pytorchjob_webhook_errors(doc) == []
        assert doc["spec"]["nprocPerNode"] == "2"
        replicas = doc["spec"]["pytorchReplicaSpecs"]
        assert replicas["Master"]["replicas"] == 1 and replicas["Worker"]["replicas"] == 1
        for r in replicas.values():
            assert r["template"]["spec"]["containers"][0]["resources"] == {"limits": {"nvidia.com/gpu": 2}}


def _workers(launcher: int) -> dict[int, int]:
    """{rank: pid} of the processes torchrun started (its children running the task)."""
    out = {}
    for pid in Path(f"/proc/{launcher}/task/{launcher}/children").read_text().split():
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            env = dict(v.split(b"=", 1) for v in Path(f"/proc/{pid}/environ").read_bytes().split(b"\0") if b"=" in v)
        except OSError:
            continue
        if b"budgetdsl.calibrate.cluster" in cmd and b"RANK" in env:
            out[int(env[b"RANK"])] = int(pid)
    return out


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="finds torchrun's workers in /proc")
def test_a_signal_to_one_process_stops_every_one_at_one_step_and_the_task_resumes(cli, tmp_path):
    import os
    import signal
    import subprocess
    import time

    folder = tmp_path / "two"
    assert cli([*GIVEN, "--target-loss", "2.8", "--emit", "kubeflow", "--gpus-per-task", "2",
                "--sweep-dir", str(folder), "--quiet"]) == 0
    one = tmp_path / "one"
    shutil.copytree(folder, one)
    key = "b16-s1337"
    launch = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nnodes", "1", "--nproc-per-node", "2",
              "-m", "budgetdsl.calibrate.cluster", str(folder), key]
    run = subprocess.Popen(launch, env=gloo_env(REPO), cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True, start_new_session=True)
    try:
        ckpt = folder / "tasks" / key / "ckpt.pt"
        end = time.monotonic() + 120
        while not ckpt.exists() and run.poll() is None and time.monotonic() < end:
            time.sleep(0.02)
        assert ckpt.exists(), run.communicate()[0][-3000:]
        os.kill(_workers(run.pid)[1], signal.SIGTERM)  # rank 1 alone: rank 0 learns it from the vote
        out, _ = run.communicate(timeout=120)  # a rank left waiting in a collective would hang here
    finally:
        if run.poll() is None:
            os.killpg(run.pid, signal.SIGKILL)
            run.wait()
    assert run.returncode != 0 and f"task {key}: stopped by signal 15" in out  # rank 0, told by rank 1's vote
    assert not (folder / "tasks" / key / "result.json").exists() and ckpt.exists()
    # resumed under torchrun, beside the uninterrupted run in one process
    two_replicas_beside(launch[3:], lambda: cl.run_task(one, key, say=lambda _m: None), env=gloo_env(REPO),
                        cwd=tmp_path)
    a, b = (json.loads((f / "tasks" / key / "result.json").read_text())["runs"][0] for f in (one, folder))
    assert b["reached"] and b["eval_steps"] == a["eval_steps"]
    assert b["steps_to_target"] == pytest.approx(a["steps_to_target"], abs=1e-3)


def test_processes_per_task_without_a_cluster_are_a_usage_error(cli, tmp_path, capsys):
    assert cli([*GIVEN, "--gpus-per-task", "2", "--out", str(tmp_path / "s.json")]) == 2
    assert "--gpus-per-task and --nodes-per-task shape the tasks of --executor slurm or --emit" in \
        capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []
