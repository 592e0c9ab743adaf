"""Two real processes under torchrun (gloo on CPU) against one process accumulating over the same
data: the replicas' micro-batches are the small batches, the all-reduced gradient the big batch,
so the two runs must measure the same thing — and, since every replica draws the global batch in
one global order, the very same numbers up to floating-point reduction order."""

import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from ddp_launch import gloo_env, two_replicas_beside  # noqa: E402

from budgetdsl.plan.calibration_file import load_calibration  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
ARGS = ["calibrate", "--quick", "--steps", "8", "--eval-every", "4", "--batch", "16", "--micro-batch", "4", "--quiet"]


@pytest.mark.slow
def test_two_gloo_replicas_match_one_process_with_accumulation(tmp_path, cli):
    single, double = tmp_path / "one.json", tmp_path / "two.json"
    # The one process runs here, in-process through the real entry point (one torch thread, as
    # each replica has), while the replicas start: it saves a third `import torch`.
    rc = two_replicas_beside(["-m", "budgetdsl", *ARGS, "--out", str(double)],
                             lambda: cli([*ARGS, "--out", str(single)]), env=gloo_env(REPO), cwd=tmp_path)
    assert rc == 0
    one, two = load_calibration(single), load_calibration(double)
    assert one.provenance.batch.world_size == 1 and one.provenance.batch.accumulation == 4
    assert two.provenance.batch.world_size == 2 and two.provenance.batch.accumulation == 2
    assert two.hardware.world_size == 2
    for key in ("grad_sq_small", "grad_sq_big", "grad_sq", "trace_sigma", "train_loss"):
        np.testing.assert_allclose(getattr(two.raw, key), getattr(one.raw, key), rtol=1e-4, err_msg=key)
    np.testing.assert_allclose([t.loss for t in two.trajectory], [t.loss for t in one.trajectory], rtol=1e-5)
    assert two.summary.b_simple == pytest.approx(one.summary.b_simple, rel=1e-3)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["one.json", "two.json"]  # rank 0 wrote once


# Each replica: the calibration's own join, an optimizer (the first one imports torch._dynamo, and
# with it torch.distributed.nn), a collective, the calibration's own exit; then the replica's
# threads are counted: the gloo group's worker threads must be gone.
_EXIT_PATH = """
import os, sys, torch
from budgetdsl.calibrate import distributed
before = len(os.listdir("/proc/self/task"))
ctx = distributed.init("cpu")
opt = torch.optim.AdamW(torch.nn.Linear(2, 2).parameters())
total = distributed.all_reduce_sum(ctx, torch.ones(2)).tolist()
distributed.shutdown(ctx)
print(f"rank {ctx.rank}: {before} threads before, {len(os.listdir('/proc/self/task'))} after, {total}")
"""


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="counts threads in /proc")
def test_the_exit_path_joins_the_gloo_threads_before_the_interpreter_exits(tmp_path):
    """A gloo worker thread alive at interpreter exit aborts its replica (SIGABRT, "terminate called
    without an active exception") when it frees a finished collective's tensor; so after
    `distributed.shutdown` the group is gone and its threads joined, however the run imported
    torch (an optimizer imports torch.distributed.nn, which kept the group alive)."""
    script = tmp_path / "exit_path.py"
    script.write_text(_EXIT_PATH)
    done = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nnodes", "1", "--nproc-per-node", "2",
         str(script)], env=gloo_env(REPO), cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    # The replicas' prints can interleave on the shared stdout (no line of their own): match records.
    found = sorted(re.findall(r"rank (\d+): (\d+) threads before, (\d+) after, (\[[^\]]*\])", done.stdout))
    assert [rank for rank, *_ in found] == ["0", "1"], done.stdout
    for rank, before, after, total in found:
        assert int(after) == int(before), (rank, before, after)
        assert total == "[2.0, 2.0]", (rank, total)
