"""Two gloo replicas under the real launcher (`python -m torch.distributed.run`), started beside a
single-process reference that the test runs meanwhile: the launcher's `import torch` and the
replicas' start overlap the reference (issue 11 item 7), and the launcher's whole process group is
killed if the reference or the wait fails, so no replica outlives its test.

`--standalone`: the launcher binds its rendezvous store on a port the system picks and keeps it
open, and the replicas join that store; a port picked here and closed before the launcher binds it
could be taken meanwhile by another test's replicas (`make test` runs a file per CPU at once)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")


def gloo_env(*paths: Path) -> dict[str, str]:
    """The environment of the launcher: loopback gloo, one thread per replica, `paths` importable."""
    return {**os.environ, "GLOO_SOCKET_IFNAME": "lo", "OMP_NUM_THREADS": "1",
            "PYTHONPATH": os.pathsep.join([*map(str, paths), os.environ.get("PYTHONPATH", "")])}


def two_replicas_beside(script: list[str], reference: Callable[[], T], *, env: dict[str, str], cwd: Path,
                        timeout: float = 300) -> T:
    """Run `script` (what follows `torch.distributed.run ... `) on two replicas while `reference()`
    runs here; return the reference's result once the replicas exited 0."""
    run = subprocess.Popen(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nnodes", "1", "--nproc-per-node", "2",
         *script],
        env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True)  # its own process group: the finally below ends launcher and replicas
    try:
        result = reference()
        _, err = run.communicate(timeout=timeout)
    finally:
        if run.poll() is None:
            os.killpg(run.pid, signal.SIGKILL)
            run.wait()
    assert run.returncode == 0, err[-3000:]
    return result
