"""A brute-force oracle for the solver (issue 13): enumerate the whole search space — every layout
of the space, every GPU count the plan allows, every whole number of sequences per replica up to a
bound and every (micro-batch, accumulation) split of it — evaluating each configuration with the
cost model alone (`placement.evaluate`, one configuration at a time). Nothing here calls the
solver's search, its pruning or its candidate lists.

Asserted for each objective: the solver's answer is feasible, no enumerated feasible
configuration dominates it in (wall clock, cost, FLOPs), and its objective measure is the best of
the enumeration, within the snapping tolerance (the solver evaluates a few micro-batch splits of
each batch, the oracle all of them).
"""

from __future__ import annotations

import math

import pytest

from budgetdsl.cost_model import Split, build_cost_model
from budgetdsl.frontier import frontier_from_target
from budgetdsl.noise_source import noise_estimate
from budgetdsl.placement import Limits, evaluate
from budgetdsl.solver import solve
from solver_plans import DAY, make_plan

TOL = 0.02  # snapping: the oracle tries every micro-batch split, the solver a few per batch
N_MAX = 48  # sequences per replica enumerated (x up to several B_crit on these plans)


def _space(plan):
    """The layout space as issue 13 states it, written out here on its own."""
    hw, m = plan.hardware, plan.model
    tps = [1, 2, 4, 8] if hw.tensor_parallel == "auto" else [int(hw.tensor_parallel)]
    tps = [t for t in tps if t <= hw.gpus_per_node and (m.heads is None or m.heads % t == 0)]
    pps = [1, 2, 4, 8, 16, 32] if hw.pipeline_parallel == "auto" else [int(hw.pipeline_parallel)]
    pps = [p for p in pps if m.layers is None or p <= m.layers]
    zeros = [0, 1, 2, 3] if hw.zero == "auto" else [int(hw.zero)]
    rcs = ["none", "selective", "full"] if str(hw.recompute) == "auto" else [str(hw.recompute)]
    return [(t, p, z, r) for t in tps for p in pps for z in zeros for r in rcs]


def _counts(plan):
    g = plan.hardware.gpus
    return list(g.counts()) if hasattr(g, "counts") else [int(g)]


def _fits_nodes(g, t, p, gpn):
    return g % (t * p) == 0 and (g <= gpn or g % gpn == 0)


def _enumerate(plan):
    noise = noise_estimate(plan)
    fr = frontier_from_target(plan.target, noise.b_crit)
    b = plan.budget
    limits = Limits(b.deadline, b.flops, b.gpu_hours, b.usd, b.usd_per_gpu_hour)
    out = []
    for t, p, z, r in _space(plan):
        for g in _counts(plan):
            if not _fits_nodes(g, t, p, plan.hardware.gpus_per_node):
                continue
            cm = build_cost_model(plan, g, Split(z, t, p, r, plan.hardware.flash_attention))
            mm = cm.micro_batch_max
            for n in range(1, N_MAX + 1):
                for micro in range(1, min(n, mm) + 1):
                    if n % micro:
                        continue
                    cfg = evaluate(cm, fr, limits, micro, n // micro, mm)
                    if cfg.feasible:
                        out.append(cfg)
    return out, fr.b_crit


def _axes(c):
    return (c.wall, c.usd if c.usd is not None else c.gpu_hours, c.flops)


def _dominates(a, b, tol):
    """a no worse on every axis (to rounding), and better than b by more than tol on one."""
    return all(x <= y * (1 + 1e-9) for x, y in zip(a, b)) and any(x < y * (1 - tol) for x, y in zip(a, b))


def _balance(x):
    return (1 + 1 / x) * (1 + x)


_ENUMERATED: dict = {}  # the space does not depend on the objective: enumerated once per plan


def _check(name, plan, objective):
    plan = plan.model_copy(update={"objective": objective})
    sol = solve(plan)
    if name not in _ENUMERATED:
        _ENUMERATED[name] = _enumerate(plan)
    configs, b_crit = _ENUMERATED[name]
    assert configs, "the oracle found no feasible configuration"
    assert sol.feasible, f"{objective}: the solver finds none, the oracle {len(configs)}"
    mine = (sol.wall_clock_s, sol.usd if sol.usd is not None else sol.gpu_hours, sol.flops)
    beaten = [c for c in configs if _dominates(_axes(c), mine, TOL)]
    assert not beaten, (f"{objective}: {sol.batch} is dominated by {beaten[0]}")
    front = [c for c in configs if not any(_dominates(_axes(d), _axes(c), 1e-9) for d in configs)]
    if objective == "min_time":
        assert sol.wall_clock_s <= min(c.wall for c in configs) * (1 + TOL)
    elif objective == "min_flops":
        assert sol.flops <= min(c.flops for c in configs) * (1 + TOL)
    elif objective == "min_cost":
        assert mine[1] <= min(_axes(c)[1] for c in configs) * (1 + TOL)
    else:  # balanced: the non-dominated point nearest x = 1
        best = min(_balance(c.batch / b_crit) for c in front)
        assert _balance(sol.batch.tokens / b_crit) <= best * (1 + TOL), (sol.batch, best)


# Keys a plan here does not search are pinned: a silent layout key is `auto` (issue 13).
PLANS = {
    # a fixed count, declared MFU: every layout runs at the MFU; memory decides which fit
    "fixed-declared": dict(model={"params": 1.3e9, "layers": 24, "d_model": 2048, "heads": 16, "seq_len": 2048},
                           hardware={"gpus": 64, "zero": "auto", "recompute": "auto", "tensor_parallel": "auto"},
                           budget={"deadline": 60 * DAY, "flops": None, "gpu_hours": None},
                           target={"tokens": 2.6e10, "at_batch": 1e6}, noise={"b_crit": 1e6}),
    # a fixed count, predicted utilization: the layout sets the step time
    "fixed-predicted": dict(model={"params": 1.3e9, "layers": 24, "d_model": 2048, "heads": 16, "seq_len": 2048},
                            hardware={"gpu": "H100-SXM5-80GB", "gpus": 32, "mfu": None, "zero": "auto",
                                      "tensor_parallel": "auto", "pipeline_parallel": "auto", "recompute": "none"},
                            budget={"deadline": 60 * DAY, "flops": None, "gpu_hours": None},
                            target={"tokens": 2.6e10, "at_batch": 1e6}, noise={"b_crit": 1e6}),
    # a free count: the GPU count is searched with the layout
    "free-predicted": dict(model={"params": 1.3e9, "layers": 24, "d_model": 2048, "heads": 16, "seq_len": 2048},
                           hardware={"gpu": "H100-SXM5-80GB", "gpus": {"min": 8, "max": 32, "step": 8}, "mfu": None,
                                     "zero": "auto", "tensor_parallel": "auto", "pipeline_parallel": 1,
                                     "recompute": "none"},
                           budget={"deadline": 30 * DAY, "flops": None, "gpu_hours": None},
                           target={"tokens": 2.6e10, "at_batch": 1e6}, noise={"b_crit": 1e6}),
    # a free count with a plan's own (unsearched) layout and a step cost
    "free-fixed-layout": dict(model={"params": 1.3e9, "layers": 24, "d_model": 2048, "heads": 16, "seq_len": 2048},
                              hardware={"gpu": "A100-SXM4-80GB", "gpus": {"min": 8, "max": 128, "step": 8},
                                        "mfu": None, "step_overhead": 0.5, "tensor_parallel": 1,
                                        "pipeline_parallel": 1, "recompute": "none"},
                              budget={"deadline": 30 * DAY, "flops": None, "gpu_hours": None},
                              target={"tokens": 2.6e10, "at_batch": 1e6}, noise={"b_crit": 2e6}),
}


@pytest.mark.parametrize("objective", ["balanced", "min_time", "min_cost", "min_flops"])
@pytest.mark.parametrize("name", sorted(PLANS))
def test_each_objective_is_optimal_and_never_dominated(name, objective):
    _check(name, make_plan(**PLANS[name]), objective)


def test_the_oracle_can_fail():
    """A dominated configuration is caught: the batch at B_crit on a fixed count with declared MFU
    is slower and spends more FLOPs than the floor (issue 13's 13B case in small)."""
    plan = make_plan(**PLANS["fixed-declared"])
    configs, b_crit = _enumerate(plan)
    at_b_crit = min(configs, key=lambda c: abs(math.log(c.batch / b_crit)))
    assert any(_dominates(_axes(c), _axes(at_b_crit), TOL) for c in configs)
