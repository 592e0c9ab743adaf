"""The `--model/--data` example of docs/calibration.md (moved there from the README) is real code:
run it as a user would."""

import re
from pathlib import Path

import pytest

pytest.importorskip("torch")

from budgetdsl.plan.calibration_file import load_calibration  # noqa: E402

PAGE = Path(__file__).resolve().parents[2] / "docs" / "calibration.md"


def _calibrate_section() -> str:
    """The page up to the frontier sweep: the `calibrate` command's own documentation."""
    text = PAGE.read_text()
    return text[:text.index("## Measure the frontier directly")]


def test_docs_factory_example_runs(tmp_path, monkeypatch, cli):
    section = _calibrate_section()
    code = re.search(r"```python\n(# my_proxy\.py.*?)```", section, re.S).group(1)
    (tmp_path / "my_proxy.py").write_text(code)
    (tmp_path / "input.txt").write_text("It was the best of times, it was the worst of times. " * 200)
    monkeypatch.chdir(tmp_path)
    command = re.search(r"budgetdsl calibrate (--model my_proxy\.py:make_model [^\n]*)", section).group(1)
    argv = ["calibrate", *command.split(), "--steps", "3", "--quiet", "--out", "mine.json"]
    assert cli(argv) == 0
    cal = load_calibration(tmp_path / "mine.json")
    assert cal.provenance.model.kind == "factory" and cal.provenance.batch.tokens_per_example == 64


@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="this machine has CUDA")
def test_device_cuda_without_cuda_is_a_usage_error(cli, tmp_path, capsys):
    assert cli(["calibrate", "--quick", "--device", "cuda", "--out", str(tmp_path / "x.json")]) == 2
    assert "torch sees no CUDA device" in capsys.readouterr().err
