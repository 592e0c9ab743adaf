"""The objectives: their names, what each measures, and how one configuration is chosen among many
(docs/design.md section 3; docs/solver.md "Objectives").

Every configuration is a point in (wall clock, GPU-hours or money, FLOPs), lower is better on each
axis. A configuration is *dominated* when another is no worse on every axis and better on one. The
recommendation is always taken from the non-dominated set (the Pareto front) of the configurations
the solver evaluated, so no objective ever recommends a run that another candidate beats on every
axis (issue 13):

- min_time: the least wall clock; ties to the fewest GPU-hours, then FLOPs.
- min_cost: the least money (GPU-hours × price, or GPU-hours without a price); ties to the least
  wall clock, then FLOPs.
- min_flops: the fewest FLOPs; ties to the least wall clock, then GPU-hours.
- balanced: the non-dominated point nearest x = B/B_crit = 1, measured by the frontier's own
  product (S/S_min)(E/E_min) = (1 + 1/x)(1 + x), which is smallest at x = 1 (McCandlish et al.
  2018, eq. 2.11: the point where steps and tokens each pay the same factor 2 over their minimum);
  ties to the fewest GPU-hours, then the least wall clock. With a fixed GPU count GPU-hours follow
  the wall clock, and the wall clock W(B) = S(B)·T(B) falls with B only up to the minimum-time
  batch B*: past it a bigger batch is slower *and* costs more FLOPs, so balanced lands at
  min(B_crit, B*). With a free GPU count the front also spans GPU counts, and balanced takes
  x = 1 (when the limits allow it) on the count that spends the fewest GPU-hours there — the
  count at which that batch is efficient.
"""

from __future__ import annotations

import bisect
from math import floor as _floor, inf as _INF, isfinite as _isfinite, log10 as _log10
from collections.abc import Callable, Sequence
from typing import Generic, TypeVar

OBJECTIVES = ("balanced", "min_time", "min_cost", "min_flops")
MEASURE = {"balanced": "(S/S_min)(E/E_min)", "min_time": "wall clock", "min_flops": "FLOPs",
           "min_cost": "cost"}

# Two values within this relative distance are equal for dominance: steps are rounded up to whole
# numbers and batches to whole sequences, so configurations a rounding apart are one point.
TOLERANCE = 1e-9

T = TypeVar("T")


def axes(cfg) -> tuple[float, float, float]:
    """(wall clock s, cost, FLOPs) of a `placement.Config`; cost is USD with a price, else GPU-hours."""
    return (cfg.wall, cfg.usd if cfg.usd is not None else cfg.gpu_hours, cfg.flops)


def dominates(a: Sequence[float], b: Sequence[float], tol: float = TOLERANCE) -> bool:
    """a is no worse than b on every axis and better on one (beyond `tol`, relative)."""
    better = False
    for x, y in zip(a, b):
        if x > y * (1.0 + tol):
            return False
        if x < y * (1.0 - tol):
            better = True
    return better


def pareto(items: Sequence[T], key: Callable[[T], Sequence[float]]) -> list[T]:
    """The items no other item dominates, in their given order.

    Sorted by the axes, a point can only be dominated by one that sorts before it or lies within
    TOLERANCE of it on the first axis; and a point that another dominates is dominated by a point of
    the front too (dominance is a strict order up to TOLERANCE). So each point is checked against the
    front found so far plus the tied points: O(n·|front|) instead of O(n²). Three axes (the solver's
    wall clock, cost, FLOPs) take an inlined `dominates`, the same comparisons term for term."""
    points = [tuple(key(i)) for i in items]
    if points and all(len(p) == 3 for p in points):
        kept = _pareto3(points)
    else:
        kept = _pareto(points)
    return [item for n, item in enumerate(items) if n in kept]


def _pareto(points: list[tuple[float, ...]]) -> set[int]:
    order = sorted(range(len(points)), key=points.__getitem__)
    keep: list[int] = []
    for pos, i in enumerate(order):
        p = points[i]
        if any(dominates(points[j], p) for j in keep):
            continue
        # a later point within tolerance on the first axis may still dominate p
        k = pos + 1
        limit = p[0] * (1.0 + TOLERANCE) if p[0] >= 0 else p[0] * (1.0 - TOLERANCE)
        dominated = False
        while k < len(order) and points[order[k]][0] <= limit:
            if dominates(points[order[k]], p):
                dominated = True
                break
            k += 1
        if not dominated:
            keep.append(i)
    return set(keep)


def _pareto3(points: list[tuple[float, ...]]) -> set[int]:
    """`_pareto` for three axes: dominates(q, p) is q > p·(1 + tol) on no axis and q < p·(1 − tol)
    on one (as `dominates` compares, NaN included)."""
    order = sorted(range(len(points)), key=points.__getitem__)
    return _pareto3_sorted([points[i] for i in order], order)


def _pareto3_sorted(ordered: list[tuple[float, ...]], order: list[int]) -> set[int]:
    """`_pareto3` of points already sorted: `ordered[k]` is the point of index `order[k]`."""
    up, down = 1.0 + TOLERANCE, 1.0 - TOLERANCE
    front: list[tuple[float, ...]] = []
    keep: set[int] = set()
    n = len(order)
    for pos in range(n):
        p0, p1, p2 = ordered[pos]
        u0, u1, u2, d0, d1, d2 = p0 * up, p1 * up, p2 * up, p0 * down, p1 * down, p2 * down
        dominated = False
        for q0, q1, q2 in front:
            if not (q0 > u0 or q1 > u1 or q2 > u2) and (q0 < d0 or q1 < d1 or q2 < d2):
                dominated = True
                break
        if dominated:
            continue
        limit = u0 if p0 >= 0 else d0  # a later point within tolerance on the first axis
        k = pos + 1
        while k < n and ordered[k][0] <= limit:
            q0, q1, q2 = ordered[k]
            if not (q0 > u0 or q1 > u1 or q2 > u2) and (q0 < d0 or q1 < d1 or q2 < d2):
                dominated = True
                break
            k += 1
        if not dominated:
            front.append(ordered[pos])
            keep.add(order[pos])
    return keep


def balance(x: float) -> float:
    """(S/S_min)(E/E_min) = (1 + 1/x)(1 + x) at x = B/B_crit (McCandlish et al. 2018, eq. 2.11)."""
    return (1.0 + 1.0 / x) * (1.0 + x)


def rank(objective: str, cfg, b_crit: float) -> tuple[float, ...]:
    """The objective's sort key of a configuration: its measure, then its tie-breaks."""
    wall, cost, flops = axes(cfg)
    if objective == "balanced":
        return (balance(cfg.batch / b_crit), cost, wall)
    return axis_rank(objective, wall, cost, flops)


def axis_rank(objective: str, wall: float, cost: float, flops: float) -> tuple[float, float, float]:
    """The sort key of the three axes for an objective that minimises one of them: its axis,
    then the tie-breaks (not `balanced`, whose key is the batch's place on the frontier)."""
    if objective == "min_time":
        return (wall, cost, flops)
    if objective == "min_cost":
        return (cost, wall, flops)
    if objective == "min_flops":
        return (flops, wall, cost)
    raise ValueError(f"unknown objective {objective!r}")


def choose(objective: str, items: Sequence[T], config: Callable[[T], object], b_crit: float) -> T | None:
    """The objective's pick among `items`, taken from their non-dominated set; None when empty.
    Measures within 1e-12 of each other tie, and the tie-breaks decide."""
    return choose_among(objective, items, [axes(config(i)) for i in items], config, b_crit)


def choose_among(objective: str, items: Sequence[T], points: Sequence[tuple[float, ...]],
                 config: Callable[[T], object], b_crit: float) -> T | None:
    """`choose` with each item's axes given (`points[n]` = axes of `items[n]`): a search that grows
    its pool computes each point once."""
    if not items:
        return None
    kept = _pareto3(points) if len(points[0]) == 3 and all(len(p) == 3 for p in points) else _pareto(points)
    front = [items[n] for n in sorted(kept)]
    if len(front) == 1:
        return front[0]

    def key(i: T) -> tuple[float, ...]:
        r = rank(objective, config(i), b_crit)
        return (round(r[0], 12 - _magnitude(r[0])),) + r[1:]
    return min(front, key=key)


class Pool(Generic[T]):
    """A growing set of candidates and the objective's pick among them: `pick()` is
    `choose(objective, items, config, b_crit)` of the items added so far, with each item's axes
    and rank computed once, as it is added, and the axes kept sorted (a search picks after every
    layout it places)."""

    def __init__(self, objective: str, config: Callable[[T], object], b_crit: float):
        self.objective, self.config, self.b_crit = objective, config, b_crit
        self.items: list[T] = []
        self.points: list[tuple[float, float, float]] = []
        self.keys: list[tuple[float, ...]] = []
        self.sorted: list[tuple[tuple[float, float, float], int]] = []  # (point, index), as sorted() orders
        self.ordered: list[tuple[float, float, float]] = []  # the points of `sorted`, and their indices
        self.order: list[int] = []
        self.nan = False  # NaN has no order: then `choose` itself
        self.min_key: tuple[float, ...] | None = None  # the least rank of any item: no pick ranks before it
        self.min_wall = self.min_cost = _INF  # the least wall clock and cost of any item

    def add(self, new: Sequence[T]) -> None:
        for item in new:
            cfg = self.config(item)
            point = axes(cfg)
            n = len(self.items)
            self.items.append(item)
            self.points.append(point)
            r = rank(self.objective, cfg, self.b_crit)
            key = (round(r[0], 12 - _magnitude(r[0])),) + r[1:]
            self.keys.append(key)
            if self.min_key is None or key < self.min_key:
                self.min_key = key
            if point[0] < self.min_wall:
                self.min_wall = point[0]
            if point[1] < self.min_cost:
                self.min_cost = point[1]
            if point[0] != point[0] or point[1] != point[1] or point[2] != point[2]:
                self.nan = True
            else:
                at = bisect.bisect_right(self.sorted, (point, n))
                self.sorted.insert(at, (point, n))
                self.ordered.insert(at, point)
                self.order.insert(at, n)

    def pick(self) -> T | None:
        if not self.items:
            return None
        if self.nan:
            return choose_among(self.objective, self.items, self.points, self.config, self.b_crit)
        front = sorted(_pareto3_sorted(self.ordered, self.order))
        if len(front) == 1:
            return self.items[front[0]]
        return self.items[min(front, key=self.keys.__getitem__)]


def _magnitude(v: float) -> int:
    if 0.0 < v < _INF:  # the common case: floor(log10(v)) is already an int
        return _floor(_log10(v))
    return 0 if v == 0 or not _isfinite(v) else int(_floor(_log10(abs(v))))

