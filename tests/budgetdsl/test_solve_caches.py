"""What solve() keeps across solves (placements, their picks, configurations' numbers, the
coefficients shown) changes no answer: every plan solved warm, after other plans and other limits
were solved in between, gives the bytes of the same plan solved with every cache emptied first.
The kept entries are keyed by the cost model's identity and the frontier's and limits' numbers, so
a key that missed one of them would hand one plan another's placement here."""

from __future__ import annotations

import pathlib

from budgetdsl import cost_model, search_space, solve_context
from budgetdsl.plan_loader import load_plan
from budgetdsl.plan_model import GpuRange
from budgetdsl.solver import solve

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
