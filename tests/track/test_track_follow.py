"""`budgetdsl track --follow` reads a growing log on: a half-written last line waits for its end,
a restart joins the same timeline, and it ends when the planned tokens are done."""

import json
import subprocess
import sys
import time

PLAN = """name: follow
model: {params: 100k, layers: 2, d_model: 32, seq_len: 32, flops_per_token: 6e5}
hardware: {peak_flops: 1e12, memory_per_device: 8 GiB, gpus: 1, mfu: 0.005}
target: {tokens: 40 * 256, at_batch: 256}
noise: {b_crit: 512}
run: {batch: 256, micro_batch: 8}
"""


def _rows(steps, t0):
    return "".join(f"{s},{t0 + s},{s * 256}\n" for s in steps)


def test_follow_reads_on_and_stops_when_done(tmp_path):
    plan = tmp_path / "plan.yaml"
    plan.write_text(PLAN)
    log = tmp_path / "run.csv"
    log.write_text("step,time,tokens\n" + _rows(range(1, 11), 1000) + "11,10")  # the last line half-written
    proc = subprocess.Popen([sys.executable, "-m", "budgetdsl", "track", str(plan), str(log), "--follow",
                             "--interval", "0.1", "--idle", "60", "--format", "json"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        first = json.loads(proc.stdout.readline())
        assert first["steps_done"] == 10  # not the half-written 11
        with open(log, "a") as f:
            f.write("11,2816\n" + _rows(range(12, 25), 1000))
        second = json.loads(proc.stdout.readline())
        assert second["steps_done"] == 24 and second["tokens_done"] == 24 * 256
        with open(log, "a") as f:  # killed after step 24 (t 1024), resumed from step 20: step 21 at t 1145
            f.write(_rows(range(21, 41), 1124))
        out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    last = json.loads(out.strip().splitlines()[-1])
    assert proc.returncode == 0, err
    assert last["status"] == "finished" and last["steps_done"] == 40
    assert [(r["from_step"], r["to_step"]) for r in last["restarts"]] == [(24, 21)]
    # the 121 s outage and steps 21-24 run twice, less the one step of pace the interval 20 -> 21 owes
    assert last["downtime_s"] == 121 + 4 - 1


def test_follow_gives_up_after_idle_seconds_without_records(tmp_path):
    plan = tmp_path / "plan.yaml"
    plan.write_text(PLAN)
    log = tmp_path / "run.csv"
    log.write_text("step,time,tokens\n" + _rows(range(1, 11), 1000))
    t = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "budgetdsl", "track", str(plan), str(log), "--follow",
                           "--interval", "0.1", "--idle", "1"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.count("follow:") == 1
    assert time.monotonic() - t >= 1
