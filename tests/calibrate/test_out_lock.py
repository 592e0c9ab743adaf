"""One writer per calibration file: a second calibration on the same --out stops at its start
(exit 2, naming the first run's pid) instead of silently replacing the first one's file."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
from budgetdsl.calibrate.out_lock import OutLocked, lock_path, out_lock

REPO = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": str(REPO)}

# Takes the lock, says so, holds it until its stdin closes; or, with "try", reports what it got.
_TAKER = """
import sys
from budgetdsl.calibrate.out_lock import OutLocked, out_lock
try:
    with out_lock(sys.argv[1]):
        print("held", flush=True)
        if sys.argv[2] == "hold":
            sys.stdin.read()
except OutLocked as exc:
    print("refused:", exc, flush=True)
"""


def _taker(out: Path, mode: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", _TAKER, str(out), mode], env=ENV, text=True,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def test_two_processes_cannot_hold_the_same_out_and_no_lock_file_is_left(tmp_path):
    out = tmp_path / "cal.json"
    first = _taker(out, "hold")
    try:
        assert first.stdout.readline().strip() == "held", first.stderr.read()
        second, _ = _taker(out, "try").communicate(timeout=60)
        assert second.startswith("refused:") and f"(pid {first.pid})" in second, second
        assert str(out) in second
    finally:
        first.communicate(timeout=60)  # closes its stdin: it releases the lock and exits
    assert first.returncode == 0
    assert not lock_path(out).exists()  # released and removed at exit
    third, _ = _taker(out, "try").communicate(timeout=60)
    assert third.strip() == "held"  # a later run is not blocked


def test_a_lock_file_left_by_a_killed_run_does_not_block(tmp_path):
    out = tmp_path / "cal.json"
    lock_path(out).write_text("999999\n")  # as SIGKILL leaves it: the file, but no lock held
    with out_lock(out) as path:
        assert path.read_text() == f"{os.getpid()}\n"
    assert not path.exists()


def test_the_lock_is_per_file_and_shared_by_spellings(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with out_lock(Path("a.json")):
        with out_lock(tmp_path / "b.json"):  # another file: no conflict
            pass
        with pytest.raises(OutLocked, match=r"--out \./a\.json|--out a\.json"):
            with out_lock(Path("./a.json")):
                pass


@pytest.mark.parametrize("argv", [["calibrate", "--quick"], ["calibrate", "sweep"]])
def test_second_calibration_on_the_same_out_fails_fast(tmp_path, argv):
    pytest.importorskip("torch")
    out = tmp_path / "cal.json"
    with out_lock(out):  # a first calibration, as far as the CLI can tell
        proc = subprocess.run([sys.executable, "-m", "budgetdsl", *argv, "--out", str(out)],
                              cwd=tmp_path, env=ENV, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2, proc.stderr
    assert "being written by another calibration" in proc.stderr
    assert f"(pid {os.getpid()})" in proc.stderr
    assert not out.exists() and not (tmp_path / "cal.json.ckpt.pt").exists()
