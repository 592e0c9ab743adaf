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

import heapq
from collections.abc import Callable, Sequence
from math import floor as _floor
from math import inf as _INF
from math import isfinite as _isfinite
from math import log10 as _log10
from typing import Any, Generic, TypeVar

from budgetdsl.plan.model import OBJECTIVES  # noqa: F401 - re-exported: the names are the plan language's
from budgetdsl.theory.frontier import balance

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

    Sorted by the axes, only a point before p, or one after it within TOLERANCE on the first axis,
    can dominate p. Each point is checked against the front found so far first (what usually
    settles it), and only a point no front point dominates against the dominated points too:
    dominance within TOLERANCE is not transitive (a ~ b ~ c with a ≻ c not holding), so a point
    can be dominated by a point that is itself off the front, and then it is off the front as
    well (issue 13: never recommend a run another candidate beats on every axis).
    O(n·|front|). Three axes (the solver's wall clock, cost, FLOPs) take an inlined `dominates`,
    the same comparisons term for term."""
    points = [tuple(key(i)) for i in items]
    if points and all(len(p) == 3 for p in points):
        kept = _pareto3(points)
    else:
        kept = _pareto(points)
    return [item for n, item in enumerate(items) if n in kept]


def _pareto(points: Sequence[tuple[float, ...]]) -> set[int]:
    """The indices of the points no other point dominates (any number of axes), by brute force."""
    return {i for i, p in enumerate(points) if not any(dominates(q, p) for q in points)}


def _pareto3(points: Sequence[tuple[float, ...]]) -> set[int]:
    """`_pareto` for three axes: dominates(q, p) is q > p·(1 + tol) on no axis and q < p·(1 − tol)
    on one (as `dominates` compares, NaN included)."""
    order = sorted(range(len(points)), key=points.__getitem__)
    return _pareto3_sorted([points[i] for i in order], order)


def _pareto3_sorted(ordered: list[tuple[float, ...]], order: list[int]) -> set[int]:
    """`_pareto3` of points already sorted: `ordered[k]` is the point of index `order[k]`."""
    up, down = 1.0 + TOLERANCE, 1.0 - TOLERANCE
    front: list[tuple[float, ...]] = []
    behind: list[tuple[float, ...]] = []  # the dominated points so far
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
        if not dominated:
            limit = u0 if p0 >= 0 else d0  # a later point within tolerance on the first axis
            k = pos + 1
            while k < n and ordered[k][0] <= limit:
                q0, q1, q2 = ordered[k]
                if not (q0 > u0 or q1 > u1 or q2 > u2) and (q0 < d0 or q1 < d1 or q2 < d2):
                    dominated = True
                    break
                k += 1
        if not dominated:
            for q0, q1, q2 in behind:
                if not (q0 > u0 or q1 > u1 or q2 > u2) and (q0 < d0 or q1 < d1 or q2 < d2):
                    dominated = True
                    break
        if dominated:
            behind.append(ordered[pos])
        else:
            front.append(ordered[pos])
            keep.add(order[pos])
    return keep


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

    def key(i: T) -> tuple[float, ...]:
        return rank_key(rank(objective, config(i), b_crit))
    if all(len(p) == 3 and p[0] == p[0] and p[1] == p[1] and p[2] == p[2] for p in points):
        # The least key whose point no point dominates (ties to the first item): the items in
        # key order, each checked until one is on the front — no front of them all is built.
        keys = [key(i) for i in items]
        ranked = sorted(range(len(items)), key=lambda n: (keys[n], n))
        for n in ranked:
            if not _dominated(points[n], points):
                return items[n]
        return items[ranked[0]]  # every point dominated: a cycle of near-ties (TOLERANCE), all alike
    kept = _pareto3(points) if len(points[0]) == 3 and all(len(p) == 3 for p in points) else _pareto(points)
    front = [items[n] for n in sorted(kept)] or list(items)  # none: a cycle of near-ties, all alike
    if len(front) == 1:
        return front[0]
    return min(front, key=key)


def _dominance(p, u, d, points, flags: list[bool] | None = None) -> tuple[bool, list[int]]:
    """(whether a point of `points` dominates p, the positions of the points p dominates — of
    those not flagged, with `flags`): `Pool`'s two-way comparison on floats, u and d = p·(1 ± tol)."""
    up, down = 1.0 + TOLERANCE, 1.0 - TOLERANCE
    p0, p1, p2 = p
    u0, u1, u2 = u
    d0, d1, d2 = d
    dominated, off = False, []
    for j, (q0, q1, q2) in enumerate(points):
        # q dominates p: q > p·(1 + tol) on no axis, q < p·(1 − tol) on one (NaN: never)
        if not dominated and not (q0 > u0 or q1 > u1 or q2 > u2) and (q0 < d0 or q1 < d1 or q2 < d2):
            dominated = True
        # p dominates q, compared as `dominates(p, q)`: against q·(1 ± tol)
        if (flags is None or not flags[j]) and not (p0 > q0 * up or p1 > q1 * up or p2 > q2 * up) and \
                (p0 < q0 * down or p1 < q1 * down or p2 < q2 * down):
            off.append(j)
    return dominated, off


def _dominated(p: tuple[float, ...], points: Sequence[tuple[float, ...]]) -> bool:
    """Whether a point of `points` dominates p (three axes, `dominates` term by term)."""
    up, down = 1.0 + TOLERANCE, 1.0 - TOLERANCE
    p0, p1, p2 = p
    u0, u1, u2, d0, d1, d2 = p0 * up, p1 * up, p2 * up, p0 * down, p1 * down, p2 * down
    for q0, q1, q2 in points:
        if not (q0 > u0 or q1 > u1 or q2 > u2) and (q0 < d0 or q1 < d1 or q2 < d2):
            return True
    return False


class Pool(Generic[T]):
    """A growing set of candidates and the objective's pick among them: `pick()` is
    `choose(objective, items, config, b_crit)` of the items added so far.

    The search adds a layout's candidates and asks for the pick thousands of times on a large space
    (a GPU range of thousands of counts: a pool of tens of thousands of configurations, most of them
    on the front). Dominance by a pool item is for good (the pool only grows), so each item's
    "dominated" flag is kept up to date as items arrive — a new item is compared once with the
    pool, both ways — and the pick is the least key among the items never dominated (a heap, the
    dominated items dropped from its top as met). Each `add` is O(pool), with numpy once the pool
    is large and its front long (imported only then: a short front is compared in Python, and the
    whole pool only where no front item dominates the new point)."""

    _VECTOR = 256  # pool size from which the comparisons run in numpy
    _FRONT_LOOP = 32  # a front of at most this many items is compared in Python (numpy's calls cost more)

    def __init__(self, objective: str, config: Callable[[T], Any], b_crit: float, others: Sequence[str] = ()):
        self.objective, self.config, self.b_crit = objective, config, b_crit
        self.objectives = (objective, *others)  # `others`: objectives picked from the same items too
        self.items: list[T] = []
        self.points: list[tuple[float, float, float]] = []
        self.keys: list[tuple[float, ...]] = []  # the objective's key of each item
        self.dominated: list[bool] = []
        # per objective: (key, index) heaps, the least key first, ties to the first added
        self._heaps: dict[str, list[tuple[tuple[float, ...], int]]] = {o: [] for o in self.objectives}
        self.min_key: dict[str, tuple[float, ...] | None] = {o: None for o in self.objectives}
        self._array: Any = None  # numpy (capacity, 3) of the points, once the pool is large
        self._front: Any = None  # then the unflagged items' points and indices, packed, and their count
        self._front_ids: list[int] | None = None  # before: the unflagged items' indices, while few
        self.nan = False  # NaN has no order: then `choose` itself
        # min_key: the least key of any item, per objective: no pick ranks before it
        self.min_wall = self.min_cost = _INF  # the least wall clock and cost of any item

    def add(self, new: Sequence[T]) -> None:
        for item in new:
            cfg = self.config(item)
            point = axes(cfg)
            n = len(self.items)
            self.items.append(item)
            self.points.append(point)
            wall, cost, flops = point
            for o in self.objectives:  # rank(o, cfg, b_crit), its measure rounded as `choose` rounds it
                if o == "min_time":
                    key = (rounded(wall), cost, flops)
                elif o == "min_cost":
                    key = (rounded(cost), wall, flops)
                elif o == "min_flops":
                    key = (rounded(flops), wall, cost)
                else:
                    r0 = balance(cfg.batch / self.b_crit)
                    key = (rounded(r0), cost, wall)
                if o is self.objective:
                    self.keys.append(key)
                least = self.min_key[o]
                if least is None or key < least:
                    self.min_key[o] = key
                heapq.heappush(self._heaps[o], (key, n))
            if point[0] < self.min_wall:
                self.min_wall = point[0]
            if point[1] < self.min_cost:
                self.min_cost = point[1]
            if point[0] != point[0] or point[1] != point[1] or point[2] != point[2]:
                self.nan = True
            self.dominated.append(self._compare(point, n))

    def _compare(self, p: tuple[float, float, float], n: int) -> bool:
        """Whether a pool item (of the first n) dominates p; marks the items p dominates."""
        up, down = 1.0 + TOLERANCE, 1.0 - TOLERANCE
        p0, p1, p2 = p
        u0, u1, u2, d0, d1, d2 = p0 * up, p1 * up, p2 * up, p0 * down, p1 * down, p2 * down
        if n >= self._VECTOR:
            if self._array is None:
                dominated = self._compare_front(p, n, (u0, u1, u2), (d0, d1, d2))
                if dominated is not None:
                    return dominated
            return self._compare_array(p, n, (u0, u1, u2), (d0, d1, d2))
        flags = self.dominated
        dominated, off = _dominance(p, (u0, u1, u2), (d0, d1, d2), self.points[:n], flags)
        for j in off:
            flags[j] = True
        return dominated

    def _compare_front(self, p, n, u, d) -> bool | None:
        """`_compare` of a large pool whose front is short (at most _FRONT_LOOP items), without
        numpy: p against the front (the unflagged items' indices, kept in order), and only when no
        front item dominates p, against every item, as `_compare_array`; None (nothing done) once
        the front is longer: numpy from then on (its arrays built from the points and flags)."""
        flags, points = self.dominated, self.points
        ids = self._front_ids
        if ids is None:
            ids = [j for j in range(n) if not flags[j]]
        if len(ids) > self._FRONT_LOOP:
            self._front_ids = None
            return None
        dominated, off = self._front_loop(p, [points[j] for j in ids], n, u, d)
        if off:
            for k in off:
                flags[ids[k]] = True
            gone = set(off)
            ids = [j for k, j in enumerate(ids) if k not in gone]
        if not dominated:
            ids.append(n)
        self._front_ids = ids
        return dominated

    def _compare_array(self, p, n, u, d) -> bool:
        """`_compare` in numpy: p against the front (the unflagged items, kept packed), and only
        when no front item dominates p, against every item (a flagged one may, near a tie)."""
        import numpy as np

        a = self._array
        if a is None or len(a) < n + 1:  # grow by doubling, the points so far copied in
            grown = np.empty((max(2 * self._VECTOR, 2 * (n + 1)), 3))
            grown[:n] = self.points[:n] if a is None else a[:n]
            a = self._array = grown
        if self._front is None:  # the unflagged items: (points, indices), packed, and how many
            idx = [j for j in range(n) if not self.dominated[j]]
            pts = np.empty((max(2 * self._VECTOR, 2 * len(idx)), 3))
            ids = np.empty(len(pts), dtype=np.int64)
            pts[:len(idx)], ids[:len(idx)] = a[idx], idx
            self._front = [pts, ids, len(idx)]
        pts, ids, f = self._front
        if f <= self._FRONT_LOOP:  # a short front (the common case): the same tests on floats, in Python
            dominated, off = self._front_loop(p, pts[:f].tolist(), n, u, d)
            over = None
            if off:
                over = np.zeros(f, dtype=bool)
                over[off] = True
        else:
            dominated, over = self._front_array(np, p, n, u, d, pts[:f], a)
        if over is not None and over.any():
            flags = self.dominated
            for j in ids[:f][over].tolist():
                flags[j] = True
            keep = ~over
            m = int(keep.sum())
            pts[:m], ids[:m] = pts[:f][keep], ids[:f][keep]
            f = m
        a[n] = p
        if not dominated:
            if f == len(pts):
                pts = np.concatenate([pts, np.empty_like(pts)])
                ids = np.concatenate([ids, np.empty_like(ids)])
            pts[f], ids[f] = p, n
            f += 1
        self._front = [pts, ids, f]
        return dominated

    @staticmethod
    def _front_array(np, p, n, u, d, q, a):
        """(whether an item dominates p, the front items p dominates): `q` the front's points, `a`
        every item's, numpy."""
        up, down = 1.0 + TOLERANCE, 1.0 - TOLERANCE
        with np.errstate(invalid="ignore"):
            # q dominates p: q > p·(1 + tol) on no axis, q < p·(1 − tol) on one (NaN: never)
            by = ~((q[:, 0] > u[0]) | (q[:, 1] > u[1]) | (q[:, 2] > u[2])) & \
                ((q[:, 0] < d[0]) | (q[:, 1] < d[1]) | (q[:, 2] < d[2]))
            # p dominates q, compared as `dominates(p, q)`: against q·(1 ± tol)
            over = ~((p[0] > q[:, 0] * up) | (p[1] > q[:, 1] * up) | (p[2] > q[:, 2] * up)) & \
                ((p[0] < q[:, 0] * down) | (p[1] < q[:, 1] * down) | (p[2] < q[:, 2] * down))
            dominated = bool(by.any())
            if not dominated:  # an item off the front may still dominate p (TOLERANCE is not transitive)
                q = a[:n]
                dominated = bool((~((q[:, 0] > u[0]) | (q[:, 1] > u[1]) | (q[:, 2] > u[2]))
                                  & ((q[:, 0] < d[0]) | (q[:, 1] < d[1]) | (q[:, 2] < d[2]))).any())
        return dominated, over

    def _front_loop(self, p, front: list, n: int, u, d) -> tuple[bool, list[int]]:
        """`_front_array` on floats (the front's points as lists, `_dominance`): the same
        comparisons; the positions in `front` of the items p dominates."""
        dominated, off = _dominance(p, u, d, front)
        if not dominated:  # an item off the front may still dominate p (TOLERANCE is not transitive)
            dominated = _dominated(p, self.points[:n])
        return dominated, off

    def remapped(self, new: Callable[[T], T]) -> Pool[T]:
        """This pool with each item replaced by `new(item)`, an item of the same configuration (the
        points, keys and flags are the configurations'; nothing is compared again)."""
        out = object.__new__(Pool)
        out.__dict__.update(self.__dict__)
        out.items = [new(item) for item in self.items]
        out.points, out.keys, out.dominated = list(self.points), list(self.keys), list(self.dominated)
        out._heaps = {o: list(h) for o, h in self._heaps.items()}
        out.min_key = dict(self.min_key)
        out._array = None if self._array is None else self._array.copy()
        out._front = None if self._front is None else [self._front[0].copy(), self._front[1].copy(), self._front[2]]
        out._front_ids = None if self._front_ids is None else list(self._front_ids)
        return out

    def pick(self, objective: str | None = None) -> T | None:
        """`choose(objective, items, ...)`: the pool's objective, or one of `others`."""
        objective = objective or self.objective
        if not self.items:
            return None
        if self.nan:
            return choose_among(objective, self.items, self.points, self.config, self.b_crit)
        heap, flags = self._heaps[objective], self.dominated
        while heap and flags[heap[0][1]]:
            heapq.heappop(heap)
        if not heap:  # every item dominated by another: a cycle of near-ties (TOLERANCE)
            return choose_among(objective, self.items, self.points, self.config, self.b_crit)
        return self.items[heap[0][1]]

    def tied(self, item: T) -> list[T]:
        """The items on the front whose key equals `item`'s (the pick's exact ties), in the order added."""
        n = next(i for i, other in enumerate(self.items) if other is item)
        return [self.items[i] for i, k in enumerate(self.keys) if k == self.keys[n] and not self.dominated[i]]

    def front(self) -> list[T]:
        """The items no pool item dominates, in the order they were added (`pareto` of the items)."""
        if self.nan:
            return pareto(self.items, lambda i: axes(self.config(i)))
        return [item for item, off in zip(self.items, self.dominated) if not off]


def rank_key(r: tuple[float, ...]) -> tuple[float, ...]:
    """A rank with its first measure `rounded`: what `choose` orders configurations by."""
    return (rounded(r[0]),) + tuple(r[1:])


def rounded(v: float) -> float:
    """A measure at 12 significant digits, as every objective compares it: float noise in the last
    digits ties (the next measure then decides) instead of deciding."""
    if 0.0 < v < _INF:  # the common case: floor(log10(v)) is already an int
        return round(v, 12 - _floor(_log10(v)))
    return round(v, 12 - (0 if v == 0 or not _isfinite(v) else int(_floor(_log10(abs(v))))))

