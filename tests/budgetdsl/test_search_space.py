"""budgetdsl.search_space: the layout × GPU-count pairs of a plan, a pure function of its model and
hardware. Each pair's shortcut numbers (micro-batch room from the family's stages, the step in
closed form) are checked against the full cost model of that layout on that count."""

from __future__ import annotations

from budgetdsl import search_space as ss
from budgetdsl.cost_model import build_cost_model
from budgetdsl.layout import launchable
from tests.budgetdsl.solver_plans import make_plan

AUTO = {"tensor_parallel": "auto", "pipeline_parallel": "auto", "zero": "auto", "recompute": "auto"}


def _plan(hardware=None, **over):
    return make_plan(hardware={"mfu": None, "gpus": {"min": 64, "max": 512, "step": 64}, **AUTO, **(hardware or {})},
                     **over)


def test_pairs_match_the_full_cost_model():
    plan = _plan()
    ss.clear_cache()
    space = ss.search_space(plan)
    assert space.pairs and space.considered - space.pruned == len(space.pairs)
    for pair in space.pairs:
        lay = pair.layout
        assert launchable(pair.gpus, lay.tensor_parallel, lay.pipeline_parallel, plan.hardware.gpus_per_node)
        cm = build_cost_model(plan, pair.gpus, pair.split)
        assert pair.micro_batch_max == cm.micro_batch_max
        assert pair.data_parallel == cm.data_parallel
        assert pair.step == cm._step  # the same closed form (frozen dataclasses compare by value)


def test_no_pair_is_matched_by_a_simpler_layout_on_its_count():
    plan = _plan()
    space = ss.search_space(plan)
    room = {}
    for choice in space.layouts:
        for g in space.counts:
            if launchable(g, choice.tensor_parallel, choice.pipeline_parallel, plan.hardware.gpus_per_node):
                from budgetdsl.cost_model import Split

                split = Split(choice.zero, choice.tensor_parallel, choice.pipeline_parallel, choice.recompute,
                              plan.hardware.flash_attention)
                room[(choice, g)] = build_cost_model(plan, g, split).micro_batch_max
    assert len(room) == space.considered
    for pair in space.pairs:
        assert all(room.get((s, pair.gpus), -1) < pair.micro_batch_max for s in pair.layout.simpler())


def test_the_space_does_not_depend_on_limits_objective_target_or_noise():
    ss.clear_cache()
    a = ss.search_space(_plan())
    ss.clear_cache()  # rebuilt, not the cached object
    b = ss.search_space(_plan(budget={"deadline": 1e5, "flops": None, "gpu_hours": None}, objective="min_time",
                              target={"tokens": 5e11}, noise={"b_crit": 1e5}))
    assert a == b and a is not b
    c = ss.search_space(_plan(hardware={"gpus_per_node": 4}))
    assert c != a  # the hardware does change it
