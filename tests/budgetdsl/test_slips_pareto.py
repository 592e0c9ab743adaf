"""Dominance at the edge of its tolerance (objectives.TOLERANCE): a point better by exactly the
tolerance is the same point, not a better one. The front `pareto` finds, the growing pool's front
(scalar comparisons, and numpy ones from Pool._VECTOR items) and each objective's pick all follow
the definition (`dominates`: no worse beyond the tolerance on every axis, better beyond it on one),
checked by brute force on points placed exactly on the tolerance edges."""

from __future__ import annotations

import itertools
import math
import random
from types import SimpleNamespace

import pytest

from budgetdsl.solve.objectives import TOLERANCE, Pool, choose, dominates, pareto, rank

B_CRIT = 1e6


def _edge_points(v: float) -> list[tuple[float, float, float]]:
    """Every point whose axes are v·(1 − tol), v or v·(1 + tol), as `dominates` computes the edges."""
    values = (v * (1.0 - TOLERANCE), v, v * (1.0 + TOLERANCE))
    return list(itertools.product(values, repeat=3))


def _brute_front(points):
    return [i for i, p in enumerate(points) if not any(dominates(q, p) for q in points)]


def test_the_tolerance_edge_itself_neither_dominates_nor_is_dominated():
    v = 3.7
    edge, far = v * (1.0 - TOLERANCE), v * (1.0 - 10 * TOLERANCE)
    assert not dominates((edge, v, v), (v, v, v)) and not dominates((v, v, v), (edge, v, v))
    assert dominates((far, v, v), (v, v, v)) and not dominates((v, v, v), (far, v, v))
    # worse by exactly the tolerance on one axis is no worse: better beyond it on another dominates
    assert dominates((v * (1.0 + TOLERANCE), far, v), (v, v, v))
    assert not dominates((v * (1.0 + 10 * TOLERANCE), far, v), (v, v, v))


@pytest.mark.parametrize("v", [1.0, 3.7, 2.5e5])
def test_pareto_keeps_the_brute_force_front_of_every_pair_on_tolerance_edges(v):
    """Pairs, so that no third point hides a wrong comparison of the two."""
    for p, q in itertools.product(_edge_points(v), repeat=2):
        points = [p, q]
        front = pareto(points, lambda x: x)
        assert [i for i, x in enumerate(points) if x in front] == _brute_front(points), (p, q)


def _cfg(point):
    wall, cost, flops = point
    return SimpleNamespace(wall=wall, usd=None, gpu_hours=cost, flops=flops, batch=B_CRIT * cost / wall)


OBJECTIVES = ("min_time", "min_cost", "min_flops", "balanced")


def _check_pool(points, chunk):
    items = [_cfg(p) for p in points]
    pool: Pool = Pool(OBJECTIVES[0], lambda c: c, B_CRIT, OBJECTIVES[1:])
    for k in range(0, len(items), chunk):
        pool.add(items[k:k + chunk])
    front = _brute_front(points)
    assert [next(i for i, x in enumerate(items) if x is c) for c in pool.front()] == front, points
    for objective in OBJECTIVES:
        pick = pool.pick(objective)
        assert pick is choose(objective, items, lambda c: c, B_CRIT)
        if front:  # else a cycle of near-ties: every point alike
            assert _key(objective, pick) == min(_key(objective, items[i]) for i in front)


def _key(objective, cfg):
    """The objective's measure to 11 significant digits (the pick breaks ties within 12 on the other axes)."""
    r = rank(objective, cfg, B_CRIT)[0]
    return round(r, 10 - math.floor(math.log10(r)))


def test_the_pool_front_and_picks_follow_the_definition_for_every_pair_on_tolerance_edges():
    for p, q in itertools.product(_edge_points(3.7), repeat=2):
        if p != q:
            _check_pool([p, q], 1)


def test_the_numpy_pool_follows_the_definition_on_tolerance_edges():
    """Pool._VECTOR far worse points first: from there on the pool compares in numpy; then small
    random sets of edge points (a larger set lets a third point hide a wrong comparison)."""
    rng = random.Random(5)
    edges = _edge_points(3.7)
    filler = [(1e4 + i, 1e4 + 2 * i, 1e4 + 3 * i) for i in range(Pool._VECTOR)]
    for _ in range(60):
        _check_pool(filler + rng.sample(edges, 3), 64)
