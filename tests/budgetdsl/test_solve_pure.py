"""solve() is a pure function of the plan (issue 13 item 5): the noise source — a calibration file —
is read when the plan is loaded (`noise_source.resolve_noise`), and solving reads no file."""

from __future__ import annotations

import builtins
import io
import os
import pathlib
import shutil

import pytest
from solver_plans import searched

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


def test_no_plan_solved_opens_a_file(monkeypatch):
    """Every example plan, with its layout searched too, solved in one cache: no file is opened,
    stat'ed or listed while solving (what loading resolved is all solve() reads)."""
    from budgetdsl.solve.cache import SolveCache

    plans = []
    for path in sorted((REPO / "plans").glob("*.yaml")):
        plan = load_plan(path)
        plans += [plan, searched(plan)]
    expected = [solve(p).model_dump_json() for p in plans]

    def refuse(*args, **kwargs):
        raise AssertionError(f"solve() touched a file: {args[:1]}")

    for where, name in ((builtins, "open"), (io, "open"), (os, "open"), (os, "stat"), (os, "lstat"),
                        (os, "listdir"), (os, "scandir"), (pathlib.Path, "open"), (pathlib.Path, "read_bytes"),
                        (pathlib.Path, "read_text"), (pathlib.Path, "stat"), (pathlib.Path, "exists"),
                        (pathlib.Path, "is_file")):
        monkeypatch.setattr(where, name, refuse)
    cache = SolveCache()
    assert [solve(p, cache).model_dump_json() for p in plans] == expected


def test_a_calibrated_plan_changed_after_loading_is_refused_not_read():
    """The calibration is read by the loader only: a copy of a calibrated plan with another noise
    section (or a plan built in memory) is refused by solve(), which reads no file."""
    from budgetdsl.plan.model import Plan

    plan = load_plan(CALIBRATED)
    moved = plan.model_copy(update={"noise": plan.noise.model_copy(update={"at_loss": plan.noise.at_loss * 1.01})})
    with pytest.raises(ValueError, match="read when the plan is loaded"):
        solve(moved)
    bare = Plan.model_validate_json(plan.model_dump_json())  # no loader: nothing was read
    with pytest.raises(ValueError, match="read when the plan is loaded"):
        solve(bare)


def test_what_loading_resolved_is_declared_not_attached():
    """The loader's plan carries its source and its noise as declared fields set when it is built
    (no private attributes on the frozen Plan), left out of every dump and of the schema."""
    from budgetdsl.plan.loader import LoadedPlan
    from budgetdsl.plan.model import Plan

    assert not Plan.__private_attributes__ and not LoadedPlan.__private_attributes__
    plan = load_plan(CALIBRATED)
    assert isinstance(plan, LoadedPlan) and plan.source.files and plan.resolved_noise.estimate is not None
    assert "source" not in plan.model_dump() and "resolved_noise" not in plan.model_dump_json()
    assert "source" not in Plan.model_json_schema()["properties"]
    copy = plan.model_copy(update={"budget": plan.budget.model_copy(update={"deadline": 86400.0})})
    assert copy.source is plan.source and copy.resolved_noise is plan.resolved_noise
    hash(plan)
