"""`budgetdsl calibrate` on a terminal: a first line at once (before the seconds torch takes to
import), the progress bar on stderr, the result alone on stdout (`> log` keeps only the result)."""

import os
import pty
import subprocess
import sys
import threading

import pytest

pytest.importorskip("torch")

LOADING = "budgetdsl calibrate: loading torch..."


@pytest.mark.parametrize("command", [["calibrate"], ["calibrate", "sweep"]])
def test_the_first_line_comes_before_torch_is_imported(monkeypatch, cli, tmp_path, capsys, command):
    monkeypatch.setitem(sys.modules, "torch", None)  # importing torch fails: the line came first
    assert cli([*command, "--quick", "--out", str(tmp_path / "x.json")]) == 2
    out, err = capsys.readouterr()
    first, second = err.splitlines()
    assert out == ""
    assert first == f"budgetdsl {' '.join(command)}: loading torch..."
    assert second.endswith("needs PyTorch; install the 'calibrate' extra: pip install '.[calibrate]' in the "
                           "clone of budgetdsl (README, 'Install from the repository'; not on PyPI)")


def test_no_first_line_under_quiet_or_on_other_ranks(monkeypatch, cli, tmp_path, capsys):
    monkeypatch.setitem(sys.modules, "torch", None)
    cli(["calibrate", "--quick", "--quiet", "--out", str(tmp_path / "x.json")])
    assert LOADING not in capsys.readouterr().err
    monkeypatch.setenv("RANK", "1")  # a torchrun replica: rank 0 speaks for all
    cli(["calibrate", "--quick", "--out", str(tmp_path / "x.json")])
    assert LOADING not in capsys.readouterr().err


@pytest.mark.slow
def test_progress_bar_on_stderr_result_on_stdout(tmp_path):
    """stderr is a terminal (a pty), stdout a pipe, as in `budgetdsl calibrate > log`."""
    out = tmp_path / "cal.json"
    master, slave = pty.openpty()
    env = {**os.environ, "TERM": "xterm-256color", "COLUMNS": "120"}
    proc = subprocess.Popen([sys.executable, "-m", "budgetdsl", "calibrate", "--quick", "--steps", "2",
                             "--out", str(out)], stdout=subprocess.PIPE, stderr=slave, env=env, cwd=tmp_path)
    os.close(slave)
    chunks: list[bytes] = []

    def drain():  # keep the pty from filling up while the child writes
        while True:
            try:
                data = os.read(master, 4096)
            except OSError:  # EIO: the child closed its end
                return
            if not data:
                return
            chunks.append(data)

    reader = threading.Thread(target=drain)
    reader.start()
    stdout, _ = proc.communicate(timeout=300)
    reader.join(timeout=30)
    os.close(master)
    err = b"".join(chunks).decode("utf-8", errors="replace")
    stdout = stdout.decode()

    assert proc.returncode == 0, err
    assert err.splitlines()[0].rstrip("\r") == LOADING
    assert "calibrating" in err and "2/2" in err  # the bar, drawn on the terminal
    assert "B_simple =" in stdout and f"wrote {out}" in stdout  # the result
    assert "calibrating" not in stdout and "\x1b[" not in stdout and "\r" not in stdout
    assert LOADING not in stdout
