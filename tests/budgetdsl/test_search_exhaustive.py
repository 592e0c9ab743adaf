"""The bound-and-prune walk of budgetdsl.solve.search_space against brute force, on random plans
whose layout and GPU count are both searched: the solver's answer is the objective's pick among
every placement on every pair of the space. Fixed plans missed a pruning slip (`and` turned `or`
in the balanced skip) that changed 3 answers in 40 random plans.

The plans are drawn uniformly from a seeded generator, one seed per case: hypothesis, on a budget
of a few dozen examples, spent most of it on near-copies of a few small plans."""

from __future__ import annotations

import random

import pytest

from tests.budgetdsl.solver_plans import DAY, make_plan
from tests.budgetdsl.test_search_space import AUTO, _pick_of_every_pair

GPUS = ["A100-SXM4-40GB", "A100-SXM4-80GB", "H100-SXM5-80GB", "L40S", "MI300X"]
# mostly balanced: its walk also skips pairs on wall clock and cost, the others only on rank
OBJECTIVES = ["balanced"] * 4 + ["min_time", "min_flops", "min_cost"]


def searched_plan(seed: int, accounted: bool = False):
    """A 20M–3B-parameter model on a searched layout and an 8-GPU-step range up to 128 GPUs, with a
    deadline and sometimes a GPU-hour budget and a price: spaces small enough for brute force,
    where the pick often lies below B_crit, past the walk's skips. `accounted`: two layers fewer,
    the embedding and the loss counted in the split in their place (Megatron-Core's accounted split)
    on a pinned pipeline they divide, and the interleaving searched too, the draws otherwise the same."""
    rng = random.Random(seed)
    layers, heads = rng.choice([12, 24, 32, 48]), rng.choice([8, 16, 32])
    layers -= 2 if accounted else 0
    split: dict = {}
    if accounted:  # a pinned pipeline the slots divide (small models rarely pick one), drawn aside
        depths = [p for p in (2, 4, 8) if (layers + 2) % p == 0 and (layers + 2) // p >= 2]
        split = {"embedding_in_pipeline_split": True, "loss_in_pipeline_split": True,
                 "virtual_pipeline_stages": "auto", "pipeline_parallel": random.Random(-seed).choice(depths)}
    d_model = heads * rng.choice([64, 128])
    budget = {"deadline": rng.uniform(1, 60) * DAY, "flops": None, "gpu_hours": None}
    if rng.random() < 0.3:
        budget["gpu_hours"] = rng.uniform(1e3, 1e6)
    if rng.random() < 0.3:
        budget["usd_per_gpu_hour"] = rng.uniform(0.5, 5.0)
    return make_plan(
        model={"params": 12.0 * layers * d_model**2 * rng.uniform(0.9, 1.3), "layers": layers,
               "d_model": d_model, "heads": heads, "seq_len": rng.choice([512, 1024, 2048, 4096])},
        hardware={"gpu": rng.choice(GPUS), "mfu": None, "overlap": None, **AUTO, **split,
                  "gpus": {"min": rng.choice([8, 16]), "max": rng.choice([64, 128]), "step": 8}},
        budget=budget,
        target={"tokens": rng.uniform(1e10, 1e12), "at_batch": rng.uniform(2e5, 4e6)},
        noise={"b_crit": rng.uniform(2e5, 8e6)},
        objective=rng.choice(OBJECTIVES),
    )


@pytest.mark.parametrize("seed", range(32))
def test_a_searched_plan_ends_at_the_pick_of_the_whole_space(seed):
    assert_pick_of_the_whole_space(searched_plan(seed))


@pytest.mark.parametrize("seed", range(8))
def test_a_plan_with_the_accounted_split_ends_at_the_pick_of_the_whole_space(seed):
    """The depths and chunk counts the accounted slots allow (layout_search.candidates) are the
    space the walk prunes and brute force enumerates alike."""
    plan = searched_plan(seed, accounted=True)
    assert plan.hardware.split_slots() == (True, True)
    assert_pick_of_the_whole_space(plan)


def assert_pick_of_the_whole_space(plan) -> None:
    """solve()'s answer is the objective's pick among every placement on every pair (brute force)."""
    from budgetdsl.solve.solver import solve

    want = _pick_of_every_pair(plan)
    got = solve(plan)
    if want is None:
        assert not got.feasible
        return
    assert got.feasible
    assert (got.gpus, got.batch.tokens, got.wall_clock_s, got.flops) == \
        (want.gpus, want.batch, want.wall, want.flops), plan.model_dump(exclude_defaults=True)
