"""A calibration file is as untrusted as a plan (issue 23 defect 3): every number the planner reads
from it passes the plan's number gate — finite, inside the physical ranges of budgetdsl.plan.model —
as a located exit-2 error at the file's key, never a crash, an overflow or a nonsense plan; and a
partial (interrupted) calibration is read with a located warning, not silently."""

import json
import pathlib
import re

import pytest

from budgetdsl.cli import main

FIXTURE = pathlib.Path(__file__).resolve().parents[1] / "fixtures/calibration/gpt-micro-stdlib.json"


def _plan(tmp_path, edit):
    data = json.loads(FIXTURE.read_text())
    edit(data)
    # json.dumps writes float('nan') as NaN and float('inf') as Infinity, as a hand edit would
    (tmp_path / "cal.json").write_text(json.dumps(data, indent=1))
    plan = tmp_path / "p.yaml"
    plan.write_text("name: proxy\nmodel: {params: 25M, layers: 6, d_model: 512, heads: 8, seq_len: 64}\n"
                    "hardware: {gpu: H100-SXM5-80GB, gpus: 8}\ntarget: {min_tokens: 2B}\n"
                    "noise: {calibration: cal.json, at_loss: 2.7}\n")
    return plan


def _set(section, key, value):
    def edit(data):
        data[section][key] = value
    return edit


@pytest.mark.parametrize("section, key, value", [
    ("fit", "alpha", 0), ("fit", "alpha", -0.13), ("fit", "b_star_tokens", float("nan")),
    ("fit", "b_star_tokens", float("inf")), ("fit", "b_star_tokens", 1e308), ("fit", "b_star_tokens", -5.0),
    ("fit", "loss_min", float("-inf")), ("hardware", "tokens_per_s", -0.1), ("hardware", "step_time_s", 0),
])
@pytest.mark.parametrize("command", ["plan", "check"])
def test_an_out_of_range_number_is_a_located_error_at_its_key(tmp_path, capsys, section, key, value, command):
    plan = _plan(tmp_path, _set(section, key, value))
    argv = ["plan", str(plan)] if command == "plan" else ["check", "--solve", str(plan)]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "internal error" not in err
    where = re.search(r"cal\.json:(\d+):(\d+): " + re.escape(f"{section}.{key}"), err)
    assert where, err
    line = (tmp_path / "cal.json").read_text().splitlines()[int(where[1]) - 1]
    assert line.strip().startswith(f'"{key}"')  # the position of the key in the file


@pytest.mark.parametrize("alpha, at_loss", [(1e-300, 2.7), (1e-300, 0.5), (1e-3, 0.5)])
def test_a_tiny_alpha_is_no_overflow_but_a_located_error(tmp_path, capsys, alpha, at_loss):
    """B*/L^(1/α) overflows for a small α: it is read in log space, and a B_crit beyond the largest
    batch a plan may hold (or below one sequence) is an input error."""
    plan = _plan(tmp_path, _set("fit", "alpha", alpha))
    plan.write_text(plan.read_text().replace("at_loss: 2.7", f"at_loss: {at_loss}, extrapolate: true"))
    assert main(["plan", str(plan)]) == 2
    err = capsys.readouterr().err
    assert "internal error" not in err and "p.yaml:" in err, err


def test_an_interrupted_calibration_is_read_with_a_located_warning(tmp_path, capsys):
    def edit(data):
        data["interrupted"], data["stop_reason"] = True, "interrupted by the user at step 120"
    plan = _plan(tmp_path, edit)
    assert main(["plan", str(plan)]) == 0
    err = capsys.readouterr().err
    assert re.search(r"p\.yaml:5:\d+: warning\[calibration-interrupted\]: .*partial file", err), err
    assert "step 120" in err and "--resume" in err


def test_the_committed_calibrations_pass_the_gate(capsys):
    from budgetdsl.plan.calibration_file import load_calibration, number_problems

    for path in FIXTURE.parent.glob("*.json"):
        assert number_problems(load_calibration(path)) == []
