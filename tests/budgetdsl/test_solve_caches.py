"""What solve() keeps across solves (placements, their picks, configurations' numbers, the
coefficients shown) changes no answer: every plan solved warm, after other plans and other limits
were solved in between, gives the bytes of the same plan solved with every cache emptied first.
The kept entries are keyed by the cost model's identity and the frontier's and limits' numbers, so
a key that missed one of them would hand one plan another's placement here."""

from __future__ import annotations

import pathlib

from budgetdsl.cost import cost_model
from budgetdsl.plan.loader import load_plan
from budgetdsl.plan.model import GpuRange
from budgetdsl.solve import context as solve_context
from budgetdsl.solve import search_space
from budgetdsl.solve.solver import solve

REPO = pathlib.Path(__file__).resolve().parents[2]
LAYOUT = ("tensor_parallel", "pipeline_parallel", "zero", "recompute")


def _variants() -> list:
    out = []
    for name in ("minimal.yaml", "llama2-7b.yaml"):
        plan = load_plan(REPO / "plans" / name)
        auto = plan.model_copy(update={"hardware": plan.hardware.model_copy(update={k: "auto" for k in LAYOUT})})
        ranged = auto.model_copy(update={"hardware": auto.hardware.model_copy(
            update={"gpus": GpuRange(min=8, max=256, step=8)})})
        for p in (plan, auto, ranged):
            for objective in ("balanced", "min_time", "min_flops", "min_cost")[:2 if p is ranged else 4]:
                q = p.model_copy(update={"objective": objective})
                out.append(q)
                # limits that bind, and a price: the same cost models, other placements
                gpu_hours = 0.05 * (solve(q).gpu_hours or 1.0)
                out.append(q.model_copy(update={"budget": q.budget.model_copy(
                    update={"gpu_hours": gpu_hours, "usd_per_gpu_hour": 2.5})}))
    return out


def _cold(plan) -> str:
    cost_model._CACHE.clear()
    search_space.clear_cache()
    solve_context.clear_cache()
    return solve(plan).model_dump_json()


def test_warm_solves_answer_as_cold_ones():
    plans = _variants()
    cold = [_cold(p) for p in plans]
    # warm: every other variant solved in between, in order and in reverse order
    for order in (range(len(plans)), reversed(range(len(plans)))):
        for i in order:
            assert solve(plans[i]).model_dump_json() == cold[i], i


def _with_limits(plan, **limits):
    return plan.model_copy(update={"budget": plan.budget.model_copy(update=limits)})


def test_new_limits_answer_as_cold_solves(monkeypatch):
    """A run of solves whose limits move (a sweep's rows, the TUI's edits) — loose, binding on some
    counts, binding on the pick, infeasible, and back — answers each as a cold solve does, while the
    search is replayed from the last one (search_replay) wherever the pairs it placed give the same
    candidates, and walked afresh where they do not."""
    from budgetdsl.solve import search_replay
    replays = []
    real_replay = search_replay.replay
    monkeypatch.setattr(search_space, "replay", lambda *a: replays.append(real_replay(*a)) or replays[-1])
    plan = load_plan(REPO / "plans" / "minimal.yaml")
    auto = plan.model_copy(update={"hardware": plan.hardware.model_copy(update={k: "auto" for k in LAYOUT})})
    ranged = auto.model_copy(update={"hardware": auto.hardware.model_copy(
        update={"gpus": GpuRange(min=8, max=128, step=8)}), "objective": "min_time"})
    for base in (auto, ranged):
        first = solve(base)
        wall, hours, flops = first.wall_clock_s, first.gpu_hours, first.flops
        steps = [{"gpu_hours": 1e6 + k} for k in range(3)]  # loose: the interval's end moves
        # just under the pick's wall clock: the pick (whole steps) now violates the deadline, yet its
        # batch is still inside the interval (where fractional steps meet it); then further in
        steps += [{"deadline": wall * f} for f in (1 - 1e-9, 3.0, 1.2, 1.0001, 0.9, 0.5, 0.02, 2.0)]
        steps += [{"gpu_hours": hours * f} for f in (1.5, 0.97, 0.6, 10.0)]
        steps += [{"flops": flops * f} for f in (1.3, 0.999, 0.8)]
        steps += [{"deadline": wall * 0.95, "usd": hours * 2.0 * 1.1, "usd_per_gpu_hour": 2.0},
                  {"deadline": wall * 0.95, "usd": hours * 2.0 * 1.05, "usd_per_gpu_hour": 2.0}]
        warm = [solve(_with_limits(base, **s)).model_dump_json() for s in steps]
        for s, answer in zip(steps, warm):
            # fresh: nothing kept that depends on limits (the cost models and spaces do not)
            solve_context.clear_cache()
            search_space._RECORDS.clear()
            assert answer == solve(_with_limits(base, **s)).model_dump_json(), s
    assert any(r is not None for r in replays) and any(r is None for r in replays)
