"""Boundaries a one-character slip moves (the mutation benchmark, bench/bench_mutation.py): each test
pins the side of a limit a user relies on, with the expected answer from the limit's definition."""

from __future__ import annotations

import pathlib

import pytest

from budgetdsl.cost.cost_model import Split, build_cost_model
from budgetdsl.plan.diagnostics import PlanError
from budgetdsl.plan.loader import load_plan
from budgetdsl.solve.solver import solve
from tests.budgetdsl.solver_plans import make_plan

REPO = pathlib.Path(__file__).resolve().parents[2]

# 1.5B model on 16 L40S (48 GB), no sharding: memory caps the micro-batch at a few sequences
MODEL = {"params": 1.53e9, "layers": 16, "d_model": 2560, "heads": 16, "seq_len": 2048}
HARDWARE = {"gpu": "L40S", "gpus": 16, "mfu": None, "zero": 0, "recompute": "none", "tensor_parallel": 1,
            "pipeline_parallel": 1}
NO_LIMITS = {"deadline": None, "flops": None, "gpu_hours": None}


def test_a_pinned_micro_batch_at_the_memory_cap_launches_and_one_more_does_not():
    plan = make_plan(model=MODEL, hardware=HARDWARE, budget=NO_LIMITS)
    hw = plan.hardware
    cap = build_cost_model(plan, hw.gpus, Split(hw.zero, 1, 1, str(hw.recompute), hw.flash_attention)).micro_batch_max
    assert cap >= 2
    at_cap = solve(make_plan(model=MODEL, hardware=HARDWARE, budget=NO_LIMITS, run={"micro_batch": cap}))
    assert at_cap.feasible and at_cap.batch.micro_batch == cap
    over = solve(make_plan(model=MODEL, hardware=HARDWARE, budget=NO_LIMITS, run={"micro_batch": cap + 1}))
    assert not over.feasible and any(c.startswith("memory") for c in over.conflicts)


def test_a_micro_batch_that_divides_no_replica_share_is_located_and_lists_the_shares(tmp_path):
    """minimal.yaml searches its layout on 64 GPUs: a batch of 32 sequences splits over 1–32
    data-parallel replicas into 32, 16, …, 1 sequences each, none a multiple of 3; the whole
    numbers a micro-batch of at most 3 divides some share by are 2 and 1."""
    plan = tmp_path / "plan.yaml"
    text = (REPO / "plans" / "minimal.yaml").read_text() + "run:\n  batch: 64Ki\n  micro_batch: 3\n"
    plan.write_text(text)
    with pytest.raises(PlanError) as exc:
        solve(load_plan(str(plan)))
    (d,) = exc.value.diagnostics
    assert d.code == "run-batch" and (d.location.line, d.location.col) == (len(text.splitlines()), 16)
    assert "run.batch of 32 sequences gives 1, 2, 4, 8, 16, 32 per data-parallel replica" in d.message
    assert "(e.g. 2 or 1)" in str(d)


@pytest.mark.parametrize("gpus", [8, 16])
def test_the_layout_report_counts_the_feasible_layouts_as_solving_each_pinned_does(gpus):
    """7B on 32 GB V100s, only ZeRO searched: the report's count of feasible layouts is the number
    of ZeRO stages whose own (pinned) plan is feasible."""
    def plan(zero):
        return make_plan(model={"params": 6.74e9, "layers": 32, "d_model": 4096, "heads": 32, "seq_len": 2048},
                         hardware={"gpu": "V100-SXM2-32GB", "gpus": gpus, "mfu": None, "zero": zero,
                                   "tensor_parallel": 1, "pipeline_parallel": 1, "recompute": "full"},
                         budget=NO_LIMITS, target={"tokens": 1e10})

    pinned = sum(solve(plan(z)).feasible for z in range(4))
    searched = solve(plan("auto")).layout
    assert searched is not None and 0 < pinned < 4
    assert searched.feasible == pinned and f"of the {pinned} feasible layouts" in searched.reason


@pytest.mark.parametrize("growth, flat", [(1.0001, True), (1.0, True), (1.01, False)])
def test_a_ramp_over_a_b_noise_that_grows_at_most_a_ten_thousandth_splits_progress_evenly(growth, flat):
    """batch_ramp.auto_boundaries: B_noise that grows by no more than 0.01 % over the run counts as
    flat, and K stages then take equal shares of progress; any more growth places them where the
    running maximum crosses geometric levels (here all past 90 % of the run, where B_noise grows)."""
    from budgetdsl.solve.batch_ramp import NoiseTrajectory, auto_boundaries

    traj = NoiseTrajectory((0.0, 0.9, 1.0), (1e5, 1e5, 1e5 * growth))
    bounds = auto_boundaries(traj, 4)
    assert (bounds == [0.0, 0.25, 0.5, 0.75, 1.0]) == flat
