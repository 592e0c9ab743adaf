"""Answers a user reads off a solution, checked against their definition (the mutation benchmark,
bench/bench_mutation.py, found each unchecked): a one-character slip in the solver changed them
and every other test passed."""

from __future__ import annotations

import pytest

from budgetdsl.cost.cost_model import build_cost_model
from budgetdsl.solve.solver import solve
from tests.budgetdsl.solver_plans import DAY, make_plan

# 1.3B model on 8 A100-40GB, ZeRO-1, no recomputation: memory caps the micro-batch at a few sequences
MODEL = {"params": 1.3e9, "layers": 24, "d_model": 2048, "heads": 16, "seq_len": 4096}
HARDWARE = {"gpu": "A100-SXM4-40GB", "gpus": 8, "mfu": None, "overlap": None, "zero": 1, "tensor_parallel": 1,
            "pipeline_parallel": 1, "recompute": "none"}


@pytest.mark.parametrize("per_replica", [1, 2, 3, 4])
def test_memory_binds_exactly_when_it_forces_accumulation(per_replica):
    """The memory limit is reported binding when it decided the launch: the micro-batch is fewer
    sequences than each replica's share and one sequence more would not fit, so accumulation
    makes up the batch (two accumulations as much as ten). Pinned batches of 1–4 memory caps of
    sequences per replica."""
    def plan(**over):
        return make_plan(model=MODEL, hardware=HARDWARE, target={"tokens": 2e10, "at_batch": 1e6},
                         budget={"deadline": 300 * DAY, "flops": None, "gpu_hours": None}, noise={"b_crit": 2e6},
                         **over)
    cm = build_cost_model(plan(), HARDWARE["gpus"])
    cap = cm.micro_batch_max
    assert cap >= 2
    sequences = per_replica * cap * HARDWARE["gpus"]
    got = solve(plan(run={"batch": float(sequences * MODEL["seq_len"])}))
    assert got.feasible and got.batch.sequences == sequences
    b = got.batch
    share = sequences // b.data_parallel
    forced = b.micro_batch < share and cm.memory_at(b.micro_batch + 1) > cm.memory_per_device
    assert forced == (per_replica > 1)
    memory = got.constraint("memory")
    assert memory is not None and memory.binding == forced, memory


def test_a_target_exactly_at_the_flop_budgets_edge_is_reported_feasible_and_a_hair_past_it_clipped():
    """balanced aims at B = B_crit; a FLOP budget of exactly f·E(B_crit) = 2·f·E_min allows batches
    up to B_crit itself (the interval is closed), so the note calls the target feasible; a budget
    one float below moves the edge under B_crit and the note says the target was clipped."""
    import math

    from budgetdsl.theory import closed_forms_generated as cf

    over = dict(model={"params": 1.3e9, "layers": 24, "d_model": 2048, "heads": 16, "seq_len": 2048},
                hardware={**HARDWARE, "gpu": "H100-SXM5-80GB", "gpus": 64}, noise={"b_crit": 1e6},
                target={"tokens": 2.6e10, "at_batch": 1048576.0}, objective="balanced")
    free = make_plan(**over, budget={"deadline": None, "flops": None, "gpu_hours": None})
    fr = solve(free).frontier
    bc, e_min, f = fr.b_crit_tokens, fr.e_min_tokens, build_cost_model(free, 64).flops_per_token
    budget = 2.0 * e_min * f  # the budget whose edge is B_crit, to the last bit of the solver's formula
    for _ in range(64):
        edge = cf.flops_upper_bound(bc, e_min, f, budget)
        if edge == bc:
            break
        budget = math.nextafter(budget, math.inf if edge < bc else -math.inf)
    assert cf.flops_upper_bound(bc, e_min, f, budget) == bc
    at = solve(make_plan(**over, budget={"deadline": None, "flops": budget, "gpu_hours": None}))
    assert at.feasible and "is feasible" in at.notes[0], at.notes[0]
    below = solve(make_plan(**over, budget={"deadline": None, "flops": math.nextafter(budget, 0.0),
                                            "gpu_hours": None}))
    assert below.feasible and "lies outside the feasible" in below.notes[0], below.notes[0]


@pytest.mark.parametrize("plan_file", ["ramp-gpt-micro-proxy.yaml"])
def test_each_ramp_stage_ends_at_the_share_of_the_run_s_tokens_trained_by_then(plan_file):
    """A stage's `until` is where it ends as the plan language writes a batch schedule: the
    fraction of the run's tokens trained by then (the tokens of it and every stage before it over
    the run's), so the last is 100 % and a schedule pasted back into the plan trains the same."""
    import pathlib

    from budgetdsl.plan.loader import load_plan

    plan = load_plan(pathlib.Path(__file__).resolve().parents[2] / "plans" / plan_file)
    ramp = solve(plan).ramp
    assert ramp is not None and len(ramp.stages) >= 2
    total = sum(st.tokens for st in ramp.stages)
    assert total == pytest.approx(ramp.tokens, rel=1e-12)
    trained = 0.0
    for st in ramp.stages:
        trained += st.tokens
        assert st.until == pytest.approx(trained / total, rel=1e-12)
    assert ramp.stages[-1].until == pytest.approx(1.0, rel=1e-12)
