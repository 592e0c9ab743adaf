"""A plan written to a temporary file, and the check every located plan-rule case makes."""

from __future__ import annotations

import pathlib
import textwrap

import pytest

from budgetdsl.plan.diagnostics import PlanError
from budgetdsl.plan.loader import load_plan


def write(tmp_path: pathlib.Path, text: str) -> pathlib.Path:
    path = tmp_path / "plan.yaml"
    path.write_text(textwrap.dedent(text))
    return path


def assert_refused_located(tmp_path: pathlib.Path, capsys, model: str, hardware: str, message: str, hint: str) -> None:
    """The loader refuses the plan with `message` and `hint`; `budgetdsl plan` exits 2 without a traceback."""
    from budgetdsl.cli import main

    path = write(tmp_path, f"name: bad\n{model}\n{hardware}\ntarget: {{min_tokens: 140B}}\nnoise: {{b_crit: 2M}}\n")
    with pytest.raises(PlanError) as info:
        load_plan(path)
    text = "\n".join(d.format() for d in info.value.diagnostics)
    assert message in text and hint in text, text
    assert main(["plan", str(path)]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and message.split("error")[-1] in err
