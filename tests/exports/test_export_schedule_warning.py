"""Formats that cannot hold a batch schedule say so, instead of dropping it silently."""

import pathlib

import pytest

from budgetdsl.cli import main

REPO = pathlib.Path(__file__).resolve().parents[2]
RAMP = str(REPO / "plans/ramp-gpt-micro-proxy.yaml")


@pytest.mark.parametrize("fmt", ["deepspeed", "hf"])
def test_json_formats_warn_that_the_schedule_is_not_in_the_file(fmt, capsys):
    assert main(["export", RAMP, "--to", fmt]) == 0
    err = capsys.readouterr().err
    [line] = [x for x in err.splitlines() if "warning[batch-schedule]" in x]
    assert "4-stage batch schedule" in line and "0:8 " in line and "export megatron" in line


@pytest.mark.parametrize("fmt", ["megatron", "slurm"])
def test_formats_that_carry_it_do_not_warn(fmt, capsys):
    assert main(["export", RAMP, "--to", fmt]) == 0
    assert "warning[batch-schedule]" not in capsys.readouterr().err


def test_a_plan_without_a_schedule_does_not_warn(capsys):
    assert main(["export", str(REPO / "plans/llama2-7b.yaml"), "--to", "deepspeed"]) == 0
    assert "warning[batch-schedule]" not in capsys.readouterr().err
