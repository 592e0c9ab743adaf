"""The layout search against brute force for the objectives other than balanced, on random searched
plans (test_search_exhaustive.py draws mostly balanced, whose walk skips the most): every plan's
answer is the objective's pick among every placement on every pair of the space. Slips in the
walk's skips and bound keys (the mutation benchmark, bench/bench_mutation.py) changed answers that
only a min_flops, min_time or min_cost plan shows."""

from __future__ import annotations

import pytest

from budgetdsl.plan.model import Plan
from tests.budgetdsl.test_search_exhaustive import assert_pick_of_the_whole_space, searched_plan


@pytest.mark.parametrize("objective", ["min_flops", "min_time", "min_cost"])
@pytest.mark.parametrize("seed", range(100, 106))
def test_a_searched_plan_ends_at_the_pick_of_the_whole_space_for_every_objective(seed, objective):
    assert_pick_of_the_whole_space(Plan.model_validate({**searched_plan(seed).model_dump(), "objective": objective}))
