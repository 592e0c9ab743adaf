import os
import sys
from pathlib import Path

import pytest

LINREG = Path(__file__).with_name("linreg_proxy.py")

# One intra-op thread for torch, here and in the processes the tests start (unless OMP_NUM_THREADS
# says otherwise). The proxies are tiny (gpt-nano: 20k parameters, 4x32-token micro-batches), so a
# second thread has nothing to share, and on a busy machine torch's threads spin-wait for each
# other: the quick sweep took 213 s of wall time with the default two threads and 13 s with one on
# the shared 2-core development machine. Nothing a test asserts depends on the thread count (runs
# compared bit for bit run in one process at one thread count, set before any shared run; the gloo
# test pins one thread per process anyway).
THREADS = os.environ.get("OMP_NUM_THREADS", "1")


def _set_torch_threads() -> None:
    torch = sys.modules.get("torch")  # imported by the test modules that need it, never here
    if torch is not None and torch.get_num_threads() != int(THREADS):
        torch.set_num_threads(int(THREADS))


@pytest.fixture(scope="session", autouse=True)
def _one_torch_thread_before_shared_runs():
    _set_torch_threads()  # session scope: before any module-scoped fixture's run


@pytest.fixture(autouse=True)
def _one_torch_thread(monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", THREADS)  # for the processes a test starts
    _set_torch_threads()  # in case torch was imported by a test since


@pytest.fixture
def linreg_args() -> list[str]:
    """--model/--data naming the analytic proxy through the factory interface (file.py:function)."""
    return ["--model", f"{LINREG}:make_model", "--data", f"{LINREG}:make_data"]


@pytest.fixture
def cli():
    """Run `budgetdsl ...` in-process through the real entry point; returns the exit code."""
    from budgetdsl.cli import main

    return main
