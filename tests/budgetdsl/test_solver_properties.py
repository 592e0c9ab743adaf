"""Property tests of `solve` over generated plans (hypothesis): what every answer must satisfy."""

import math

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from solver_plans import plans

from budgetdsl.cost.cost_model import build_cost_model
from budgetdsl.solve.placement import WALL_SIZES, evaluate, place, score
from budgetdsl.solve.solution import FEASIBLE, Solution
from budgetdsl.solve.solver import plan_limits, solve
from budgetdsl.theory.frontier import frontier_from_target

SETTINGS = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def check_limits(plan, sol):
    """A feasible answer respects every limit of its plan, exactly (no tolerance); also used by
    test_schema_fuzz on plans whose layout is searched."""
    assert sol.status in FEASIBLE and sol.feasible
    for c in sol.constraints:  # every constraint holds after snapping
        assert c.satisfied is True, c
        assert (c.value <= c.limit) if c.sense == "<=" else (c.value >= c.limit), c
    if plan.budget.flops is not None:
        assert sol.flops <= plan.budget.flops
    if plan.budget.deadline is not None:
        assert sol.wall_clock_s <= plan.budget.deadline


def _check_feasible_answer(plan, sol):
    check_limits(plan, sol)
    b = sol.batch
    hw = plan.hardware
    cm = build_cost_model(plan, sol.gpus)
    # the configuration is launchable and its numbers add up
    cp = hw.context_parallel if isinstance(hw.context_parallel, int) else (b.context_parallel or 1)
    assert b.data_parallel == sol.gpus // (hw.tensor_parallel * hw.pipeline_parallel * cp)
    assert b.sequences == b.micro_batch * b.grad_accum * b.data_parallel
    assert b.tokens == b.sequences * plan.model.seq_len
    assert 1 <= b.micro_batch <= cm.micro_batch_max
    assert sol.steps * b.tokens == sol.tokens  # steps × batch = tokens
    assert sol.flops == pytest.approx(cm.flops_per_token * sol.tokens, rel=1e-12)  # FLOPs = f × tokens
    assert sol.wall_clock_s == pytest.approx(sol.steps * cm.step_time(b.tokens, b.grad_accum), rel=1e-12)
    fr = frontier_from_target(plan.target, sol.frontier.b_crit_tokens)
    assert sol.tokens >= fr.examples(b.tokens) * (1 - 1e-12)  # integer steps reach E(B)
    assert (sol.steps - 1) * b.tokens < fr.examples(b.tokens)  # ... with the fewest steps that do
    f = sol.frontier
    assert (f.s_over_smin - 1) * (f.e_over_emin - 1) == pytest.approx(1.0, rel=1e-9)
    assert f.x == pytest.approx(b.tokens / f.b_crit_tokens, rel=1e-12)


@SETTINGS
@given(plans())
def test_every_feasible_answer_satisfies_every_constraint(plan):
    sol = solve(plan)
    assert Solution.model_validate_json(sol.model_dump_json()) == sol  # the result validates
    if sol.feasible:
        _check_feasible_answer(plan, sol)
    else:
        assert sol.conflicts, "an infeasible answer names its conflicts"
        assert sol.relaxations or sol.memory_remedies


def _measure(plan, sol):
    cfg_score = {"balanced": (sol.frontier.s_over_smin or 0) * (sol.frontier.e_over_emin or 0),
                 "min_time": sol.wall_clock_s, "min_flops": sol.flops,
                 "min_cost": sol.usd if sol.usd is not None else sol.gpu_hours}
    return cfg_score[str(plan.objective)]


@SETTINGS
@given(plans(), st.sampled_from(["deadline", "flops", "gpu_hours", "usd"]), st.floats(1.0, 10.0))
def test_more_budget_never_makes_the_objective_worse(plan, limit, factor):
    current = getattr(plan.budget, limit)
    assume(current is not None)
    before = solve(plan)
    looser = plan.model_copy(update={"budget": plan.budget.model_copy(update={limit: current * factor})})
    after = solve(looser)
    if before.feasible:
        assert after.feasible
        assert _measure(looser, after) <= _measure(plan, before) * (1 + 1e-9)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(plans(tight=True))
def test_relaxations_make_the_plan_feasible(plan):
    sol = solve(plan)
    assume(not sol.feasible)
    for r in sol.relaxations:
        if r.required is None:
            continue
        if r.name == "gpus":
            hw = plan.hardware.model_copy(update={"gpus": int(r.required)})
            relaxed = plan.model_copy(update={"hardware": hw})
        else:
            relaxed = plan.model_copy(update={"budget": plan.budget.model_copy(update={r.name: r.required})})
        assert solve(relaxed).feasible, r.message
    for m in sol.memory_remedies:
        assert m.fits == (m.micro_batch_max >= 1)


@settings(max_examples=120, deadline=None)
@given(plans(limits=True))
def test_snapping_agrees_with_a_brute_force_scan_of_integer_batches(plan):
    """On one GPU count: a feasible integer configuration exists iff the solver finds one, and the
    solver's choice scores within 0.1 % of the best of all integer batches (or within two steps'
    worth: the solver optimizes the continuous frontier, then rounds the steps up). Every split
    micro × accumulation of each batch that fits is scanned: with the modelled step (a declared
    MFU anchors it) the per-step and per-micro-batch costs depend on the split. The score is
    compared with the best split of micro-batches up to placement.WALL_SIZES, the sizes the solver's
    wall-clock search weighs (its documented bound): once every collective pays its latency, a
    ZeRO-3 step of a small model on thousands of GPUs is best at a micro-batch past it (the scan
    found optima at 116 and past 128), which the solver does not reach: a known limit, not checked here."""
    gpus = plan.hardware.gpus
    cm = build_cost_model(plan, gpus)
    assume(cm.micro_batch_max >= 1)
    fr = frontier_from_target(plan.target, plan.noise.b_crit)
    limits = plan_limits(plan)
    objective = str(plan.objective)
    per = cm.seq_len * cm.data_parallel
    pl = place(cm, fr, limits, objective)
    top = pl.hi if math.isfinite(pl.hi) else max(pl.lo, pl.target, fr.b_crit) * 4
    n_max = int(min(top / per, 3000) if pl.lo <= pl.hi else 3000) + 2
    best, any_feasible = None, False
    for n in range(1, n_max + 1):
        for micro in range(1, min(n, cm.micro_batch_max) + 1):
            if n % micro:
                continue
            cfg = evaluate(cm, fr, limits, micro, n // micro, cm.micro_batch_max)
            if cfg.feasible:
                any_feasible = True
                if micro <= WALL_SIZES:
                    s = score(objective, fr, cfg)
                    best = s if best is None else min(best, s)
    if not any_feasible:
        assume(n_max < 3000)  # the scan covered every batch the interval allows
        assert not pl.feasible
    else:
        assert pl.feasible
        if best is not None:
            assert score(objective, fr, pl.config) <= best * (1 + max(1e-3, 2 / pl.config.steps))


@settings(max_examples=100, deadline=None)
@given(plans())
def test_continuous_choice_agrees_with_a_brute_force_scan(plan):
    """The clipped closed-form choice is the best point of the feasible interval on a fine grid."""
    gpus = plan.hardware.gpus
    cm = build_cost_model(plan, gpus)
    fr = frontier_from_target(plan.target, plan.noise.b_crit)
    pl = place(cm, fr, plan_limits(plan), str(plan.objective))
    assume(pl.clipped is not None and math.isfinite(pl.hi) and pl.hi > pl.lo * 1.001 and pl.lo > 0)

    def measure(b):
        if plan.objective == "balanced":
            return fr.s_over_smin(b) * fr.e_over_emin(b)
        if plan.objective in ("min_time", "min_cost"):
            return fr.steps(b) * cm.step_time(b)
        return fr.examples(b)

    grid = [pl.lo * (pl.hi / pl.lo) ** (i / 4000) for i in range(4001)]
    j = min(range(len(grid)), key=lambda i: measure(grid[i]))
    assert measure(pl.clipped) <= measure(grid[j]) * (1 + 1e-12)
    assert grid[max(j - 1, 0)] * (1 - 1e-9) <= pl.clipped <= grid[min(j + 1, 4000)] * (1 + 1e-9)
