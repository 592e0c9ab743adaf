"""`placement.carried`: what a placement under one set of limits hands on to another (the
configurations evaluated, the counts' feasible ones, the placements themselves) is exactly what
`place` computes afresh under the new limits. Random limits around the run's own numbers — loose,
binding on the interval's ends, just under a configuration's wall clock, infeasible — on cost
models with and without a pipeline, every objective, with and without a fixed micro-batch."""

from __future__ import annotations

import math
import pathlib
import random

import pytest

from budgetdsl.cost_model import Split, build_cost_model
from budgetdsl.frontier import frontier_from_target
from budgetdsl.noise_source import noise_estimate
from budgetdsl.placement import Limits, carried, place
from budgetdsl.plan_loader import load_plan

REPO = pathlib.Path(__file__).resolve().parents[2]
OBJECTIVES = ("balanced", "min_time", "min_flops", "min_cost")


def _place_all(cm, fr, limits, micro, evals, placed):
    """Every objective placed on one count, as solve_context.place_on keeps them."""
    for objective in OBJECTIVES:
        key = (objective, micro)
        if key not in placed:
            placed[key] = place(cm, fr, limits, objective, micro, evals)
    if ("candidates", micro) not in placed:  # kept with the placements, as solve_context.candidates does
        placed[("candidates", micro)] = tuple(placed[(o, micro)] for o in OBJECTIVES if placed[(o, micro)].feasible)
    return placed


def _limits(rng: random.Random, wall: float, hours: float, flops: float, price: float | None) -> Limits:
    def near(v: float) -> float | None:
        r = rng.random()
        if r < 0.2:
            return None
        if r < 0.45:  # a hair under or over the value itself (whole steps against fractional)
            return v * (1.0 + rng.choice((-1, 1)) * 10.0 ** rng.uniform(-12, -3))
        if r < 0.7:  # close: a narrow interval around the objective's batch
            return v * (1.0 + rng.uniform(-0.02, 0.1))
        return v * math.exp(rng.uniform(-2.0, 2.5))
    usd = near(hours * price) if price else None
    return Limits(near(wall), near(flops), near(hours), usd, price)


@pytest.mark.parametrize("split, counts", [(Split(1, 1, 1, "none", True), (1, 2, 8, 64)),
                                           (Split(0, 2, 4, "full", True), (8, 16, 64))], ids=["dp", "pipeline"])
def test_carried_placements_are_what_place_computes_afresh(split, counts):
    plan = load_plan(REPO / "plans" / "minimal.yaml")
    noise = noise_estimate(plan)
    fr = frontier_from_target(plan.target, noise.b_crit)
    rng = random.Random(13)
    checked = kept = 0
    for gpus in counts:
        cm = build_cost_model(plan, gpus, split)
        for price in (None, 2.5):
            base = place(cm, fr, Limits(price=price), "balanced")
            wall, hours, flops = base.config.wall, base.config.gpu_hours, base.config.flops
            for micro in (None, 1, 2):
                limits = _limits(rng, wall, hours, flops, price)
                evals: dict = {}
                placed = _place_all(cm, fr, limits, micro, evals, {})
                for _ in range(150):
                    new_limits = _limits(rng, wall, hours, flops, price)
                    new_evals, new_placed = carried(cm, fr, new_limits, evals, placed)
                    kept += sum(1 for k in new_placed if k[0] != "candidates")
                    fresh = _place_all(cm, fr, new_limits, micro, {}, {})
                    _place_all(cm, fr, new_limits, micro, new_evals, new_placed)
                    for key, pl in fresh.items():
                        assert new_placed[key] == pl, (key, new_limits)
                        checked += 1
                    evals, placed, limits = new_evals, new_placed, new_limits
    assert kept > checked // 10  # the placements handed on are many, not only the ones made again


def test_an_answer_an_end_could_change_is_made_again():
    """The rules no random run above reaches (on real cost models the answer comes from the target's
    neighbours): a placement is not handed on when its answer came from an end that moved, when
    a configuration at a new end ranks before its answer, or when the outward scan decided it."""
    plan = load_plan(REPO / "plans" / "minimal.yaml")
    fr = frontier_from_target(plan.target, noise_estimate(plan).b_crit)
    cm = build_cost_model(plan, 64, Split(1, 1, 1, "none", True))
    base = place(cm, fr, Limits(), "balanced")
    hours = base.config.gpu_hours
    key = ("balanced", None)

    def handed_on(doctor) -> bool:
        evals: dict = {}
        placed = {key: place(cm, fr, Limits(gpu_hours=hours * 4), "balanced", None, evals)}
        evals["decisions"][key] = doctor(evals["decisions"][key])
        _, new_placed = carried(cm, fr, Limits(gpu_hours=hours * 5), evals, placed)  # n_hi moves
        return key in new_placed

    assert handed_on(lambda d: d)  # as placed: the far end moved, the answer stands
    assert not handed_on(lambda d: (d[0], d[1], d[2], d[0][-1]))  # the answer came from the end that went
    assert not handed_on(lambda d: (d[0], d[1], (math.inf,), d[3]))  # the new end ranks before the answer
    assert not handed_on(lambda d: None)  # the outward scan decided it
