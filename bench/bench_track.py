"""Benchmark of `budgetdsl track`: reading a 10⁶-step TensorBoard log, in CPU time and peak memory.

The log is what a job that logs every step writes through torch.utils.tensorboard.SummaryWriter:
the loss and the tokens seen at each of 10⁶ steps (2·10⁶ events, one file). It is written once into
a cache folder (--cache, default /tmp/budgetdsl-bench-track) and read in a fresh process by the
reader and the run record `budgetdsl track` uses; the target (issue 26) is ≤ 5 s and ≤ 200 MB.
The read is timed in --repeat fresh processes (default 3): on a shared machine the least CPU time
is the one least inflated by the other jobs; the most is printed beside it.
Run: .venv/bin/python bench/bench_track.py [--steps N] [--repeat K]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

READ = r"""
import json, resource, sys, time
from budgetdsl.track.metrics import MetricMap
from budgetdsl.track.run import merge
from budgetdsl.track.sources import expand, timeline
def peak_mb():  # this process's own high-water mark (ru_maxrss would include the parent's before exec)
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
before = peak_mb()
t = time.process_time()
files = expand([sys.argv[1]])
line = merge([timeline(f, MetricMap()) for f in files])
cpu = time.process_time() - t
print(json.dumps({"steps": len(line), "cpu_s": cpu, "peak_rss_mb": peak_mb(), "rss_before_mb": before}))
"""

FOLLOW = r"""
import json, sys, tempfile, time
from torch.utils.tensorboard import SummaryWriter
from budgetdsl.plan.loader import load_plan
from budgetdsl.solve.solver import solve
from budgetdsl.track.follow import Follower
from budgetdsl.track.forecast import analyse
from budgetdsl.track.metrics import MetricMap
plan = load_plan(sys.argv[2])
solution = solve(plan)
steps = int(sys.argv[3])
new = tempfile.mkdtemp()
follower = Follower([sys.argv[1], new], MetricMap())
follower.poll()
writer = SummaryWriter(new, max_queue=1, flush_secs=3600)
costs = []
for k in range(1, 21):
    writer.add_scalar("train/loss", 1.0, steps + k, walltime=1.7e9 + (steps + k) * 0.5)
    writer.add_scalar("train/num_input_tokens_seen", (steps + k) * 4096, steps + k, walltime=1.7e9 + (steps + k) * 0.5)
    writer.flush()
    t = time.process_time()
    assert follower.poll() == 1
    track = analyse(follower.timeline(), solution, follower.files, plan.model.seq_len)
    costs.append(time.process_time() - t)
    assert track.steps_done == steps + k
costs.sort()
print(json.dumps({"median_ms": 1000 * costs[len(costs) // 2], "max_ms": 1000 * costs[-1]}))
"""
PLAN = """name: bench-track
model: {params: 125M, layers: 12, d_model: 768, seq_len: 512}
hardware: {gpu: H100-SXM5-80GB, gpus: 8, mfu: 40%}
target: {tokens: 1e10, at_batch: 4096}
noise: {b_crit: 1M}
run: {batch: 4096, micro_batch: 1}
"""


def write_log(folder: str, steps: int) -> None:
    from torch.utils.tensorboard import SummaryWriter

    writer = SummaryWriter(folder, max_queue=10_000, flush_secs=3600)
    start = 1.7e9
    for step in range(1, steps + 1):
        writer.add_scalar("train/loss", 3.0 / (1 + step * 1e-5), step, walltime=start + step * 0.5)
        writer.add_scalar("train/num_input_tokens_seen", step * 4096, step, walltime=start + step * 0.5)
    writer.close()


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=1_000_000)
    p.add_argument("--cache", default="/tmp/budgetdsl-bench-track")
    p.add_argument("--repeat", type=int, default=3, help="fresh processes that read the log (least CPU shown)")
    args = p.parse_args()
    folder = os.path.join(args.cache, f"steps-{args.steps}")
    if not os.path.isdir(folder):
        t = time.perf_counter()
        write_log(folder + ".tmp", args.steps)
        os.rename(folder + ".tmp", folder)
        print(f"wrote the log in {time.perf_counter() - t:.0f} s", file=sys.stderr)
    size = sum(os.path.getsize(os.path.join(folder, f)) for f in os.listdir(folder))
    runs = []
    for _ in range(max(1, args.repeat)):
        out = subprocess.run([sys.executable, "-c", READ, folder], capture_output=True, text=True, check=True)
        runs.append(json.loads(out.stdout))
        assert runs[-1]["steps"] == args.steps, runs[-1]
    got = min(runs, key=lambda r: r["cpu_s"])
    print(f"track read {args.steps:,} steps ({size / 2**20:.0f} MiB of events): "
          f"{got['cpu_s']:.2f} s CPU (least of {len(runs)}; most {max(r['cpu_s'] for r in runs):.2f} s), "
          f"peak RSS {max(r['peak_rss_mb'] for r in runs):.0f} MB "
          f"(interpreter and imports before reading: {got['rss_before_mb']:.0f} MB)")
    plan = os.path.join(args.cache, "bench-track.yaml")
    with open(plan, "w") as f:
        f.write(PLAN)
    out = subprocess.run([sys.executable, "-c", FOLLOW, folder, plan, str(args.steps)], capture_output=True,
                         text=True, check=True)
    got = json.loads(out.stdout)
    print(f"--follow on {args.steps:,} steps: one new record read, merged and forecast in "
          f"{got['median_ms']:.0f} ms CPU (median of 20; max {got['max_ms']:.0f} ms)")


if __name__ == "__main__":
    main()
