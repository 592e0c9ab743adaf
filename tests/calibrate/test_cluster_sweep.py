"""`budgetdsl calibrate sweep` on a cluster, without a live Slurm: what reaches the sbatch script,
bad input (no Slurm, controller down, unknown partition, a torn result, two collectors), a partial
sweep's fit, the Kubeflow manifests against the vendored CRD schemas, and the cost guard. The
tasks here run as a Kubernetes pod runs them (`python -m budgetdsl.calibrate.cluster DIR TASK`);
the live Slurm array is in test_cluster_slurm.py."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

torch = pytest.importorskip("torch")
pytest.importorskip("submitit")

from budgetdsl.calibrate import cluster as cl  # noqa: E402
from budgetdsl.calibrate.out_lock import out_lock  # noqa: E402
from budgetdsl.calibrate.sweep_config import QUICK, QUICK_BASE, SweepConfig  # noqa: E402

from budgetdsl.plan.calibration_file import load_calibration  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "exports"))
from export_validators import (  # noqa: E402
    PYTORCHJOB_CRD,
    TRAINJOB_CRD,
    kubeflow_errors,
    pytorchjob_webhook_errors,
    trainjob_webhook_errors,
)

QUICK4 = ["calibrate", "sweep", "--quick", "--batches", "4,8,16,32"]


def _fake_slurm(tmp_path: Path, *, ping: str = "Slurmctld(primary) at vm is UP",
                partitions: str = "budgetdsl|up\nlocal|up") -> Path:
    """sbatch, squeue, scontrol and sinfo as small scripts: sbatch keeps each script it is given."""
    bin_dir = tmp_path / "fake-bin"
    bin_dir.mkdir()
    scripts = {
        "sbatch": f'[ "$1" = --test-only ] && exit 0; n=$(ls {bin_dir}/*.sh 2>/dev/null | wc -l); '
                  f'cp "$1" {bin_dir}/got-$n.sh; echo "Submitted batch job $((100 + n))"',
        "squeue": "exit 0",
        "scontrol": f'[ "$1" = ping ] && echo "{ping}"; exit 0',
        "sinfo": f"printf '{partitions}\\n'",
    }
    for name, body in scripts.items():
        path = bin_dir / name
        path.write_text(f"#!/bin/sh\n{body}\n")
        path.chmod(0o755)
    return bin_dir


def _path_with(monkeypatch, bin_dir: Path) -> None:
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.path.dirname(sys.executable)}:/usr/bin:/bin")


# --- options and what reaches the script -----------------------------------------------------

@pytest.mark.parametrize("opts, message", [
    (cl.SlurmOptions(partition="local\n#SBATCH --wrap=id"), "not a Slurm name"),
    (cl.SlurmOptions(account="a'b"), "not a Slurm name"),
    (cl.SlurmOptions(nodes_per_task=0), "--nodes-per-task must be between 1 and 1024"),
    (cl.SlurmOptions(time_min=0), "--time"),
    (cl.SlurmOptions(gpus_per_task=-1), "--gpus-per-task"),
])
def test_slurm_options_that_could_not_run_or_could_inject_are_refused(opts, message):
    with pytest.raises(ValueError, match=message):
        opts.validate()


def test_time_limits_read_as_slurm_and_people_write_them():
    assert [cl.parse_time(t) for t in ("90", "90m", "2h", "1d", "01:30:00", "1-00:00:30")] == \
        [90, 90, 120, 1440, 90, 1441]
    with pytest.raises(ValueError, match="HH:MM:SS"):
        cl.parse_time("soon")


def test_a_folder_path_that_would_break_an_sbatch_line_is_refused(cli, tmp_path, capsys):
    bad = tmp_path / "a\n#SBATCH --wrap=id"
    assert cli([*QUICK4, "--executor", "slurm", "--sweep-dir", str(bad)]) == 2
    assert "only letters, digits" in capsys.readouterr().err
    assert not bad.exists()


def test_the_script_submitit_writes_holds_only_checked_values(cli, tmp_path, monkeypatch, capsys):
    bin_dir = _fake_slurm(tmp_path)
    _path_with(monkeypatch, bin_dir)
    folder = tmp_path / "sweep"
    code = cli([*QUICK4, "--executor", "slurm", "--sweep-dir", str(folder), "--partition", "local",
                "--account", "proj-1", "--time", "2h", "--gpus-per-task", "1", "--no-wait"])
    assert code == 0, capsys.readouterr().err
    scripts = sorted(bin_dir.glob("got-*.sh"))
    assert len(scripts) == 2  # the pilot alone, then the array that waits for it
    pilot, array = (s.read_text() for s in scripts)
    for text in (pilot, array):
        directives = [line for line in text.splitlines() if line.startswith("#SBATCH")]
        assert all(re.fullmatch(r"#SBATCH --[a-z-]+(=[A-Za-z0-9_./@%:,+=-]+)?", d) for d in directives), directives
        assert "#SBATCH --partition=local" in directives and "#SBATCH --account=proj-1" in directives
        assert "#SBATCH --time=120" in directives and "#SBATCH --gpus-per-node=1" in directives
    assert "#SBATCH --array=0-2%3" in array and "#SBATCH --dependency=afterok:100" in array
    manifest = json.loads((folder / "sweep.json").read_text())
    assert manifest["jobs"]["b4-s1337"]["id"] == "100"
    assert [manifest["jobs"][k]["id"] for k in ("b8-s1337", "b16-s1337", "b32-s1337")] == ["101_0", "101_1", "101_2"]
    err = capsys.readouterr().err
    assert "budget: 4 tasks of gpt-nano" in err and "--collect" in err


def test_a_controller_that_stops_answering_leaves_the_tasks_pending_not_failed(cli, tmp_path, monkeypatch, capsys):
    bin_dir = _fake_slurm(tmp_path)
    _path_with(monkeypatch, bin_dir)
    folder = tmp_path / "sweep"
    assert cli([*QUICK4, "--executor", "slurm", "--sweep-dir", str(folder), "--no-wait", "--quiet"]) == 0
    (bin_dir / "squeue").write_text("#!/bin/sh\necho 'Unable to contact slurm controller' >&2\nexit 1\n")
    sts = cl.states(folder, cl.read_manifest(folder))
    assert [s.state for s in sts] == ["pending"] * 4 and all("did not answer" in s.reason for s in sts)
    monkeypatch.setenv("PATH", str(tmp_path))  # a machine without Slurm: it cannot follow the tasks
    assert cli(["calibrate", "sweep", "--collect", str(folder)]) == 2
    assert "no Slurm here (`squeue` is not on PATH)" in capsys.readouterr().err


def test_tasks_out_of_memory_or_past_their_time_are_listed_with_state_and_log(cli, tmp_path, monkeypatch, capsys):
    bin_dir = _fake_slurm(tmp_path)
    _path_with(monkeypatch, bin_dir)
    folder = tmp_path / "sweep"
    assert cli([*QUICK4, "--executor", "slurm", "--sweep-dir", str(folder), "--no-wait", "--quiet"]) == 0
    # the jobs have left the queue; Slurm still knows how each ended
    (bin_dir / "scontrol").write_text('#!/bin/sh\n[ "$1" = ping ] && echo "Slurmctld(primary) at vm is UP"\n'
                                      'case "$4" in 100) echo "JobId=100 JobState=OUT_OF_MEMORY Reason=OutOfMemory";;\n'
                                      '*) echo "JobId=$4 JobState=TIMEOUT Reason=TimeLimit";; esac\n')
    jobs = cl.read_manifest(folder)["jobs"]
    for job in jobs.values():
        Path(job["log"]).parent.mkdir(parents=True, exist_ok=True)
        Path(job["log"]).write_text("the task's output\n")
    assert cli(["calibrate", "sweep", "--collect", str(folder), "--no-wait"]) == 1
    err = capsys.readouterr().err
    assert (f"task b4-s1337 failed: Slurm OUT_OF_MEMORY, out of memory; log {jobs['b4-s1337']['log']}") in err
    assert (f"task b32-s1337 failed: Slurm TIMEOUT, ran past --time; log {jobs['b32-s1337']['log']}") in err
    assert f"--collect {folder} --retry-failed" in err
    before = len(list(bin_dir.glob("got-*.sh")))
    assert cli(["calibrate", "sweep", "--collect", str(folder), "--retry-failed", "--no-wait", "--quiet"]) == 0
    assert len(list(bin_dir.glob("got-*.sh"))) == before + 2  # the four resubmitted: the pilot, then the array


def test_a_plan_cannot_inject_through_its_launch_section(cli, tmp_path, capsys):
    plan = tmp_path / "plan.yaml"
    plan.write_text((REPO / "plans/minimal.yaml").read_text()
                    + 'launch:\n  partition: "local\\n#SBATCH --wrap=id"\n')
    assert cli([*QUICK4, "--executor", "slurm", "--plan", str(plan), "--sweep-dir", str(tmp_path / "s")]) == 2
    err = capsys.readouterr().err
    assert f"{plan}:" in err and "not a Slurm name" in err
    assert not (tmp_path / "s").exists()


# --- no Slurm, controller down, unknown partition ------------------------------------------

def test_no_sbatch_on_the_machine_is_said_and_nothing_is_made(cli, tmp_path, monkeypatch, capsys):
    empty = tmp_path / "bin"
    empty.mkdir()
    _path_with(monkeypatch, empty)
    monkeypatch.setenv("PATH", str(empty))
    folder = tmp_path / "sweep"
    assert cli([*QUICK4, "--executor", "slurm", "--sweep-dir", str(folder)]) == 2
    assert "no Slurm here: `sbatch` is not on PATH" in capsys.readouterr().err
    assert not folder.exists()


def test_a_controller_that_is_down_is_said_and_nothing_is_submitted(cli, tmp_path, monkeypatch, capsys):
    bin_dir = _fake_slurm(tmp_path, ping="Slurmctld(primary) at vm is DOWN")
    _path_with(monkeypatch, bin_dir)
    assert cli([*QUICK4, "--executor", "slurm", "--sweep-dir", str(tmp_path / "s")]) == 2
    assert "controller does not answer" in capsys.readouterr().err
    assert not list(bin_dir.glob("got-*.sh")) and not (tmp_path / "s").exists()


def test_an_unknown_partition_names_the_ones_there_are(cli, tmp_path, monkeypatch, capsys):
    _path_with(monkeypatch, _fake_slurm(tmp_path))
    assert cli([*QUICK4, "--executor", "slurm", "--partition", "gpu-big", "--sweep-dir", str(tmp_path / "s")]) == 2
    assert "--partition gpu-big: no such partition; this cluster has budgetdsl, local" in capsys.readouterr().err


# --- tasks outside Slurm: partial sweeps, torn files, two collectors -------------------------

@pytest.fixture(scope="module")
def pod_sweep(tmp_path_factory):
    """An emitted Kubeflow sweep whose first three tasks ran as their pods run them."""
    folder = tmp_path_factory.mktemp("k8s") / "sweep"
    from budgetdsl.cli import main

    assert main([*QUICK4, "--emit", "kubeflow", "--sweep-dir", str(folder), "--quiet"]) == 0
    for key in ("b4-s1337", "b8-s1337", "b16-s1337"):
        doc = yaml.safe_load((folder / "kubeflow" / f"{key}.yaml").read_text())
        words = doc["spec"]["trainer"]["command"] + doc["spec"]["trainer"].get("args", [])
        program = words[words.index("-m"):]  # torchrun's flags, then the program: -m MODULE ARGS
        env = {**os.environ, "OMP_NUM_THREADS": "1"}
        done = subprocess.run([sys.executable, *program], capture_output=True, text=True, env=env, timeout=600)
        assert done.returncode == 0, done.stderr[-2000:]
    return folder


def test_emitted_manifests_pass_the_vendored_crd_schemas(tmp_path, cli, pod_sweep):
    for key in ("b4-s1337", "b8-s1337", "b16-s1337", "b32-s1337"):
        doc = yaml.safe_load((pod_sweep / "kubeflow" / f"{key}.yaml").read_text())
        assert kubeflow_errors(doc, TRAINJOB_CRD) == [] and trainjob_webhook_errors(doc) == []
        assert doc["spec"]["trainer"]["numProcPerNode"] == 1
        assert doc["spec"]["trainer"]["resourcesPerNode"] == {"limits": {"cpu": 1}}
    folder = tmp_path / "pj"
    assert cli([*QUICK4, "--emit", "pytorchjob", "--gpus-per-task", "2", "--sweep-dir", str(folder), "--quiet"]) == 0
    docs = [yaml.safe_load(p.read_text()) for p in sorted((folder / "pytorchjob").glob("*.yaml"))]
    assert len(docs) == 4
    for doc in docs:
        assert kubeflow_errors(doc, PYTORCHJOB_CRD) == [] and pytorchjob_webhook_errors(doc) == []
        container = doc["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0]
        assert container["resources"] == {"limits": {"nvidia.com/gpu": 2}} and doc["spec"]["nprocPerNode"] == "2"


def test_a_partial_sweep_says_what_its_fit_rests_on_and_refuses_below_the_minimum(cli, pod_sweep, capsys):
    out = pod_sweep / "calibration.json"
    assert cli(["calibrate", "sweep", "--collect", str(pod_sweep), "--no-wait"]) == 0
    cal = load_calibration(out)
    assert cal.interrupted and cal.sweep.interrupted  # a plan reading it is told it is partial
    assert "3 of 4 tasks collected; missing b32-s1337 (pending)" in cal.stop_reason
    assert cal.sweep.fit.n_points == 3 and sorted(r.batch_examples for r in cal.sweep.runs) == [4, 8, 16]
    assert "3 of 4 tasks collected" in capsys.readouterr().out
    assert cli(["calibrate", "sweep", "--collect", str(pod_sweep), "--no-wait", "--min-batches", "4"]) == 0
    cal = load_calibration(out)
    assert cal.sweep.fit is None and "the fit needs at least 4" in cal.sweep.fit_error
    assert "no frontier fit" in capsys.readouterr().err


def test_a_torn_result_is_kept_aside_and_the_task_is_failed(pod_sweep, tmp_path):
    import shutil

    folder = tmp_path / "copy"
    shutil.copytree(pod_sweep, folder)
    (folder / "tasks" / "b8-s1337" / "result.json").write_text('{"runs": [{"batch_exa')
    sts = {s.key: s for s in cl.states(folder, cl.read_manifest(folder))}
    assert sts["b8-s1337"].state == "failed" and "torn" in sts["b8-s1337"].reason
    assert list((folder / "tasks" / "b8-s1337").glob("result.torn-*.json"))  # nothing lost
    assert sts["b4-s1337"].state == "done" and sts["b32-s1337"].state == "pending"


def test_two_collectors_on_one_folder_the_second_stops(cli, pod_sweep, capsys):
    with out_lock(pod_sweep / "collect", flag="--collect"):
        assert cli(["calibrate", "sweep", "--collect", str(pod_sweep), "--no-wait"]) == 2
    err = capsys.readouterr().err
    assert f"another collector (pid {os.getpid()}) is following this sweep" in err and "nothing is lost" in err


def test_collect_on_a_folder_that_is_no_sweep(cli, tmp_path, capsys):
    assert cli(["calibrate", "sweep", "--collect", str(tmp_path)]) == 2
    assert "not a sweep folder" in capsys.readouterr().err


# --- the cost up front ---------------------------------------------------------------------

def test_the_budget_is_the_cost_models_and_a_sweep_past_the_limit_is_refused(cli, tmp_path, capsys):
    from budgetdsl.hardware.gpus import find_preset

    folder = tmp_path / "s"
    args = [*QUICK4, "--emit", "kubeflow", "--gpus-per-task", "1", "--gpu", "H100-SXM5-80GB",
            "--sweep-dir", str(folder)]
    assert cli([*args, "--max-gpu-hours", "1e-9"]) == 2
    err = capsys.readouterr().err
    assert "above --max-gpu-hours 1e-09; nothing was submitted" in err and not (folder / "sweep.json").exists()
    # gpt-nano: N = 20,576, one layer of width 32, 32 tokens: f = 6N + 12·L·d·s (PaLM appendix B)
    f = 6 * 20_576 + 12 * 1 * 32 * 32
    cfg = SweepConfig().with_(base=SweepConfig().base.with_(**QUICK_BASE), **{**QUICK, "batches": (4, 8, 16, 32)})
    tokens = sum((cfg.pilot_steps if b == 4 else cfg.steps_limit) * b * 32 for b in cfg.batches)
    evals = 4 * (cfg.evals_per_run + 1) * cfg.base.eval_batches * cfg.eval_micro * 32
    h100 = find_preset("H100-SXM5-80GB")
    hours = (f * tokens + f / 3 * evals) / (h100.peak_flops * h100.kernel_efficiency) / 3600
    total = float(re.search(r"total (\S+) GPU-hours on H100", err).group(1))
    assert total == pytest.approx(hours, rel=5e-3)
    assert cli([*args, "--max-gpu-hours", "1"]) == 0
    assert (folder / "sweep.json").exists()


def test_cluster_flags_without_a_cluster_sweep_are_usage_errors(cli, tmp_path, capsys):
    assert cli([*QUICK4, "--retry-failed", "--out", str(tmp_path / "x.json")]) == 2
    assert "--retry-failed is for a sweep of tasks" in capsys.readouterr().err
    assert cli([*QUICK4, "--executor", "slurm"]) == 2
    assert "need --sweep-dir" in capsys.readouterr().err
