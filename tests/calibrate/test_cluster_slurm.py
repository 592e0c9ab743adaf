"""The frontier sweep as a real Slurm job array on the CI's cluster (.ci/setup-slurm.sh: partition
`local` runs jobs on this host): four tasks of gpt-nano, submitted, collected and fitted; the
submitting process killed and the sweep collected by another process; a task cancelled mid-run
with `scancel`, listed with its Slurm state and log, resubmitted alone with `--retry-failed`, and
the sweep ends with the fit of the uninterrupted one, bit for bit; the same sweep run locally gives
the same B_crit within its interval. Skips (fails under CI=true) without a running slurmctld."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("submitit")

from budgetdsl.plan.calibration_file import load_calibration  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "exports"))
from export_validators import need_slurm  # noqa: E402

SWEEP = ["calibrate", "sweep", "--quick", "--batches", "4,8,16,32"]
ON_SLURM = ["--executor", "slurm", "--partition", "local", "--time", "15", "--poll", "1"]
PILOT = "b4-s1337"
pytestmark = pytest.mark.slow


def _budgetdsl(*args: str, **kw) -> list[str]:
    return [sys.executable, "-m", "budgetdsl", *args]


def _env() -> dict[str, str]:
    return {**os.environ, "OMP_NUM_THREADS": "1"}  # sbatch passes the submitter's environment on


def _wait_for(check, what: str, timeout: float = 300.0, every: float = 0.05):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        got = check()
        if got:
            return got
        time.sleep(every)
    raise AssertionError(f"timed out waiting for {what}")


def _jobs(folder: Path) -> dict:
    try:
        return json.loads((folder / "sweep.json").read_text()).get("jobs", {})
    except (OSError, ValueError):
        return {}


def _steps(cal) -> list[tuple[int, float | None]]:
    return [(r.batch_examples, r.steps_to_target) for r in cal.sweep.runs]


@pytest.fixture(scope="module")
def killed_submitter(tmp_path_factory):
    """A sweep whose submitter is killed (SIGKILL) once its jobs are in, then collected by a
    second process while a third, on the same folder, is turned away."""
    need_slurm()
    folder = tmp_path_factory.mktemp("slurm") / "sweep"
    started = time.monotonic()
    submitter = subprocess.Popen(_budgetdsl(*SWEEP, *ON_SLURM, "--sweep-dir", str(folder)), env=_env(),
                                 stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        _wait_for(lambda: len(_jobs(folder)) == 4 or submitter.poll() is not None, "the submission")
        assert submitter.poll() is None, submitter.stderr.read()
    finally:
        submitter.send_signal(signal.SIGKILL)
        submitter.wait()
    collector = subprocess.Popen(_budgetdsl(*SWEEP[:2], "--collect", str(folder), "--poll", "1"), env=_env(),
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lock = folder / "collect.lock"  # the killed submitter's is there, unlocked: wait for the collector's pid
    _wait_for(lambda: (lock.exists() and lock.read_text().strip() == str(collector.pid))
              or collector.poll() is not None, "the collector's lock")
    second = subprocess.run(_budgetdsl(*SWEEP[:2], "--collect", str(folder), "--no-wait"), env=_env(),
                            capture_output=True, text=True, timeout=300)
    out, err = collector.communicate(timeout=600)
    return folder, collector.returncode, out, err, second, time.monotonic() - started


def test_a_sweep_whose_submitter_died_is_collected_by_another_process(killed_submitter):
    folder, code, out, err, second, seconds = killed_submitter
    assert code == 0, err[-3000:]
    assert second.returncode == 2 and "another collector (pid" in second.stderr
    cal = load_calibration(folder / "calibration.json")
    sw = cal.sweep
    assert not cal.interrupted and not sw.interrupted
    assert [r.batch_examples for r in sw.runs] == [4, 8, 16, 32] and all(r.reached for r in sw.runs)
    assert sw.fit.n_points == 4 and sw.fit.b_crit_ci_low_tokens < sw.fit.b_crit_tokens < sw.fit.b_crit_ci_high_tokens
    # progress per task as they finish, and a refit each time one arrives
    assert "0 pending, 0 running, 4 done, 0 failed" in err and "refit over 4 of 4 batches" in err
    assert "refit over 3 of 4 batches" in err or "no fit yet" in err  # incremental, not only at the end
    assert "B_crit = E_min/S_min" in out
    # each task ran in its own Slurm job of the array
    results = [json.loads((folder / "tasks" / k / "result.json").read_text())
               for k in ("b4-s1337", "b8-s1337", "b16-s1337", "b32-s1337")]
    assert results[0]["slurm_job"] and results[0]["array_task"] is None  # the pilot: a job of its own
    assert sorted(r["array_task"] for r in results[1:]) == ["0", "1", "2"]
    print(f"killed-submitter sweep: {seconds:.0f} s wall")


def test_the_same_sweep_run_locally_gives_the_same_b_crit(killed_submitter, cli, tmp_path):
    folder = killed_submitter[0]
    slurm = load_calibration(folder / "calibration.json").sweep
    out = tmp_path / "local.json"
    assert cli([*SWEEP, "--quiet", "--out", str(out)]) == 0
    local = load_calibration(out).sweep
    # the pilot and the batch after it run exactly as locally (same start, same data, same evaluations)
    assert _steps(load_calibration(out))[:2] == [(r.batch_examples, r.steps_to_target) for r in slurm.runs[:2]]
    assert local.target_loss == slurm.target_loss
    f, g = slurm.fit, local.fit
    assert f.b_crit_ci_low_tokens < g.b_crit_tokens < f.b_crit_ci_high_tokens
    assert g.b_crit_ci_low_tokens < f.b_crit_tokens < g.b_crit_ci_high_tokens


def test_a_cancelled_task_is_listed_resubmitted_and_resumes_to_the_same_fit(killed_submitter, tmp_path):
    reference = load_calibration(killed_submitter[0] / "calibration.json")
    folder = tmp_path / "sweep"
    env = _env()
    done = subprocess.run(_budgetdsl(*SWEEP, *ON_SLURM, "--sweep-dir", str(folder), "--no-wait"), env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    ckpt = folder / "tasks" / PILOT / "ckpt.pt"
    _wait_for(ckpt.exists, "the pilot's first checkpoint", every=0.02)
    pilot_job = _jobs(folder)[PILOT]["id"]
    subprocess.run(["scancel", pilot_job], check=True, timeout=60)
    _wait_for(lambda: not subprocess.run(["squeue", "-h", "-j", pilot_job], capture_output=True,
                                         text=True).stdout.strip(), "the cancelled job to leave the queue")
    assert not (folder / "tasks" / PILOT / "result.json").exists(), "the pilot finished before scancel"
    array = _jobs(folder)["b8-s1337"]["id"].split("_")[0]
    _wait_for(lambda: "DependencyNeverSatisfied" in subprocess.run(
        ["squeue", "-h", "-j", array, "-o", "%r"], capture_output=True, text=True).stdout,
        "Slurm to give up on the tasks that waited for the pilot", every=0.5)

    looked = subprocess.run(_budgetdsl(*SWEEP[:2], "--collect", str(folder), "--no-wait"), env=env,
                            capture_output=True, text=True, timeout=300)
    assert looked.returncode == 1
    log = _jobs(folder)[PILOT]["log"]
    assert f"task {PILOT} failed: Slurm CANCELLED, cancelled (scancel or preempted); log {log}" in looked.stderr
    assert "DependencyNeverSatisfied" in looked.stderr  # the tasks that waited for it
    assert "--retry-failed" in looked.stderr
    assert "stopped by signal 15" in Path(log).read_text()  # it saved its state on Slurm's SIGTERM

    retried = subprocess.run(_budgetdsl(*SWEEP[:2], "--collect", str(folder), "--retry-failed", "--poll", "1"),
                             env=env, capture_output=True, text=True, timeout=600)
    assert retried.returncode == 0, retried.stderr[-3000:]
    assert f"resubmitted {PILOT} (was CANCELLED" in retried.stderr
    new_log = Path(_jobs(folder)[PILOT]["log"])
    assert new_log != Path(log) and "batch 4: resuming at lr multiplier 1, step" in new_log.read_text()
    cal = load_calibration(folder / "calibration.json")
    assert _steps(cal) == _steps(reference)  # the resumed run is the uninterrupted one, to the last bit
    assert cal.sweep.fit.b_crit_tokens == reference.sweep.fit.b_crit_tokens


def test_a_task_of_two_processes_on_slurm_reaches_the_steps_of_one(cli, tmp_path):
    """--gpus-per-task 2 on the `local` partition (two GPU slots, no devices): two Slurm tasks per
    sweep task, joined by torchrun's environment over gloo, against the same tasks in one process."""
    need_slurm()
    given = [*SWEEP[:3], "--batches", "4,8,16", "--target-loss", "3.3", "--max-steps", "120"]
    folder = tmp_path / "sweep"
    done = subprocess.run(_budgetdsl(*given, *ON_SLURM, "--gpus-per-task", "2", "--sweep-dir", str(folder)),
                          env=_env(), capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    # the reference: the same tasks, one process each, here (a local sweep in a task folder)
    assert cli([*given, "--quiet", "--sweep-dir", str(tmp_path / "here"), "--out", str(tmp_path / "one.json")]) == 0
    one, two = (load_calibration(p).sweep for p in (tmp_path / "one.json", folder / "calibration.json"))
    for key in ("b4-s1337", "b8-s1337", "b16-s1337"):
        result = json.loads((folder / "tasks" / key / "result.json").read_text())
        assert result["world_size"] == 2 and result["calibration"]["hardware"]["world_size"] == 2
    assert [r.batch_examples for r in two.runs] == [r.batch_examples for r in one.runs] == [4, 8, 16]
    for a, b in zip(one.runs, two.runs):
        assert b.steps_to_target == pytest.approx(a.steps_to_target, abs=1e-3)
