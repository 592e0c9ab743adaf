"""objectives.pareto's three-axis path (`_pareto3`, the solver's hot path) keeps exactly the points
the generic path keeps (`_pareto`, `dominates` term by term), ties and near-ties within TOLERANCE
included; and both keep exactly the points no other point dominates (brute force) when the values
are far from the tolerance."""

from __future__ import annotations

import random

import pytest

from budgetdsl.solve.objectives import TOLERANCE, _pareto, _pareto3, dominates


def _points(rng: random.Random, n: int) -> list[tuple[float, float, float]]:
    grid = [1.0, 1.0 + TOLERANCE / 2, 1.0 + 2 * TOLERANCE, 2.0, 3.0, 0.5, 7.0]  # exact ties and near-ties
    out = []
    for _ in range(n):
        if rng.random() < 0.5:
            out.append(tuple(rng.choice(grid) for _ in range(3)))
        else:
            out.append(tuple(rng.uniform(0.1, 10.0) for _ in range(3)))
    return out


def test_three_axis_path_equals_the_generic_path():
    rng = random.Random(13)
    for _ in range(2000):
        pts = _points(rng, rng.randint(0, 30))
        assert _pareto3(pts) == _pareto(pts)


def test_the_front_is_the_undominated_points():
    rng = random.Random(5)
    for _ in range(500):
        pts = [tuple(round(rng.uniform(1, 9), 1) for _ in range(3)) for _ in range(rng.randint(1, 25))]
        brute = {i for i, p in enumerate(pts) if not any(dominates(q, p) for q in pts)}
        assert _pareto3(pts) == brute


def test_a_growing_pool_picks_what_choose_picks():
    """objectives.Pool (the search's incremental pick) equals choose() of the items added so far,
    for every objective, with ties and near-ties in the axes and in the batch."""
    from budgetdsl.solve.objectives import OBJECTIVES, Pool, choose
    from budgetdsl.solve.placement import Config

    rng = random.Random(7)
    for _ in range(300):
        objective = rng.choice(OBJECTIVES)
        pool = Pool(objective, lambda c: c, 1e6)
        items: list[Config] = []
        for _ in range(rng.randint(1, 6)):
            new = []
            for _ in range(rng.randint(0, 5)):
                wall, gpu_hours, flops = _points(rng, 1)[0]
                batch = rng.choice([5e5, 1e6, 2e6, 1e6 * (1 + TOLERANCE)])
                usd = None if rng.random() < 0.5 else gpu_hours * 2.0
                new.append(Config(8, 1, 1, 8, 8, batch, 10, 10 * batch, flops, wall, gpu_hours, usd, 0.0, ()))
            pool.add(new)
            items.extend(new)
            assert pool.pick() is choose(objective, items, lambda c: c, 1e6)


@pytest.mark.parametrize("front_loop", [0, 10**9])
def test_a_large_pool_picks_what_choose_picks(monkeypatch, front_loop):
    """Past objectives.Pool._VECTOR items the comparisons run in numpy: the same flags, the same
    pick and front as choose() and pareto(), near-ties within TOLERANCE included — the front
    compared in numpy or, short (`Pool._FRONT_LOOP`), in Python (then without numpy's arrays)."""
    from budgetdsl.solve.objectives import OBJECTIVES, Pool, axes, choose, pareto
    from budgetdsl.solve.placement import Config

    monkeypatch.setattr(Pool, "_FRONT_LOOP", front_loop)

    rng = random.Random(11)
    for objective in OBJECTIVES:
        pool = Pool(objective, lambda c: c, 1e6)
        items: list[Config] = []
        while len(items) < Pool._VECTOR + 150:
            new = []
            for _ in range(rng.randint(1, 40)):
                wall, gpu_hours, flops = _points(rng, 1)[0]
                batch = rng.choice([5e5, 1e6, 2e6, 1e6 * (1 + TOLERANCE)])
                new.append(Config(8, 1, 1, 8, 8, batch, 10, 10 * batch, flops, wall, gpu_hours, None, 0.0, ()))
            pool.add(new)
            items.extend(new)
            assert pool.pick() is choose(objective, items, lambda c: c, 1e6)
        if front_loop:  # the front compared in Python, numpy never needed
            assert pool._array is None and pool._front_ids is not None
        else:
            assert pool._array is not None  # the numpy path ran
        assert [id(c) for c in pool.front()] == [id(c) for c in pareto(items, axes)]


def test_points_of_other_shapes_pick_the_least_key_on_their_front():
    """choose_among on points that are not three numbers each (a NaN axis, or two axes) takes the
    non-dominated set by `pareto` and, among several, the objective's least key: here the fastest
    of two incomparable configurations for min_time, the cheapest for min_cost."""
    from budgetdsl.solve.objectives import choose_among
    from budgetdsl.solve.placement import Config

    fast = Config(8, 1, 1, 8, 8, 1e6, 10, 1e7, 1e18, 100.0, 9.0, None, 0.0, ())
    cheap = Config(8, 1, 1, 8, 8, 1e6, 10, 1e7, 1e18, 200.0, 4.0, None, 0.0, ())
    slow = Config(8, 1, 1, 8, 8, 1e6, 10, 1e7, 1e18, 300.0, 9.5, None, 0.0, ())
    items = [cheap, fast, slow]
    for points in ([(200.0, 4.0), (100.0, 9.0), (300.0, 9.5)],
                   [(200.0, 4.0, float("nan")), (100.0, 9.0, float("nan")), (300.0, 9.5, float("nan"))]):
        assert choose_among("min_time", items, points, lambda c: c, 1e6) is fast
        assert choose_among("min_cost", items, points, lambda c: c, 1e6) is cheap
