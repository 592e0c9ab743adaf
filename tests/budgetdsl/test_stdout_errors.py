"""Results that cannot be written: a full disk under stdout is the user's to act on (exit 2, one
line), never an internal error; a reader that leaves before the whole answer is read is exit 141,
also when Python writes stdout unbuffered (PYTHONUNBUFFERED=1), where a write the pipe takes only
in part used to be dropped and the command exited 0."""

import errno
import fcntl
import io
import os
import pathlib
import subprocess
import sys
import termios
import time

import pytest

from budgetdsl.cli import main
from budgetdsl.io.exit_codes import ExitCode

REPO = pathlib.Path(__file__).resolve().parents[2]
PLAN = str(REPO / "plans/minimal.yaml")
FULL_LINE = "budgetdsl: error[io]: cannot write the results to stdout: No space left on device\n"

COMMANDS = {
    "plan": ["plan", PLAN],
    "plan-json": ["plan", PLAN, "--format", "json"],
    "export": ["export", PLAN, "--to", "slurm"],
    "sweep-json": ["sweep", PLAN, "--set", "hardware.gpus=8,16", "--format", "json"],
    "schema": ["schema"],
    "check-json": ["check", PLAN, "--format", "json"],
    "version": ["--version"],
}


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
@pytest.mark.parametrize("unbuffered", ["", "1"], ids=["buffered", "unbuffered"])
@pytest.mark.parametrize("argv", COMMANDS.values(), ids=COMMANDS.keys())
def test_a_full_disk_on_stdout_is_one_line_and_exit_2(argv, unbuffered, tmp_path):
    env = {**os.environ, "BUDGETDSL_TRACEBACK_DIR": str(tmp_path), "PYTHONUNBUFFERED": unbuffered}
    with open("/dev/full", "w") as full:
        result = subprocess.run([sys.executable, "-m", "budgetdsl", *argv], stdout=full,
                                stderr=subprocess.PIPE, text=True, env=env, cwd=tmp_path)
    assert result.returncode == ExitCode.INVALID, result.stderr
    assert result.stderr.endswith(FULL_LINE)  # after the notes export prints, as ever
    assert "Traceback" not in result.stderr and "Exception ignored" not in result.stderr
    assert list(tmp_path.iterdir()) == []  # no traceback file: it is not a bug


class FillsUp(io.StringIO):
    """A stdout on a disk with room for `room` characters."""

    def __init__(self, room: int):
        super().__init__()
        self.room = room

    def write(self, text: str) -> int:
        if self.tell() + len(text) > self.room:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return super().write(text)


def test_a_json_sweep_that_fills_the_disk_midway_is_exit_2(monkeypatch, capsys):
    stream = FillsUp(room=15000)
    monkeypatch.setattr(sys, "stdout", stream)
    code = main(["sweep", PLAN, "--set", "hardware.gpus=8,16,32,64", "--format", "json"])
    assert code == ExitCode.INVALID
    assert 0 < len(stream.getvalue()) <= 15000  # the rows before the disk filled were written
    assert capsys.readouterr().err == FULL_LINE


def _pipe_holds(fd: int) -> int:
    buf = bytearray(4)
    fcntl.ioctl(fd, termios.FIONREAD, buf)
    return int.from_bytes(buf, sys.byteorder)


@pytest.mark.parametrize("unbuffered", ["", "1"], ids=["buffered", "unbuffered"])
def test_a_reader_leaving_midway_through_a_large_answer_is_exit_141(unbuffered):
    """`budgetdsl plan plans/*.yaml --format json | head -c 10`: an 80 KB answer, larger than the
    pipe (64 KiB). The reader leaves once the pipe is full, so the write is cut short."""
    plans = sorted(str(p) for p in (REPO / "plans").glob("*.yaml"))
    env = {**os.environ, "PYTHONUNBUFFERED": unbuffered}
    proc = subprocess.Popen([sys.executable, "-m", "budgetdsl", "plan", *plans, "--format", "json"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    fd = proc.stdout.fileno()
    capacity = fcntl.fcntl(fd, 1032)  # F_GETPIPE_SZ
    while _pipe_holds(fd) < capacity and proc.poll() is None:
        time.sleep(0.05)
    assert proc.poll() is None, "the answer fit in the pipe: the test needs a larger one"
    assert os.read(fd, 10) == b'[\n  {\n    '
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=60) == ExitCode.BROKEN_PIPE, err
    assert err == ""
