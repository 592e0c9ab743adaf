"""solve() is a pure function of the plan (issue 13 item 5): the noise source — a calibration file —
is read when the plan is loaded (`noise_source.resolve_noise`), and solving reads no file."""

from __future__ import annotations

import builtins
import io
import os
import pathlib
import shutil

import pytest

from budgetdsl.plan.diagnostics import PlanError
from budgetdsl.plan.loader import load_plan
from budgetdsl.solve.solver import solve

REPO = pathlib.Path(__file__).resolve().parents[2]
CALIBRATED = REPO / "plans" / "ramp-gpt-micro-proxy.yaml"  # noise.calibration (sweep) and a ramp


def _copy(tmp_path: pathlib.Path, monkeypatch) -> tuple[pathlib.Path, pathlib.Path]:
    """The calibrated plan and its calibration in a folder of their own (its repository root)."""
    monkeypatch.setenv("BUDGETDSL_ROOT", str(tmp_path))
    (tmp_path / "plans").mkdir()
    cal_dir = tmp_path / "tests" / "fixtures" / "calibration"
    cal_dir.mkdir(parents=True)
    cal = cal_dir / "sweep-gpt-micro-stdlib.json"
    shutil.copy(REPO / "tests" / "fixtures" / "calibration" / cal.name, cal)
    plan = tmp_path / "plans" / CALIBRATED.name
    shutil.copy(CALIBRATED, plan)
    return plan, cal


def test_a_calibration_deleted_after_load_still_solves(tmp_path, monkeypatch):
    plan_path, cal = _copy(tmp_path, monkeypatch)
    monkeypatch.chdir(tmp_path)
    plan = load_plan(plan_path)
    before = solve(plan)
    assert before.ramp is not None and "calibration" in before.frontier.b_crit_source
    cal.unlink()
    assert solve(plan) == before  # the trajectory and B_crit were read at load time
    with pytest.raises(PlanError) as info:  # a plan loaded now cannot find it: it was really read
        solve(load_plan(plan_path))
    assert "calibration-missing" in info.value.diagnostics[0].format()


def test_solve_opens_no_file(monkeypatch):
    plan = load_plan(CALIBRATED)
    expected = solve(plan)

    def refuse(*args, **kwargs):
        raise AssertionError(f"solve() opened a file: {args[:1]}")

    for where, name in ((builtins, "open"), (io, "open"), (os, "open"), (os, "stat"),
                        (pathlib.Path, "read_bytes"), (pathlib.Path, "read_text"), (pathlib.Path, "stat")):
        monkeypatch.setattr(where, name, refuse)
    assert solve(plan) == expected


def test_a_changed_noise_section_is_resolved_again():
    """A plan copied with another noise section does not reuse the load-time estimate."""
    plan = load_plan(REPO / "plans" / "minimal.yaml")
    declared = plan.noise.b_crit
    other = plan.model_copy(update={"noise": plan.noise.model_copy(update={"b_crit": declared * 2})})
    assert solve(other).frontier.b_crit_tokens == pytest.approx(declared * 2)
    assert solve(plan).frontier.b_crit_tokens == pytest.approx(declared)
