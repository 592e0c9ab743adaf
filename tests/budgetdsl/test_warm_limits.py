"""A new limit on a plan solved before (a sweep's rows, the TUI's edits) is answered from the kept
search: placements handed on where no evaluated configuration crosses the new limit (`carried`,
`seeded`) and the last walk replayed where its candidates are unchanged (`search_replay`). Each
answer must be the cold answer: here the limits walk across the feasible batches' ends — a
deadline that raises the smallest batch step by step, a FLOP budget and GPU-hours that lower the
largest — so that the kept placements' ends move while their intervals stay open, and every warm
answer is compared, byte for byte, with the same plan solved alone."""

from __future__ import annotations

import pathlib

import pytest
from solver_plans import DAY, searched

from budgetdsl.plan.loader import load_plan
from budgetdsl.solve.cache import SolveCache
from budgetdsl.solve.solver import solve

REPO = pathlib.Path(__file__).resolve().parents[2]


def _with_budget(plan, **budget):
    return plan.model_copy(update={"budget": plan.budget.model_copy(update=budget)})


def _limits(plan):
    """Deadlines from loose to tight and FLOP / GPU-hour budgets from loose to tight, around the
    plan's own answer."""
    base = solve(plan)
    wall, flops, hours = base.wall_clock_s, base.flops, base.gpu_hours
    out = [dict(deadline=wall * f) for f in (4.0, 2.0, 1.3, 1.1, 1.02, 0.98, 0.9)]
    out += [dict(deadline=None, flops=flops * f) for f in (3.0, 1.5, 1.05, 1.0, 0.97)]
    out += [dict(deadline=None, flops=None, gpu_hours=hours * f) for f in (2.0, 1.2, 1.01, 0.95)]
    return out


@pytest.mark.parametrize("name, objective", [("minimal.yaml", "balanced"), ("minimal.yaml", "min_time"),
                                             ("llama2-7b.yaml", "min_cost"), ("minimal.yaml", "min_flops")])
@pytest.mark.parametrize("search", [False, True], ids=["pinned", "searched"])
def test_each_new_limit_is_answered_as_a_cold_solve(name, objective, search):
    plan = load_plan(REPO / "plans" / name).model_copy(update={"objective": objective})
    if search:
        plan = searched(plan)
    plan = _with_budget(plan, deadline=60 * DAY)
    cache = SolveCache()
    solve(plan, cache)
    for limits in _limits(plan):
        new = _with_budget(plan, **limits)
        assert solve(new, cache).model_dump_json() == solve(new).model_dump_json(), limits
