"""A plan that declares its MFU and gives no layer shape (model.activation_bytes_per_token instead of
layers and d_model): the throughput the report shows is the declared one, by the definition of
MFU (Chowdhery et al. 2022, PaLM, appendix B): model FLOP/s per GPU = MFU × the GPU's peak. And the
error for an answer that overflows names the part of the answer it sits in."""

from __future__ import annotations

import pytest

from budgetdsl.solve.solver import solve
from tests.budgetdsl.solver_plans import make_plan

A100_PEAK = 312e12  # A100 SXM4 dense BF16 FLOP/s (NVIDIA A100 datasheet)


@pytest.mark.parametrize("mfu", [0.42, 0.3])
def test_a_shapeless_declared_plan_runs_at_its_declared_mfu(mfu):
    plan = make_plan(model={"layers": None, "d_model": None, "heads": None, "activation_bytes_per_token": 1e6},
                     hardware={"mfu": mfu})
    sol = solve(plan)
    assert sol.feasible
    t = sol.throughput
    assert t.source == "declared" and t.mfu == mfu and t.hfu is None
    assert t.model_tflops_per_gpu * 1e12 == pytest.approx(mfu * A100_PEAK, rel=1e-9)
    assert t.breakdown == {"compute": t.step_time_s}


@pytest.mark.parametrize("title, field", [
    ("FrontierPoint", "frontier"), ("RampStage", "ramp.stages"), ("LayoutOption", "layout.chosen"),
    ("Solution", None), ("NoSuchPart", None)])
def test_a_non_finite_answer_names_the_part_of_the_solution_it_sits_in(title, field):
    """The not-finite error (issue 14) names where in the answer the number sits: the field of
    Solution that holds the part (pydantic's title of the model that refused it)."""
    from budgetdsl.solve.solver import _part_field

    assert _part_field(title) == field


@pytest.mark.parametrize("objective", ["balanced", "min_time"])
def test_an_answer_that_overflows_is_refused_naming_the_field(objective, monkeypatch):
    """Should a number of the answer overflow despite the plan's bounds (here x = B/B_crit made
    infinite), solve() refuses the plan with a located not-finite error that names the field
    (frontier.x), never an internal error or an Infinity in the output."""
    import math

    from budgetdsl.plan.diagnostics import PlanError
    from budgetdsl.theory import frontier

    plan = make_plan(objective=objective)
    monkeypatch.setattr(frontier.Frontier, "x", lambda self, batch: math.inf)
    with pytest.raises(PlanError) as info:
        solve(plan)
    (d,) = info.value.diagnostics
    assert d.code == "not-finite" and "the answer's frontier.x is not finite" in d.message, d.format()


def test_a_declared_mfu_is_anchored_at_the_unsplit_layout_when_the_layout_is_searched():
    """The declared MFU was measured on some layout; where the plan leaves tensor and pipeline
    parallelism to the search it holds at the unsplit one (TP 1 · PP 1: `declared_anchor`), and
    the report says where."""
    from solver_plans import make_plan, searched

    from budgetdsl.cost.cost_model import Split, build_cost_model

    plan = searched(make_plan())
    cm = build_cost_model(plan, 1024, Split(1, 1, 1, "full", True))
    assert cm.anchor is not None and cm.anchor.where.startswith("TP 1 · PP 1 on 1,024 GPUs")
