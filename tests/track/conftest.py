"""Real training logs for the track tests, made once per session (a few seconds of CPU).

`proxy_runs` trains tests/track/proxy_train.py twice: `whole`, STEPS steps in one go;
`restarted`, killed with SIGKILL after step 120 (its last checkpoint at step 100), requeued for
REQUEUE_S seconds, then resumed from that checkpoint in a new event file to step STEPS. `gns_run`
trains it on Markov text with B_simple logged every 10 steps (`--gns`), at a fast tick: its pace is
not judged.
"""

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("tensorboard")

TRAIN = Path(__file__).with_name("proxy_train.py")
REQUEUE_S = 1.5
STEPS = 200


def _train(out: Path, *extra: str) -> int:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, str(TRAIN), str(out), "--steps", str(STEPS), *extra],
                          env=env, timeout=300).returncode


@pytest.fixture(scope="session")
def proxy_runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("proxy")
    whole, restarted = root / "whole", root / "restarted"
    assert _train(whole) == 0
    assert _train(restarted, "--die-at", "120") == -9  # SIGKILL: the job died
    time.sleep(REQUEUE_S)  # in the queue again
    assert _train(restarted, "--resume") == 0
    return {"whole": whole / "tb", "restarted": restarted / "tb"}


@pytest.fixture(scope="session")
def gns_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("proxy") / "gns"
    assert _train(out, "--gns", str(out / "gns.jsonl"), "--tick", "0.005") == 0
    return {"tb": out / "tb", "gns": out / "gns.jsonl"}
