"""Two real processes under torchrun (gloo on CPU) against one process accumulating over the same
data: the replicas' micro-batches are the small batches, the all-reduced gradient the big batch,
so the two runs must measure the same thing — and, since every replica draws the global batch in
one global order, the very same numbers up to floating-point reduction order."""

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from budgetdsl.calibration_file import load_calibration  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
ARGS = ["calibrate", "--quick", "--steps", "8", "--eval-every", "4", "--batch", "16", "--micro-batch", "4", "--quiet"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _env() -> dict:
    # Loopback only, one thread per process (as torchrun would), the repository importable.
    return {**os.environ, "GLOO_SOCKET_IFNAME": "lo", "OMP_NUM_THREADS": "1",
            "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}


@pytest.mark.slow
def test_two_gloo_replicas_match_one_process_with_accumulation(tmp_path, cli):
    single, double = tmp_path / "one.json", tmp_path / "two.json"
    run = subprocess.Popen(
        [sys.executable, "-m", "torch.distributed.run", "--nnodes", "1", "--nproc-per-node", "2",
         "--master-addr", "127.0.0.1", "--master-port", str(_free_port()),
         "-m", "budgetdsl", *ARGS, "--out", str(double)],
        env=_env(), cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True,  # its own process group: the finally below ends launcher and replicas
    )
    try:
        # The one process runs here, in-process through the real entry point (one torch thread,
        # as each replica has), while the replicas start: it saves a third `import torch`.
        assert cli([*ARGS, "--out", str(single)]) == 0
        _, err = run.communicate(timeout=300)
    finally:
        if run.poll() is None:
            os.killpg(run.pid, signal.SIGKILL)
            run.wait()
    assert run.returncode == 0, err[-3000:]
    one, two = load_calibration(single), load_calibration(double)
    assert one.provenance.batch.world_size == 1 and one.provenance.batch.accumulation == 4
    assert two.provenance.batch.world_size == 2 and two.provenance.batch.accumulation == 2
    assert two.hardware.world_size == 2
    for key in ("grad_sq_small", "grad_sq_big", "grad_sq", "trace_sigma", "train_loss"):
        np.testing.assert_allclose(getattr(two.raw, key), getattr(one.raw, key), rtol=1e-4, err_msg=key)
    np.testing.assert_allclose([t.loss for t in two.trajectory], [t.loss for t in one.trajectory], rtol=1e-5)
    assert two.summary.b_simple == pytest.approx(one.summary.b_simple, rel=1e-3)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["one.json", "two.json"]  # rank 0 wrote once
