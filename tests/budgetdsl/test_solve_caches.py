"""What solves share lives in a `SolveCache` the caller owns (cost models, search spaces, placements,
their picks, the last search to replay), and it changes no answer: every plan solved with a warm
cache, after other plans and other limits were solved in it, gives the bytes of the same plan
solved alone. The kept entries are keyed by the cost model's identity and the frontier's and limits'
numbers, so a key that missed one of them would hand one plan another's placement here. Solving
in another order, in another process, gives the same bytes too (no state outside the arguments)."""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys

from hypothesis import HealthCheck, Phase, given, settings
from solver_plans import DAY, make_plan, plans, searched

from budgetdsl.plan.loader import load_plan
from budgetdsl.plan.model import GpuRange
from budgetdsl.solve import search_space
from budgetdsl.solve.cache import SolveCache
from budgetdsl.solve.solver import solve

REPO = pathlib.Path(__file__).resolve().parents[2]


def _variants() -> list:
    out = []
    for name in ("minimal.yaml", "llama2-7b.yaml"):
        plan = load_plan(REPO / "plans" / name)
        auto = searched(plan)
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


def test_warm_solves_answer_as_cold_ones():
    plans_ = _variants()
    cold = [solve(p).model_dump_json() for p in plans_]  # each with a cache of its own
    cache = SolveCache()
    # warm: every other variant solved in between, in order and in reverse order
    for order in (range(len(plans_)), reversed(range(len(plans_)))):
        for i in order:
            assert solve(plans_[i], cache).model_dump_json() == cold[i], i
    assert cache.cost_models and cache.spaces and cache.records  # the caller's cache was used


def test_a_solve_without_a_cache_touches_no_other():
    """A solve keeps nothing outside its arguments: a cache not passed to it stays as it was."""
    plan = _variants()[2]
    cache = SolveCache()
    solve(plan, cache)
    held = {name: len(getattr(cache, name)) for name in ("cost_models", "spaces", "walks", "records", "picks")}
    other = plan.model_copy(update={"budget": plan.budget.model_copy(update={"gpu_hours": 1234.5})})
    solve(other)
    assert {name: len(getattr(cache, name)) for name in held} == held


def _with_limits(plan, **limits):
    return plan.model_copy(update={"budget": plan.budget.model_copy(update=limits)})


def test_new_limits_answer_as_cold_solves(monkeypatch):
    """A run of solves whose limits move (a sweep's rows, the TUI's edits) — loose, binding on some
    counts, binding on the pick, infeasible, and back — answers each as a cold solve does, while the
    search is replayed from the last one (search_replay) wherever the pairs it placed give the same
    candidates, and walked afresh where they do not."""
    replays = []
    real_replay = search_space.replay
    monkeypatch.setattr(search_space, "replay", lambda *a: replays.append(real_replay(*a)) or replays[-1])
    plan = load_plan(REPO / "plans" / "minimal.yaml")
    auto = searched(plan)
    ranged = auto.model_copy(update={"hardware": auto.hardware.model_copy(
        update={"gpus": GpuRange(min=8, max=128, step=8)}), "objective": "min_time"})
    cache = SolveCache()
    for base in (auto, ranged):
        first = solve(base, cache)
        wall, hours, flops = first.wall_clock_s, first.gpu_hours, first.flops
        steps = [{"gpu_hours": 1e6 + k} for k in range(3)]  # loose: the interval's end moves
        # just under the pick's wall clock: the pick (whole steps) now violates the deadline, yet its
        # batch is still inside the interval (where fractional steps meet it); then further in
        steps += [{"deadline": wall * f} for f in (1 - 1e-9, 3.0, 1.2, 1.0001, 0.9, 0.5, 0.02, 2.0)]
        steps += [{"gpu_hours": hours * f} for f in (1.5, 0.97, 0.6, 10.0)]
        steps += [{"flops": flops * f} for f in (1.3, 0.999, 0.8)]
        steps += [{"deadline": wall * 0.95, "usd": hours * 2.0 * 1.1, "usd_per_gpu_hour": 2.0},
                  {"deadline": wall * 0.95, "usd": hours * 2.0 * 1.05, "usd_per_gpu_hour": 2.0}]
        warm = [solve(_with_limits(base, **s), cache).model_dump_json() for s in steps]
        for s, answer in zip(steps, warm):
            assert answer == solve(_with_limits(base, **s)).model_dump_json(), s  # alone: a cache of its own
    assert any(r is not None for r in replays) and any(r is None for r in replays)


def test_limits_moved_in_small_steps_answer_as_cold_solves(monkeypatch):
    """New limits start from the last ones' evaluations on each cost model (`placement.seeded`) and
    hand a placement on where its inputs agree (`placement.carried`: the same integer ends, or only
    the upper end moved and lost). Limits moved in small steps — loose ones that only move the
    interval's upper end, and binding ones stepped across the configurations' own numbers, where a
    verdict flips — answer each as a cold solve does; both hand-ons happen, and so does placing
    afresh where they must not."""
    from budgetdsl.solve import context

    counts = {"seeded": 0, "not seeded": 0, "carried": 0, "placed": 0}
    real_seeded, real_carried, real_place = context.seeded, context.carried, context.place

    def seeded(*a):
        out = real_seeded(*a)
        counts["seeded" if out is not None else "not seeded"] += 1
        return out

    def carried(*a):
        out = real_carried(*a)
        counts["carried"] += out is not None
        return out

    def place(*a):
        counts["placed"] += 1
        return real_place(*a)
    monkeypatch.setattr(context, "seeded", seeded)
    monkeypatch.setattr(context, "carried", carried)
    monkeypatch.setattr(context, "place", place)
    plan = load_plan(REPO / "plans" / "minimal.yaml")
    auto = searched(plan)
    ranged = auto.model_copy(update={"hardware": auto.hardware.model_copy(
        update={"gpus": GpuRange(min=8, max=64, step=8)}), "objective": "min_time"})
    for base in (auto, ranged):
        cache = SolveCache()
        first = solve(base, cache)
        wall, hours, flops = first.wall_clock_s, first.gpu_hours, first.flops
        steps = [{"gpu_hours": 1e6 + k} for k in range(6)]
        steps += [{"deadline": wall * (1.0 + k * 2e-4)} for k in range(-6, 7)]
        steps += [{"gpu_hours": hours * (1.0 + k * 3e-4)} for k in range(6, -7, -1)]
        steps += [{"flops": flops * (1.0 + k * 1e-4)} for k in range(-4, 5)]
        steps += [{"deadline": wall * 0.999, "usd": hours * 2.0 * (1.0 + k * 1e-3), "usd_per_gpu_hour": 2.0}
                  for k in range(-3, 4)]
        steps += [{}, {"gpu_hours": 1e6}, {}]  # a limit taken away, set, taken away again
        for s in steps:
            assert solve(_with_limits(base, **s), cache).model_dump_json() == \
                solve(_with_limits(base, **s)).model_dump_json(), s
    assert counts["seeded"] and counts["not seeded"] and counts["carried"] and counts["placed"], counts


# -- in shuffled order, in two processes ----------------------------------------------------------

_CHILD = r"""
import json, random, sys
from budgetdsl.plan.diagnostics import PlanError
from budgetdsl.plan.loader import load_plan
from budgetdsl.plan.model import GpuRange, Plan, Recompute
from budgetdsl.solve.cache import SolveCache
from budgetdsl.solve.solver import solve

LAYOUT = {"tensor_parallel": "auto", "pipeline_parallel": "auto", "zero": "auto", "recompute": Recompute.auto}
cases, seed = json.load(open(sys.argv[1])), int(sys.argv[2])


def build(case):
    if case["kind"] == "plan":
        return Plan.model_validate_json(case["json"])
    plan = load_plan(case["path"])
    hw = {}
    if case.get("auto"):
        hw.update(LAYOUT)
    if case.get("gpus"):
        hw["gpus"] = GpuRange(**case["gpus"])
    update = {"objective": case["objective"]} if case.get("objective") else {}
    if hw:
        update["hardware"] = plan.hardware.model_copy(update=hw)
    if case.get("budget"):
        update["budget"] = plan.budget.model_copy(update=case["budget"])
    return plan.model_copy(update=update)


order = list(range(len(cases)))
random.Random(seed).shuffle(order)
cache = SolveCache()  # every case solved in it, in this process's order
answers = {}
for i in order:
    try:
        answers[cases[i]["id"]] = solve(build(cases[i]), cache).model_dump_json()
    except PlanError as exc:
        answers[cases[i]["id"]] = "error: " + "\n".join(d.format() for d in exc.diagnostics)
sys.stdout.write(json.dumps(answers, sort_keys=True))
"""


def _drawn(n: int) -> list:
    """`n` plans of the solver's property tests (`solver_plans.plans`), the same every run."""
    out: list = []

    @settings(max_examples=n, derandomize=True, database=None, deadline=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @given(plans(tight=False) | plans(tight=True))
    def collect(plan):
        out.append(plan)

    collect()
    return out


def _cases() -> list[dict]:
    cases: list[dict] = []
    for path in sorted((REPO / "plans").glob("*.yaml")):
        cases.append({"kind": "file", "path": str(path)})
        cases.append({"kind": "file", "path": str(path), "auto": True, "budget": {"usd_per_gpu_hour": 2.0}})
    minimal = str(REPO / "plans" / "minimal.yaml")
    for objective in ("balanced", "min_time", "min_flops", "min_cost"):
        cases.append({"kind": "file", "path": minimal, "auto": True, "objective": objective,
                      "gpus": {"min": 8, "max": 256, "step": 8}})
        for deadline in (2 * DAY, 10 * DAY, 40 * DAY):
            cases.append({"kind": "file", "path": minimal, "auto": True, "objective": objective,
                          "budget": {"deadline": deadline}})
    built = [make_plan(), make_plan(objective="min_time"), make_plan(budget={"deadline": DAY}),
             make_plan(run={"batch": 4 * 2**20}), *_drawn(40)]
    cases += [{"kind": "plan", "json": p.model_dump_json()} for p in built]
    for i, case in enumerate(cases):
        case["id"] = f"{i:03d}"
    return cases


def test_shuffled_solves_in_two_processes_give_the_same_bytes(tmp_path):
    cases = _cases()
    spec = tmp_path / "cases.json"
    spec.write_text(json.dumps(cases))
    outputs = []
    for seed in (1, 2):
        done = subprocess.run([sys.executable, "-c", _CHILD, str(spec), str(seed)], cwd=REPO,
                              capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stderr[-2000:]
        outputs.append(json.loads(done.stdout))
    first, second = outputs
    assert len(first) == len(cases) and first.keys() == second.keys()
    differ = [k for k in first if first[k] != second[k]]
    assert not differ, differ
    assert sum(not v.startswith("error") for v in first.values()) > len(cases) // 2  # most solve
