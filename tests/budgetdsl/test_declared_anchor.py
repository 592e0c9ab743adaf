"""A declared MFU anchors the modelled step instead of replacing it (issue 24 item 7,
docs/cost-model.md "Step time: two modes"): where the MFU was the whole step, T(B) = f·B/(G·P·u)
at every batch, and on a fixed GPU count the smallest batch won by construction."""

import pytest
from solver_plans import make_plan

from budgetdsl.cost.cost_model import build_cost_model
from budgetdsl.report.text import render
from budgetdsl.solve.solver import solve

# issue 24's case: 1.3B on 64 H100 at a declared 40 % MFU, a FLOP cap, no deadline
CAPPED = dict(model={"params": 1.3e9, "layers": 24, "d_model": 2048, "heads": 16, "seq_len": 2048},
              hardware={"gpu": "H100-SXM5-80GB", "gpus": 64, "mfu": 0.4, "zero": None, "overlap": None,
                        "network": None},
              budget={"deadline": None, "flops": 2.75e20, "gpu_hours": None},
              target={"tokens": 2.6e10, "at_batch": 1e6}, noise={"b_crit": 1e6})


def test_a_fixed_count_no_longer_takes_the_smallest_batch_by_construction():
    plan = make_plan(**CAPPED)
    sol = solve(plan)
    smallest = 64 * 2048  # one sequence per replica
    assert sol.batch.tokens > smallest
    # the physics that says why: per token, one micro-batch per step is slower than what was chosen
    cm = build_cost_model(plan, 64)
    per_token_small = cm.step_time(smallest, 1) / smallest
    per_token_chosen = sol.throughput.step_time_s / sol.batch.tokens
    assert per_token_small > per_token_chosen * 1.05
    text = render(sol, "text")
    assert "no longer buys time on 64 GPUs" in text and "holds at TP 1 · PP 1 on 64 GPUs" in text


def test_the_launched_mfu_is_the_declared_one_only_where_it_was_measured():
    """A pinned run at the reference reports the declared MFU; the same cost model at one sequence
    per replica (one micro-batch per step) gives what the anchored model gives there."""
    pinned = make_plan(**CAPPED, run={"batch": 64 * 2048 * 8, "micro_batch": 8})
    assert abs(solve(pinned).throughput.mfu - 0.4) < 1e-9
    cm = build_cost_model(pinned, 64)
    assert cm.breakdown(64 * 2048 * 8, 1).mfu == pytest.approx(0.4, rel=1e-12)
    assert cm.breakdown(64 * 2048, 1).mfu < 0.4 - 0.01
