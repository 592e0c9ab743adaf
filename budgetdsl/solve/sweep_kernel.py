"""The sweep kernel: many rows of one plan placed together, each row equal to `solve()` of that
row's plan (docs/solver.md, "Sweeps").

A sweep of limits, the target, B_crit or the objective leaves the layout × GPU-count pairs alone,
so they are listed once and every (pair, row) is placed at once. Every formula and rule is the
solver's own function on numpy arrays (step time, a configuration's numbers and violations, the
limits' intervals, the target, the splits, place's key and walk, the search's bounds, conflicts and
binding rules: docs/design.md, "where a formula lives"); this module batches the rows, takes
`place`'s and `choose`'s picks over them, and prunes pairs by the search's bounds. A row it cannot
decide exactly goes back to `solve()` (`sweep_rows.solve_row`). numpy is imported here, and this
module only by the sweep command (`budgetdsl` imports no numpy).
"""

from __future__ import annotations

import itertools
import math
import os
from collections.abc import Iterator
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any

from budgetdsl.cost.cost_model import CostModel, Split
from budgetdsl.plan.diagnostics import PlanError
from budgetdsl.solve.cache import SolveCache
from budgetdsl.solve.objectives import OBJECTIVES, TOLERANCE, rank
from budgetdsl.solve.placement import (
    _BOUND_MARGIN,
    _DIVISOR_SCAN,
    INF,
    LIMIT_NAMES,
    TIME_LIMITS,
    WALL_EVALUATIONS,
    WALL_SIZES,
    clip_pieces,
    hull,
    least_accumulation,
    least_sequences,
    limit_interval,
    micro_limit,
    most_sequences,
    no_room,
    numbers,
    objective_target,
    open_end,
    piece_accumulations,
    piece_sizes,
    place_key,
    quadratic_roots,
    size_pieces,
    sizes_matter,
    split_candidates,
    violations,
    walk_out,
    wall_floor,
    wall_limit,
    wall_lines,
)
from budgetdsl.theory import closed_forms_generated as cf


def _import_numpy():
    """numpy, loaded with its BLAS on one thread: the kernel does no linear algebra, and starting
    OpenBLAS's thread pool is much of numpy's import. The variable is read once, when the library
    loads, so the caller's environment is restored; a user's own setting is left alone, and a numpy
    already imported is returned as it is."""
    names = ("OPENBLAS_NUM_THREADS",)
    added = [n for n in names if n not in os.environ]
    for n in added:
        os.environ[n] = "1"
    try:
        import numpy
    finally:
        for n in added:
            os.environ.pop(n, None)
    return numpy


if TYPE_CHECKING:
    import numpy as np

    from budgetdsl.plan.model import Plan
else:
    np = _import_numpy()

# The paths whose values the kernel models (anything else: the scalar path).
BUDGET = ("deadline", "flops", "gpu_hours", "usd", "usd_per_gpu_hour")
TARGET = ("tokens", "at_batch", "min_tokens")
SUPPORTED = {*(f"budget.{k}" for k in BUDGET), *(f"target.{k}" for k in TARGET), "noise.b_crit",
             "noise.uncertainty", "objective"}
CHUNK = 16384  # rows placed together (memory: a few arrays of CHUNK × candidates floats)
WALK = 24  # steps of `place`'s outward walk done here; a row that needs more: the scalar path
EXACT = float(2 ** 52)  # integers (sequences, steps) beyond this leave the exact range of a float
KINDS = ("balanced", "min_time", "min_flops")  # placements per pair (min_cost places as min_time)
_KIND_OF = {"balanced": 0, "min_time": 1, "min_cost": 1, "min_flops": 2}


@dataclass(slots=True)
class Pair:
    """One layout × GPU-count pair of the search space, with what a placement reads of its model."""

    cm: CostModel
    gpus: int
    dp: int
    seq_len: int
    per: float  # tokens per sequence per replica: dp·s
    f: float
    rate: float
    c: float
    micro_max: int
    pipeline: bool
    split: Split


_STEP = ("per_sequence", "window", "bubble_k", "dp_per_micro", "reduce", "gather", "fixed", "latency")


@dataclass(slots=True)
class Steps:
    """The pairs' `throughput.StepCost` fields per element (`zero3` a boolean array): what
    `throughput.step_seconds` reads of a step, on arrays."""

    per_sequence: np.ndarray
    window: np.ndarray
    bubble_k: np.ndarray
    zero3: np.ndarray | bool
    dp_per_micro: np.ndarray
    reduce: np.ndarray
    gather: np.ndarray
    overlap: float | None  # hardware.overlap: the same for every pair of a plan
    fixed: np.ndarray
    latency: np.ndarray
    gather_share: float  # the stack's (hardware.stack): the same for every pair of a plan


@dataclass(slots=True)
class Block:
    """Pair constants per element: many (pair, row) placements evaluated in one pass. The fields a
    cost model has go by its names (`cost_model.step_time` and `placement.numbers` read them)."""

    gpus: np.ndarray
    data_parallel: np.ndarray
    seq_len: int  # the plan's, every pair's
    per: np.ndarray  # tokens per sequence per replica
    flops_per_token: np.ndarray
    rate: np.ndarray
    fixed_time: np.ndarray
    micro_max: np.ndarray
    pipeline: np.ndarray
    mode: str  # declared | predicted: the same for every pair of a plan
    _step: Steps | None
    pair: np.ndarray  # each element's pair (its index in the list `block` was given)


def block(pairs: list[Pair], which: np.ndarray) -> Block:
    """The constants of pairs[which[k]] for every element k."""
    def col(get, dtype=float):
        return np.array([get(p) for p in pairs], dtype=dtype)[which]
    mode = pairs[0].cm.mode
    step = None
    if pairs[0].cm._step is not None:
        steps = [p.cm._step for p in pairs if p.cm._step is not None]  # every pair's: modelled or anchored
        zero3 = np.array([st.zero3 for st in steps], dtype=bool)[which]
        kinds = set(zero3.tolist())  # one kind: a plain bool (throughput.exposed_dp computes one side)
        step = Steps(**{n: np.array([getattr(st, n) for st in steps])[which] for n in _STEP},
                     zero3=kinds.pop() if len(kinds) == 1 else zero3, overlap=steps[0].overlap,
                     gather_share=steps[0].gather_share)
    return Block(col(lambda p: p.gpus), col(lambda p: p.dp), pairs[0].seq_len, col(lambda p: p.per),
                 col(lambda p: p.f), col(lambda p: p.rate), col(lambda p: p.c), col(lambda p: p.micro_max, np.int64),
                 col(lambda p: p.pipeline, bool), mode, step, which)


# -- the plan: its pairs --------------------------------------------------------------------------

def plan_pairs(plan, cache: SolveCache) -> list[Pair] | None:
    """The pairs `solve()` chooses among (None: a plan the kernel does not model): the search
    space (`search_space.search_space`) of a searched layout; one cost model per launchable GPU
    count of a pinned one (`solve_context.gpu_counts`); cost models kept in the sweep's `cache`."""
    from budgetdsl.cost.cost_model import plan_split
    from budgetdsl.solve.context import Context, cost_model, gpu_counts
    from budgetdsl.solve.layout_search import concrete

    run = plan.run
    if run is not None and (run.batch is not None or run.batch_schedule is not None):
        return None  # a pinned batch or a ramp: compared, not searched (the scalar path)
    key = cache.model_key(plan)
    base = concrete(plan, None)
    if plan.hardware.searched():
        from budgetdsl.solve.search_space import search_space

        flash = plan.hardware.flash_attention
        cms = []
        for pr in search_space(plan, cache).pairs:
            c = pr.layout
            ctx = Context(base, None, None, None, "", split=c.split(flash),  # type: ignore[arg-type]
                          key=key, cache=cache)
            cms.append(cost_model(ctx, pr.gpus))
    else:
        ctx = Context(base, None, None, None, "", key=key, cache=cache)  # type: ignore[arg-type]
        split = plan_split(base)
        cms = [cost_model(ctx, g, split) for g in gpu_counts(plan)]
    return [Pair(cm, cm.gpus, cm.data_parallel, cm.seq_len, float(cm.seq_len * cm.data_parallel),
                 cm.flops_per_token, cm.rate, cm.fixed_time, cm.micro_batch_max, cm.split.pipeline_parallel > 1,
                 cm.split) for cm in cms]


# -- evaluation, vectorized ---------------------------------------------------------------------

@dataclass(slots=True)
class Rows:
    """The rows of one chunk: B_crit, E_min and the limits (NaN: absent), the objective."""

    bc: np.ndarray
    em: np.ndarray
    deadline: np.ndarray
    flops: np.ndarray
    gpu_hours: np.ndarray
    usd: np.ndarray
    price: np.ndarray
    objective: np.ndarray  # index into OBJECTIVES

    def __len__(self) -> int:
        return len(self.bc)

    @property
    def b_crit(self) -> np.ndarray:  # a frontier's names (placement reads them)
        return self.bc

    @property
    def e_min(self) -> np.ndarray:
        return self.em


@dataclass(slots=True)
class Config:
    """Configurations elementwise: the split (micro-batch, accumulation) and its exact numbers
    (placement.evaluate's). What an evaluation, a placement and a row's pick have in common."""

    micro: np.ndarray
    accum: np.ndarray
    batch: np.ndarray
    steps: np.ndarray
    wall: np.ndarray
    gh: np.ndarray
    cost: np.ndarray  # usd with a price, else GPU-hours
    flops: np.ndarray


CONFIG = tuple(f.name for f in fields(Config))


@dataclass(slots=True)
class Evals(Config):
    """Configurations evaluated elementwise."""

    ok: np.ndarray  # the split exists (1 ≤ micro ≤ cap) and is feasible
    big: np.ndarray  # beyond the exact integer range: the row goes to the scalar path


def _evaluate(p: Block, r: Rows, micro, accum, exists) -> Evals:
    """placement.evaluate, elementwise (micro, accum: float arrays of whole numbers): its numbers
    (`placement.numbers`), then its `violations`."""
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        _, batch, steps, _, flops, wall, gh = numbers(p, r.bc, r.em, micro, accum, np)
        ok = exists & (batch <= EXACT) & (steps <= EXACT) & np.isfinite(wall)
        big = exists & ~ok
        usd = gh * r.price  # NaN without a price: no usd limit applies
        for over in violations(r, micro, p.micro_max, wall, flops, gh, usd):
            ok &= ~over
        cost = np.where(np.isnan(r.price), gh, usd)
    return Evals(micro, accum, batch, steps, wall, gh, cost, flops, ok=ok, big=big)


class _Divisors:
    """placement.largest_divisor_at_most(n, cap) for arrays of n: a sieve for small n, the
    scalar's own downward scan (vectorized) beyond; the scan's reach (_DIVISOR_SCAN candidates
    below min(n, cap)) applied as the scalar scan applies it."""

    SIEVE = 1 << 17

    @staticmethod
    def _sieved(ns: np.ndarray, cs: np.ndarray) -> np.ndarray:
        """The largest divisor ≤ cs of each ns (ns < SIEVE): one sieve pass over k = 2, 3, ...
        upward (table[m] = the largest k so far that divides m), each query read from the table
        as k reaches its cap; no table kept per cap."""
        size = 1 << max(10, int(ns.max()).bit_length())
        table = np.ones(size, dtype=np.int64)
        order = np.argsort(cs, kind="stable")
        caps, starts = np.unique(cs[order], return_index=True)
        out = np.empty(len(ns), dtype=np.int64)
        k = 2
        for c, a, b in zip(caps.tolist(), starts.tolist(), [*starts[1:].tolist(), len(ns)]):
            while k <= min(c, size - 1):
                table[k::k] = k
                k += 1
            sel = order[a:b]
            out[sel] = table[ns[sel]]
        return out

    def __call__(self, n: np.ndarray, cap: np.ndarray) -> np.ndarray:
        k0 = np.minimum(n, cap)
        small = (n < self.SIEVE) & (n > cap)  # n ≤ cap divides itself
        d = k0.copy()
        if small.any():
            d[small] = self._sieved(n[small], np.broadcast_to(cap, n.shape)[small])
        big = np.flatnonzero(n >= self.SIEVE)
        if big.size:  # the scan itself: k = min(n, cap) downwards
            nb, k = n[big], k0[big].copy()
            found = np.ones(big.size, dtype=np.int64)
            todo = np.ones(big.size, bool)
            for _ in range(_DIVISOR_SCAN):
                todo &= k > 1
                if not todo.any():
                    break
                hit = todo & (nb % np.maximum(k, 1) == 0)
                found[hit] = k[hit]
                todo &= ~hit
                k -= 1
            d[big] = found
        return np.where((d > 1) & (d >= k0 - (_DIVISOR_SCAN - 1)), d, 1)


def _splits(p: Block, n: np.ndarray, micro_fixed: int | None, divisors: _Divisors):
    """placement.split_candidates of n sequences per replica elementwise: a list of (micro, accum,
    exists) float arrays, a split that exists nowhere, or only where an earlier one is the same,
    left out."""
    ni = n.astype(np.int64)
    cap = np.broadcast_to(p.micro_max, ni.shape)
    splits = split_candidates(ni, cap, micro_fixed, p.pipeline, divisors, np)
    out = [(np.broadcast_to(m, ni.shape).astype(float), np.broadcast_to(a, ni.shape).astype(float),
            np.broadcast_to(e, ni.shape)) for m, a, e in splits]
    kept = out[:1]
    for m, acc, e in out[1:]:
        same = ~e
        for km, ka, ke in kept:
            same |= ke & (km == m) & (ka == acc)
        if not same.all():
            kept.append((m, acc, e))
    return kept


@dataclass(slots=True)
class Placed(Config):
    """One pair's placement for one objective, elementwise: the best configuration found."""

    has: np.ndarray  # a feasible configuration was found
    unsure: np.ndarray  # the kernel cannot decide this row exactly
    target: np.ndarray
    sized: np.ndarray  # placed in an interval a pipeline's micro-batch sizes widened (placement._sized)


def _intervals(p: Block, r: Rows):
    """placement.limit_intervals on arrays (`limit_interval` of each limit, intersected):
    (lo, hi, empty, {name: (lo, hi, present, nonempty)})."""
    R = len(r)
    ivs = {}
    lo = p.per + np.zeros(R)  # min_batch: (dp·s, INF)
    hi = np.full(R, INF)
    empty = np.zeros(R, bool)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        present = ~np.isnan(r.flops)
        _, fhi, fok = limit_interval("flops", p, r, r.flops, np)
        fok &= present
        ivs["flops"] = (np.zeros(R), fhi, present, fok)
        empty |= present & ~fok
        lo = np.where(fok, np.maximum(lo, 0.0), lo)
        hi = np.where(fok, np.minimum(hi, fhi), hi)
        given = {"deadline": ~np.isnan(r.deadline), "gpu_hours": ~np.isnan(r.gpu_hours),
                 "usd": ~np.isnan(r.usd) & ~np.isnan(r.price)}
        # the other limits' interval, and the least wall bound of the time limits given
        b_lo, b_hi, b_ok, bound = lo, hi, ~empty, np.full(R, np.nan)
        for name in TIME_LIMITS:
            wall = wall_limit(name, getattr(r, name), r.price, p.gpus)
            ilo, ihi, iok = limit_interval(name, p, r, wall, np)
            iok &= given[name]
            ivs[name] = (ilo, ihi, given[name], iok)
            empty |= given[name] & ~iok
            lo = np.where(iok, np.maximum(lo, ilo), lo)
            hi = np.where(iok, np.minimum(hi, ihi), hi)
            bound = np.where(given[name], np.fmin(bound, wall), bound)
        sized = None  # a pipeline's micro-batch sizes (placement._sized), where it has a time limit
        has = p.pipeline & ~np.isnan(bound) & b_ok & (b_lo <= b_hi) & (empty | (lo != b_lo) | (hi != b_hi))
        if p._step is not None and has.any():  # on those elements only (a few of the block)
            idx = np.flatnonzero(has)
            h_lo, h_hi, h_ok, pieces = size_pieces(_take(p, idx), _subset(r, idx), bound[idx], p.micro_max[idx],
                                                   b_lo[idx], b_hi[idx], np)
            sized = (_scatter(h_lo, idx, R, np.nan), _scatter(h_hi, idx, R, np.nan), _scatter(h_ok, idx, R, False),
                     tuple((b, _scatter(lo_, idx, R, np.nan), _scatter(hi_, idx, R, np.nan),
                            _scatter(ok, idx, R, False)) for b, lo_, hi_, ok in pieces))
    return lo, hi, empty, ivs, sized


def _better(key_new, key_old):
    """Lexicographic key_new < key_old, elementwise (keys: tuples of arrays)."""
    less = np.zeros(key_new[0].shape, bool)
    equal = np.ones(key_new[0].shape, bool)
    for a, b in zip(key_new, key_old):
        less |= equal & (a < b)
        equal &= a == b
    return less, equal


@dataclass(slots=True)
class _Start:
    """`place`'s start, elementwise: the objective's target, clipped into [lo, hi], the target and
    the interval in sequences per replica, its floor and ceiling, which elements are placed (`go`)
    and which the kernel cannot decide."""

    target: np.ndarray
    clipped: np.ndarray
    n_t: np.ndarray
    n_lo: np.ndarray
    n_hi: np.ndarray
    nf: np.ndarray
    nc: np.ndarray
    go: np.ndarray
    unsure: np.ndarray
    sized: np.ndarray  # where a pipeline's micro-batch sizes widen the interval (placement._sized)
    pieces: tuple  # their pieces, (b, low, high, nonempty) each


def _start(p: Block, r: Rows, kind: str, lo, hi, empty, sized, micro_fixed) -> _Start:
    """placement.place up to its candidates (placement.objective_target, the interval — widened by
    a pipeline's micro-batch sizes where they reach nearer the target, `sized` — its integer ends)."""
    R = len(r)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        target = objective_target(kind, p, r, np) + np.zeros(R)  # a new array, also where a float
        unsure = np.zeros(R, bool)
        r_ok = ~empty & (lo <= hi)
        clipped = np.minimum(np.maximum(target, lo), hi)
        use, pieces = np.zeros(R, bool), ()
        if sized is not None:
            h_lo, h_hi, h_ok, pieces = sized
            use = sizes_matter(target, lo, hi, r_ok, h_lo, h_hi, h_ok, np)
            if use.any():
                clipped = np.where(use, clip_pieces(target, [(lo, hi, r_ok), *(q[1:] for q in pieces)], np), clipped)
                w_lo, w_hi, _ = hull(lo, hi, r_ok, h_lo, h_hi, h_ok, np)
                lo, hi = np.where(use, w_lo, lo), np.where(use, w_hi, hi)
        go = (r_ok | use) & ~no_room(p.micro_max, micro_fixed)
        n_t = clipped / p.per
        n_lo = least_sequences(lo, p.per, np)
        finite = hi < INF
        n_hi = np.where(finite, most_sequences(hi, p.per, np), open_end(n_lo, n_t, np))
        go &= n_lo <= n_hi
        unsure |= go & (n_hi > EXACT)
        go &= ~unsure
        nf = np.minimum(np.maximum(np.floor(n_t), n_lo), n_hi)
        nc = np.minimum(np.maximum(np.ceil(n_t), n_lo), n_hi)
    return _Start(target, clipped, n_t, n_lo, n_hi, nf, nc, go, unsure, use & go, pieces)


def _place(p: Block, r: Rows, kind: str, lo, hi, empty, sized, micro_fixed, divisors, cache) -> Placed:
    """placement.place for one objective, elementwise: the target's neighbours and the interval's
    ends, every split of each at once (`_least`), a pipeline's micro-batch sizes where they widen
    the interval (`_sizes`), then the outward walk (`_walk`)."""
    R = len(r)
    st = _start(p, r, kind, lo, hi, empty, sized, micro_fixed)
    fill = np.ones(R)

    def evaluated(n, active):
        """The splits of n sequences per replica, evaluated (stacked: one row per split)."""
        n = np.where(active, n, fill)
        ck = n.tobytes()
        ev = cache.get(ck)
        if ev is None:
            splits = _splits(p, n, micro_fixed, divisors)
            ev = cache[ck] = _evaluate(p, r, np.stack([x[0] for x in splits]), np.stack([x[1] for x in splits]),
                                       np.stack([x[2] for x in splits]))
        return ev

    go, nf, nc = st.go, st.nf, st.nc
    slots = [(nf, go, True), (nc, go & (nc != nf), True), (st.n_lo, go, False), (st.n_hi, go, False)]
    evs = [(evaluated(n, act), n, act, nb) for n, act, nb in slots]
    best, has, hit = _least(kind, r, st, evs)
    weigh = _Weigh(r, kind, st, best, has)
    sizes = st.sized & ~hit
    if sizes.any():
        hit = hit | _sizes(p, r, st, weigh, sizes, micro_fixed)
    walk = go & ~hit
    if walk.any():
        _walk(p, r, st, weigh, walk, micro_fixed, divisors)
    best = weigh.best
    has = ~np.isnan(best[0]) & go
    if kind == "min_time" and p._step is not None:
        _wall_check(p, r, st, best, has, micro_fixed)
    return Placed(**dict(zip(CONFIG, best)), has=has, unsure=st.unsure, target=st.target, sized=st.sized)


class _Weigh:
    """The best configuration so far of every element, and its `place_key`: splits evaluated
    weigh against it as place's `_better` weighs them (a different split with an equal key: the
    scalar order decides, unsure)."""

    def __init__(self, r: Rows, kind: str, st: _Start, best: list, has) -> None:
        self.r, self.kind, self.st, self.best = r, _KIND_OF[kind], st, best
        with np.errstate(divide="ignore", invalid="ignore"):
            self.key = tuple(np.where(has, k, np.inf) for k in place_key(
                self.kind, r.bc, st.clipped, best[2], best[4], best[7], None, best[1], np))

    def __call__(self, ev: Evals, active) -> np.ndarray:
        """`ev` where `active`: the elements where it is feasible."""
        best, unsure = self.best, self.st.unsure
        okk = ev.ok & active
        np.logical_or(unsure, active & ev.big, out=unsure)
        with np.errstate(divide="ignore", invalid="ignore"):
            key = place_key(self.kind, self.r.bc, self.st.clipped, ev.batch, ev.wall, ev.flops, None, ev.accum, np)
        less, equal = _better(key, self.key)
        had = ~np.isnan(best[0])
        take = okk & (~had | less)
        np.logical_or(unsure, okk & had & equal & ((ev.micro != best[0]) | (ev.accum != best[1])), out=unsure)
        self.best = [np.where(take, getattr(ev, f), b) for f, b in zip(CONFIG, best)]
        self.key = tuple(np.where(take, k, b) for k, b in zip(key, self.key))
        return okk


def _sizes(p: Block, r: Rows, st: _Start, weigh: _Weigh, active, micro_fixed) -> np.ndarray:
    """placement.place's weighing of a pipeline's micro-batch sizes (`_piece_splits`): each
    piece's sizes at the two accumulation counts nearest the clipped target; where one is feasible.
    Evaluated on the active elements only (a few of the block), weighed on all."""
    R = len(r)
    idx = np.flatnonzero(active)
    q, rq, clipped = _take(p, idx), _subset(r, idx), st.clipped[idx]
    found = np.zeros(R, bool)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        for b0, p_lo, p_hi, ok in st.pieces:
            for size in piece_sizes(b0, q.micro_max):
                b = size + np.zeros(len(idx))
                there = ok[idx] & (b <= q.micro_max) & (True if micro_fixed is None else b == micro_fixed)
                mf, mc, m_lo, m_hi = piece_accumulations(p_lo[idx], p_hi[idx], clipped, b * q.per, np)
                for m in (mf, mc):
                    live = there & (m >= m_lo) & (m <= m_hi)
                    if live.any():
                        ev = _evaluate(q, rq, np.where(live, b, 1.0), np.where(live, m, 1.0), live)
                        full = Evals(**{f: _scatter(getattr(ev, f), idx, R, np.nan) for f in CONFIG},
                                     ok=_scatter(ev.ok, idx, R, False), big=_scatter(ev.big, idx, R, False))
                        found |= weigh(full, _scatter(live, idx, R, False))
    return found


def _scatter(values: np.ndarray, idx: np.ndarray, R: int, fill) -> np.ndarray:
    """`values` of the elements `idx` in an array of R, `fill` elsewhere."""
    out = np.full(R, fill, dtype=values.dtype)
    out[idx] = values
    return out


def _take(p: Block, idx: np.ndarray) -> Block:
    """The elements `idx` of a block."""
    step = p._step
    if step is not None:
        step = Steps(**{n: getattr(step, n)[idx] for n in _STEP}, overlap=step.overlap, gather_share=step.gather_share,
                     zero3=step.zero3 if isinstance(step.zero3, bool) else step.zero3[idx])
    return Block(p.gpus[idx], p.data_parallel[idx], p.seq_len, p.per[idx], p.flops_per_token[idx], p.rate[idx],
                 p.fixed_time[idx], p.micro_max[idx], p.pipeline[idx], p.mode, step, p.pair[idx])


def _groups(*cols: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(the first index of each distinct tuple of `cols`, each element's group)."""
    order = np.lexsort(cols[::-1])
    new = np.zeros(order.size, bool)
    new[:1] = True
    for c in cols:
        sc = c[order]
        new[1:] |= sc[1:] != sc[:-1]
    group = np.empty(order.size, np.int64)
    group[order] = np.cumsum(new) - 1
    return order[new], group


class _Floors:
    """Each micro-batch size's least `placement.wall_floor` (less `_BOUND_MARGIN`, as
    `_wall_search`) for the elements `live`, sorted in the search's order (least floor, then
    size). The floors depend on the pair, B_crit and E_min alone, so they are computed once per
    group of those (a sweep of limits shares them); `below` lists an element's sizes up to a
    threshold by a merge of the floors with the thresholds."""

    __slots__ = ("b", "by", "sorted_floor", "group", "micro_fixed")

    def __init__(self, p: Block, r: Rows, live: np.ndarray, cap, micro_fixed: int | None) -> None:
        first, group = _groups(p.pair[live], r.bc[live], r.em[live])
        g = live[first]
        q = _take(p, g)
        width = int(cap[live].max())
        b = np.full(1, float(micro_fixed)) if micro_fixed is not None else np.arange(1.0, width + 1.0)
        step = q._step
        assert step is not None
        col = Steps(**{n: getattr(step, n)[:, None] for n in _STEP}, overlap=step.overlap,
                    gather_share=step.gather_share,
                    zero3=step.zero3 if isinstance(step.zero3, bool) else step.zero3[:, None])
        u, v = wall_lines(col, b[None, :], np)
        beta = r.bc[g, None] / (b[None, :] * q.per[:, None])
        floor0 = wall_floor((r.em[g] / r.bc[g])[:, None], beta, u, v, least_accumulation(beta, u, v, 1.0, INF, np))
        floor0 = floor0 * (1.0 - _BOUND_MARGIN)
        self.by = np.argsort(floor0, axis=1, kind="stable")  # each group's sizes by floor (NaN last: never below)
        self.sorted_floor = np.take_along_axis(floor0, self.by, axis=1)
        self.group = np.full(len(r), -1)
        self.group[live] = group
        self.b, self.micro_fixed = b, micro_fixed

    def below(self, live: np.ndarray, cap, threshold, most: int | None = None):
        """(element, micro-batch size, its least floor) of every size up to the element's `cap`
        whose floor is below its `threshold`, each element's in the search's order; with `most`,
        only those among its group's first `most` sizes."""
        group = self.group[live]
        K, w = self.sorted_floor.shape
        # how many of its group's floors each element's threshold reaches: floors before
        # thresholds at equal values (≤), within the group
        keys = np.concatenate([np.repeat(np.arange(K), w), group])
        values = np.concatenate([self.sorted_floor.ravel(), threshold[live]])
        query = np.concatenate([np.zeros(K * w, bool), np.ones(live.size, bool)])
        order = np.lexsort((query, values, keys))
        floors_before = np.cumsum(~query[order])
        at = np.empty(order.size, np.int64)
        at[order] = floors_before
        count = at[K * w:] - group * w
        if most is not None:
            count = np.minimum(count, most)
        e = np.repeat(live, count)
        j = np.arange(e.size) - np.repeat(np.cumsum(count) - count, count)
        at_g = np.repeat(group, count)
        bs, fl = self.b[self.by[at_g, j]], self.sorted_floor[at_g, j]
        keep = (bs if self.micro_fixed is None else 1.0) <= cap[e]  # pinned: cap is 1 where it is searched
        return e[keep], bs[keep], fl[keep]


def _wall_check(p: Block, r: Rows, st: _Start, best: list, has, micro_fixed: int | None) -> None:
    """Marks unsure (the scalar path) every element whose min_time pick `placement._wall_search`
    could change: a micro-batch size whose wall-clock floor (`placement.wall_floor` at its least
    accumulation) is below the pick, unless the splits there that the search evaluates are the
    pick or slower; with no pick, unless no floor meets the time limits."""
    R = len(r)
    go = st.go & (p.micro_max >= 1)
    step = p._step
    if step is None or not go.any():
        return
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        s_min = r.em / r.bc
        fhi = limit_interval("flops", p, r, r.flops, np)[1]
        n_max = np.where(np.isnan(r.flops), INF, most_sequences(fhi, p.per, np))
        # the least wall a time limit allows (rows with none: INF)
        allowed = np.full(R, INF)
        for name in TIME_LIMITS:
            w = wall_limit(name, getattr(r, name), r.price, p.gpus)
            allowed = np.where(np.isnan(w), allowed, np.minimum(allowed, w))
        threshold = np.where(has, best[4], allowed)
        limit = micro_limit(s_min, r.bc / p.per, step.per_sequence, step.fixed, threshold, np)
        top = np.where(threshold < INF, np.fmin(p.micro_max, np.nan_to_num(limit, nan=0.0)), p.micro_max)
        top = np.minimum(top, WALL_SIZES)
        if micro_fixed is None:
            cap = np.where(go, top, 0)
        else:
            cap = np.where(go & (micro_fixed <= top), 1, 0)
        live = np.flatnonzero(cap > 0)
        if not live.size:
            return
        floors = _Floors(p, r, live, cap, micro_fixed)
        unsure = st.unsure
        lone = live[~has[live]]  # no pick: a floor within a time limit is a split the search may find
        if lone.size:
            unsure[floors.below(lone, cap, threshold)[0]] = True
        live = live[has[live]]
        if not live.size:
            return
        # the search's first split, from each element's first two sizes; then every size below
        # the threshold it leaves
        e, bs, _ = floors.below(live, cap, threshold, most=_FIRST_SIZES)
        threshold, first_b, first_m = _first_met(p, r, e, bs, n_max, threshold)
        e, bs, _ = floors.below(live, cap, threshold)
    first = np.where(bs == first_b[e], first_m[e], 0.0)
    # an element whose first split's size is not listed (its floor above the split's wall: float
    # noise) cannot count what the search evaluates
    unsure |= ~np.isnan(first_b) & (np.bincount(e[first > 0.0], minlength=R) == 0)
    if e.size:
        _wall_decide(p, r, st, best, e, bs, n_max[e], threshold[e], first)


_DECIDE_SPLITS = 4 * WALL_EVALUATIONS  # splits per element `_wall_decide` lists before the bound's filter


def _size_lines(q: Block, rq: Rows, bs, n_max) -> tuple:
    """What `placement._wall_search` knows of each micro-batch size `bs` of a block's elements:
    (S_min, u, v, β, the accumulations within the FLOP budget, the least floor, the real m of
    the least floor within the budget, the search's first m, that floor)."""
    s_min = rq.em / rq.bc
    u, v = wall_lines(q._step, bs, np)
    beta = rq.bc / (bs * q.per)
    m_hi = np.where(n_max == INF, INF, np.floor_divide(n_max, bs))  # the search's n_max // b
    floor0 = wall_floor(s_min, beta, u, v, least_accumulation(beta, u, v, 1.0, INF, np))
    mc = least_accumulation(beta, u, v, 1.0, m_hi, np)
    lower = np.maximum(1.0, np.floor(mc))
    return s_min, u, v, beta, m_hi, floor0, mc, lower, wall_floor(s_min, beta, u, v, mc)


_FIRST_SIZES = 4  # sizes per element listed before the cap's filter when looking for the first split


def _first_met(p: Block, r: Rows, e, bs, n_max, threshold) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(each row's threshold once `placement._wall_search` has evaluated its first split, that
    split's micro-batch size (NaN where none is known) and accumulation): the search takes sizes
    by (least floor, b) (`e`, `bs`: each element's first few, in that order), skips one whose
    least floor within the FLOP budget is above the pick, and starts at `lower` (or `lower` + 1
    where that floor is above); a feasible split there is faster than the pick or leaves it, so
    every later split has a floor below min(pick, its wall clock). A per-micro-batch latency puts
    the floors of many sizes close together: from the pick's wall alone thousands of splits stay
    in reach where the search evaluates a few. Only the first two sizes listed are tried; past
    them the pick's wall stands."""
    R = len(r)
    first_b, first_m = np.full(R, np.nan), np.zeros(R)
    near = 1.0 - _BOUND_MARGIN
    head = np.ones(e.size, bool)
    head[1:] = e[1:] != e[:-1]
    second = np.zeros(e.size, bool)
    second[1:] = head[:-1] & ~head[1:]
    j = np.flatnonzero(head | second)
    if not j.size:
        return threshold, first_b, first_m
    ej = e[j]
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        s_min, u, v, beta, m_hi, _, _, lower, _ = _size_lines(_take(p, ej), _subset(r, ej), bs[j], n_max[ej])
        t = threshold[ej]
        up = lower + 1.0
        # the search's checks of the least floors are implied: listed sizes have theirs below t,
        # and a floor at `lower` or above is no less than the least within the budget
        at_lower = wall_floor(s_min, beta, u, v, lower) * near <= t
        at_up = (up <= m_hi) & (wall_floor(s_min, beta, u, v, up) * near <= t)
        ok = (m_hi >= 1.0) & (at_lower | at_up)
    k = np.flatnonzero(ok)
    if not k.size:
        return threshold, first_b, first_m
    k = k[np.r_[True, ej[k[1:]] != ej[k[:-1]]]]  # each element's first such size
    m = np.where(at_lower[k], lower[k], up[k])
    el = ej[k]
    ev = _evaluate(_take(p, el), _subset(r, el), bs[j[k]], m, np.ones(k.size, bool))
    first_b[el], first_m[el] = bs[j[k]], m
    met = np.full(R, np.inf)
    met[el] = np.where(ev.ok, ev.wall, np.inf)
    return np.minimum(threshold, met), first_b, first_m


def _wall_decide(p: Block, r: Rows, st: _Start, best: list, e: np.ndarray, bs: np.ndarray, n_max, threshold,
                 first) -> None:
    """`placement._wall_search` from a pick, elementwise: for each (element `e`, micro-batch size
    `bs`) whose floor is below `threshold` (the pick's wall clock, or the first split's:
    `_first_met`, whose m is `first` at its entry), every accumulation whose `wall_floor` is too
    (the roots of the floor's quadratic in m, checked one by one), evaluated; the least by
    place's key (wall, accumulation, distance to the target) with the pick is the search's
    answer wherever the search must meet it. Unsure (the scalar path): the evaluation cap could
    bind, the first split is not among those listed, two different splits share a key, or the
    winner's size or path from the least floor is above its wall (the search's order then
    decides)."""
    unsure = st.unsure
    q = _take(p, e)
    rq = _subset(r, e)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        s_min, u, v, beta, m_hi, floor0, mc, lower, floor_c = _size_lines(q, rq, bs, n_max)
        # s_min(1 + β/m)(m·u + v) ≤ t  ⇔  u·m² + (v + β·u − t/s_min)·m + β·v ≤ 0 (m > 0): its roots,
        # widened by two, hold every m the search may evaluate; the floor itself filters them below
        m1, m2, real = quadratic_roots(u, v + beta * u - threshold / s_min, beta * v, np)
        sized = m_hi >= 1.0  # a size with no accumulation within the FLOP budget is skipped
        sane = real & (u > 0.0) & np.isfinite(m2) & sized
        m_from = np.maximum(1.0, np.ceil(m1) - 2.0)
        m_to = np.minimum(m_hi, np.floor(m2) + 2.0)
        count = np.where(sane, np.maximum(0.0, m_to - m_from + 1.0), 0.0)
        R = len(r)
        bad = np.bincount(e[sized & ~sane & (floor_c * (1.0 - _BOUND_MARGIN) <= threshold)], minlength=R) > 0
        bad |= np.bincount(e, weights=np.minimum(count, _DECIDE_SPLITS + 1.0), minlength=R) > _DECIDE_SPLITS
        keep = ~bad[e]
        count = np.where(keep, count, 0.0).astype(np.int64)
        pair = np.repeat(np.arange(e.size), count)
        m = m_from[pair] + (np.arange(pair.size) - np.repeat(np.cumsum(count) - count, count))
        inside = wall_floor(s_min[pair], beta[pair], u[pair], v[pair], m) * (1.0 - _BOUND_MARGIN) <= threshold[pair]
        pair, m = pair[inside], m[inside]
        el = e[pair]
        # the search's cap could bind: the first split, then those below the threshold
        opened = first > 0.0
        bad |= np.bincount(el, minlength=R) + np.bincount(e[opened], minlength=R) > WALL_EVALUATIONS
        listed = np.zeros(e.size, bool)
        listed[pair[m == first[pair]]] = True
        bad |= np.bincount(e[opened & ~listed], minlength=R) > 0
        ev = _evaluate(_take(q, pair), _subset(rq, pair), bs[pair], m, np.ones(pair.size, bool))
        bad |= np.bincount(el[ev.big], minlength=R) > 0
        # the candidates with the pick, by place's key; the pick first among equal keys
        rows = np.flatnonzero(np.bincount(e, minlength=R) > 0)
        rows = rows[~bad[rows]]
        ok = ev.ok & ~bad[el]
        c_el = np.concatenate([rows, el[ok]])
        c_pair = np.concatenate([np.full(rows.size, -1), pair[ok]])
        fields_ = [np.concatenate([f[rows], getattr(ev, n)[ok]]) for f, n in zip(best, CONFIG)]
        c_wall, c_accum, c_micro = fields_[4], fields_[1], fields_[0]
        c_dist = np.abs(fields_[2] - st.clipped[c_el])
        order = np.lexsort((c_dist, c_accum, c_wall, c_el))
        lead = np.ones(order.size, bool)
        lead[1:] = c_el[order[1:]] != c_el[order[:-1]]
        win = order[lead]
        # a second split with the winner's key: the search's order of evaluation decides
        w = np.full(R, -1)
        w[c_el[win]] = win
        a = w[c_el]
        tie = (c_wall == c_wall[a]) & (c_accum == c_accum[a]) & (c_dist == c_dist[a]) & (c_micro != c_micro[a])
        bad |= np.bincount(c_el[tie], minlength=R) > 0
        bad |= np.bincount(c_el[np.isnan(c_dist) | np.isnan(c_wall)], minlength=R) > 0
        # a winner other than the pick: the search meets it only if its size's least floor, its
        # least floor within the FLOP budget and every floor on the way from there are below its
        # wall clock (the threshold never falls below it)
        moved = win[c_pair[win] >= 0]
        wp, w_wall = c_pair[moved], c_wall[moved]
        wm = fields_[1][moved]
        met = (floor0[wp] * (1.0 - _BOUND_MARGIN) <= w_wall) & (floor_c[wp] * (1.0 - _BOUND_MARGIN) <= w_wall)
        start = np.where(wm <= lower[wp], lower[wp], lower[wp] + 1.0)
        steps_ = np.abs(wm - start) + 1.0
        # the floors on the way: the candidates of the winner's (element, size) between start and m
        on_way = np.zeros(e.size, np.int64)
        lo_w, hi_w = np.full(e.size, np.inf), np.full(e.size, -np.inf)
        lo_w[wp], hi_w[wp] = np.minimum(start, wm), np.maximum(start, wm)
        wall_of = np.full(e.size, -np.inf)
        wall_of[wp] = w_wall
        fl = wall_floor(s_min[pair], beta[pair], u[pair], v[pair], m) * (1.0 - _BOUND_MARGIN)
        way = (m >= lo_w[pair]) & (m <= hi_w[pair]) & (fl <= wall_of[pair])
        on_way = np.bincount(pair[way], minlength=e.size)
        met &= on_way[wp] == steps_
        bad[c_el[moved[~met]]] = True
        for f, vals in zip(best, fields_):
            f[c_el[moved]] = vals[moved]
        unsure |= bad


def _least(kind: str, r: Rows, st: _Start, evs: list) -> tuple[list, np.ndarray, np.ndarray]:
    """The best of the evaluated splits `evs` by place's key (score, wall clock, accumulation,
    distance to the target), lexicographically: (its CONFIG fields, where one was found, where a
    neighbour of the target launches exactly). Marks `st.unsure` where two different splits tie."""
    R = len(r)
    unsure, clipped = st.unsure, st.clipped
    cand = np.concatenate([ev.ok & act[None, :] for ev, _, act, _ in evs])
    for ev, _, act, _ in evs:
        unsure |= (ev.big & act[None, :]).any(axis=0)

    # `place_key` of every split (the measure decides almost every column; the later components
    # are compared only where several splits share the best measure)
    with np.errstate(divide="ignore", invalid="ignore"):
        keys = [place_key(_KIND_OF[kind], r.bc, clipped, ev.batch, ev.wall, ev.flops, None, ev.accum, np)
                for ev, _, _, _ in evs]
        k0 = np.concatenate([k[0] for k in keys])
    cand &= k0 == np.where(cand, k0, np.inf).min(axis=0)[None, :]
    pick = np.argmax(cand, axis=0)
    offsets = np.cumsum([0] + [ev.micro.shape[0] for ev, _, _, _ in evs])

    def locate():
        slot = np.searchsorted(offsets[1:], pick, side="right")
        return pick - offsets[slot], [np.flatnonzero(slot == i) for i in range(len(evs))]
    local, in_slot = locate()

    def picked(f):
        """Field f of each column's picked split (read from its slot, nothing concatenated)."""
        out = np.empty(R)
        for (ev, _, _, _), c in zip(evs, in_slot):
            out[c] = getattr(ev, f)[local[c], c]
        return out
    # a split's numbers are a function of (micro, accum): candidates that are all the picked split
    # share every key component, so the later components matter only where another split ties on
    # the score
    pm, pa = picked("micro"), picked("accum")
    differ = np.zeros(R, bool)
    for i, (ev, _, _, _) in enumerate(evs):
        other = (ev.micro != pm[None, :]) | (ev.accum != pa[None, :])
        differ |= (cand[offsets[i]:offsets[i + 1]] & other).any(axis=0)
    multi = np.flatnonzero(differ)
    if multi.size:
        sub = cand[:, multi]
        for which in (1, 2, 3):
            k = np.concatenate([key[which][:, multi] for key in keys])
            sub &= k == np.where(sub, k, np.inf).min(axis=0)[None, :]
        cand[:, multi] = sub
        pick[multi] = np.argmax(sub, axis=0)
        local, in_slot = locate()
        # two different splits with one key: the scalar order of evaluation decides
        micro_m = np.concatenate([ev.micro[:, multi] for ev, _, _, _ in evs])
        accum_m = np.concatenate([ev.accum[:, multi] for ev, _, _, _ in evs])
        at = np.arange(multi.size)
        pm_, pa_ = micro_m[pick[multi], at], accum_m[pick[multi], at]
        unsure[multi] |= (sub & ((micro_m != pm_[None, :]) | (accum_m != pa_[None, :]))).any(axis=0)
    best = [picked(f) for f in CONFIG]
    with np.errstate(invalid="ignore"):
        # where the candidates are one split, a NaN later key component fails `k == min` for all of
        # them, as the full comparison does (only the distance to a NaN target can be NaN)
        lone_nan = ~differ & (np.isnan(best[4]) | np.isnan(best[1]) | np.isnan(np.abs(best[2] - clipped)))
    has = cand.any(axis=0) & ~lone_nan
    best = [np.where(has, v, np.nan) for v in best]
    hit = np.zeros(R, bool)
    for ev, n, act, nb in evs:
        if nb:
            hit |= (ev.ok & act[None, :] & (ev.micro * ev.accum == n[None, :])).any(axis=0)
    return best, has, hit


def _walk(p: Block, r: Rows, st: _Start, weigh: _Weigh, walk, micro_fixed, divisors) -> None:
    """placement.walk_out where neither neighbour of the target was launchable, up to WALK steps
    each way; a row that needs more is unsure (the scalar path). Each count's splits weigh against
    the best so far (`weigh`)."""
    fill = np.ones(len(r))

    def consider(n, active):
        """One more n: its splits against the best so far; where one launches n exactly."""
        n = np.where(active, n, fill)
        exact = np.zeros(len(r), bool)
        for m_, a_, e_ in _splits(p, n, micro_fixed, divisors):
            ev = _evaluate(p, r, m_, a_, e_)
            exact |= weigh(ev, active) & (ev.micro * ev.accum == n)
        return exact

    n0 = np.minimum(np.maximum(np.rint(st.n_t), st.n_lo), st.n_hi)
    st.unsure |= walk_out(walk, n0, st.n_lo, st.n_hi, (st.nf, st.nc, st.n_lo, st.n_hi), consider, 2 * WALK + 1, np)


# -- choosing per row ----------------------------------------------------------------------------

@dataclass(slots=True)
class Decided(Config):
    """The kernel's rows: `ok` where decided; the chosen pair, its split and numbers."""

    ok: np.ndarray
    any: np.ndarray  # a feasible candidate among those placed
    unsure: np.ndarray  # a placement or a near tie the kernel cannot decide exactly
    pair: np.ndarray
    kind: np.ndarray
    measure: np.ndarray  # the objective's measure of the pick
    lo: np.ndarray  # the chosen pair's feasible interval of B
    hi: np.ndarray
    target: np.ndarray  # the objective's own target on the chosen pair
    ivs: dict  # limit -> (low, high, nonempty) of the chosen pair


@dataclass(slots=True)
class _Cfg:
    """What objectives.rank reads of a configuration (floats, or arrays of many)."""

    wall: Any
    usd: Any
    gpu_hours: Any
    flops: Any
    batch: Any


def _search_order(pairs: list[Pair], searched: bool, r: Rows, pair_of, kind_of):
    """order_of(tied columns, row, objective, price) -> the column `solve()` meets first, or None.
    The search places pairs in the order of (rank of the pair's lower bound, layout simplicity,
    GPU count) (search_space.search_layouts), and the objectives of one pair in OBJECTIVES order."""
    from budgetdsl.solve.placement import Limits
    from budgetdsl.theory.frontier import Frontier

    def order_of(tied, row, objective, price):
        if not searched:
            return None
        from budgetdsl.solve.search_space import bound_rank, lower_bound, step_bound

        fr = Frontier(float(r.bc[row]), float(r.em[row]))
        limits = Limits(price=price)
        ref = pairs[0].cm
        keyed = []
        for j in tied:
            p = pairs[int(pair_of[j])]
            b = lower_bound(ref, p.gpus, p.dp, p.cm._step, fr, limits, p.micro_max)
            choice = _sort_key(p)
            b_min = float(p.dp * ref.seq_len)
            linear = _per_token(p)
            lines = step_bound(p.cm._step, p.micro_max, b_min, linear)
            keyed.append(((bound_rank(objective, b, p.dp, ref, fr, lines, p.gpus, price), choice, p.gpus,
                           int(kind_of[j])), j))
        keyed.sort(key=lambda kj: kj[0])
        if keyed[0][0][:3] == keyed[1][0][:3]:
            return None
        return keyed[0][1]
    return order_of


class _Store:
    """Each pair's placements, kept as arrays over all the chunk's rows (placed on a subset)."""

    def __init__(self, R: int) -> None:
        self.R = R
        self.pairs: dict[int, dict] = {}
        self.unsure = np.zeros(R, bool)

    def put(self, pi: np.ndarray, ri: np.ndarray, lo, hi, ivs, placed: list[Placed]) -> None:
        """The placements of elements (pairs pi, sorted, on rows ri): each field's values stacked
        once, then one block written per pair (a dict of arrays per pair, and one Placed sliced
        per pair and objective, were most of the store's cost)."""
        has = []
        for k, pl in enumerate(placed):
            h = pl.has.copy()
            for j in range(k):  # one configuration from two objectives is one candidate
                h &= ~(placed[j].has & (placed[j].micro == pl.micro) & (placed[j].accum == pl.accum))
            has.append(h)
        unsure = np.logical_or.reduce([pl.unsure for pl in placed])
        self.unsure |= np.bincount(ri[unsure], minlength=self.R) > 0
        names = list(ivs)
        values = np.stack([lo, hi, *(x for n in names for x in ivs[n][:2]), *(pl.target for pl in placed),
                           *(getattr(pl, f) for pl in placed for f in CONFIG)])
        flags = np.stack([np.ones(len(pi), bool), *(x for n in names for x in ivs[n][2:]), *has,
                          *(pl.sized for pl in placed)])
        cuts = (np.flatnonzero(np.diff(pi)) + 1).tolist()
        for a, b in zip([0, *cuts], [*cuts, len(pi)]):
            i = int(pi[a])
            st = self.pairs.get(i)
            if st is None:
                st = self.pairs[i] = self._new(names, len(values), len(flags))
            rows = ri[a:b]
            st["_values"][:, rows] = values[:, a:b]
            st["_flags"][:, rows] = flags[:, a:b]

    def _new(self, names: list[str], nv: int, nf: int) -> dict:
        """A pair's arrays over the chunk's rows, views of two blocks in `put`'s order of fields."""
        v, f = np.full((nv, self.R), np.nan), np.zeros((nf, self.R), bool)
        n, k = len(names), len(KINDS)
        return dict(_values=v, _flags=f, lo=v[0], hi=v[1], done=f[0],
                    ivs={name: (v[2 + 2 * j], v[3 + 2 * j], f[1 + 2 * j], f[2 + 2 * j])
                         for j, name in enumerate(names)},
                    targets=[v[2 + 2 * n + q] for q in range(k)],
                    kinds=[dict(has=f[1 + 2 * n + q], sized=f[1 + 2 * n + k + q],
                                **{c: v[2 + 2 * n + k + q * len(CONFIG) + x]
                                                          for x, c in enumerate(CONFIG)}) for q in range(k)])

    def view(self, rows: np.ndarray) -> _Store:
        """The same placements on a subset of the rows."""
        out = _Store(len(rows))
        out.unsure = self.unsure[rows]
        for i, st in self.pairs.items():
            out.pairs[i] = dict(lo=st["lo"][rows], hi=st["hi"][rows],
                                ivs={n: tuple(x[rows] for x in v) for n, v in st["ivs"].items()},
                                targets=[t[rows] for t in st["targets"]], done=st["done"][rows],
                                kinds=[{f: v[rows] for f, v in k.items()} for k in st["kinds"]])
        return out


def _subset(r: Rows, rows: np.ndarray) -> Rows:
    return Rows(**{f.name: getattr(r, f.name)[rows] for f in fields(Rows)})


def _bounds(pairs: list[Pair], r: Rows) -> tuple[np.ndarray, ...]:
    """search_space.lower_bound of every pair on every row, (P, R) arrays of (wall clock, cost,
    FLOPs) and the row objective's measure of the bound (search_space.bound_rank): no
    configuration of the pair does better on any axis, nor ranks better. Used only to skip a pair
    for a row, with a margin; exactness does not rest on their last bits. A bound reads only
    B_crit, E_min, the price and the objective: it is computed once per distinct tuple of those
    (a grid of limits × B_crit has as many as B_crit values) and spread to the rows."""
    classes, inverse = _bound_classes(pairs, r)
    return tuple(a[:, inverse] for a in classes)


def _bound_classes(pairs: list[Pair], r: Rows) -> tuple[tuple[np.ndarray, ...], np.ndarray]:
    """`_bounds` once per distinct (B_crit, E_min, price, objective) of the rows: (P, U) arrays,
    and each row's column among them (the (P, R) arrays, 31 MB for 98 pairs × 10,000 rows, are
    not kept through the placements)."""
    key = np.stack([r.bc.view(np.int64), r.em.view(np.int64), r.price.view(np.int64),
                    r.objective.astype(np.int64)], axis=1)  # bit patterns: equal inputs, equal bounds
    _, first, inverse = np.unique(key, axis=0, return_index=True, return_inverse=True)
    return _bounds_of_rows(pairs, _subset(r, first)), inverse.reshape(-1)


def _bounds_of_rows(pairs: list[Pair], r: Rows) -> tuple[np.ndarray, ...]:
    """`_bounds` computed row by row (search_space.axis_bounds and least_balance on arrays)."""
    from budgetdsl.solve.search_space import axis_bounds, least_balance, step_bound

    ref = pairs[0].cm
    s_min = r.em / r.bc
    has_price = ~np.isnan(r.price)
    walls, costs, flops, r0 = [], [], [], []
    # the objectives of these rows (a set: np.unique of a plain array imports numpy.ma, ~15 ms)
    present = sorted(set(r.objective.tolist()))
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        for p in pairs:
            b_min = float(p.dp * p.seq_len)
            lines = step_bound(p.cm._step, p.micro_max, b_min, _per_token(p))
            w, c, f = axis_bounds(lines, b_min, p.gpus, ref.flops_per_token * r.em, r.bc, s_min,
                                  lambda gh: np.where(has_price, gh * r.price, gh), np)
            measure = {1: w, 2: c, 3: f}
            if 0 in present:
                measure[0] = least_balance(r.bc, b_min, np)
            walls.append(w)
            costs.append(c)
            flops.append(f)
            r0.append(measure[present[0]] if len(present) == 1 else
                      np.select([r.objective == o for o in present], [measure[o] for o in present]))
    return np.array(walls), np.array(costs), np.array(flops), np.array(r0)


def _per_token(p: Pair) -> float:
    """Seconds per token of a declared MFU's step, f/(G·P·u) (0 for a modelled step): the slope of
    search_space.step_bound's lines."""
    return 0.0 if p.cm._step is not None else p.f / p.cm.rate


HEAVY = 24  # a row that needs more pairs than this is placed with its like, on every pair


def decide(pairs: list[Pair], r: Rows, micro_fixed: int | None, divisors: _Divisors, searched: bool = True,
           every: bool = False) -> Decided:
    """Each row's pick, placing a pair on a row only where it can matter: first the pairs whose
    bound ranks best, then, until nothing changes, every pair whose bound ranks no worse than the
    row's pick or could dominate it (the exact pruning of search_space.search_layouts: no
    configuration of a skipped pair can be picked or take the pick off the front). Rows that need
    more than HEAVY pairs (no feasible candidate yet, or balanced above x = 1) are placed apart
    on every pair, so the choice among many candidates is paid for those rows only."""
    R = len(r)
    P = len(pairs)
    store = _Store(R)
    (lb_wall, lb_cost, lb_flops, lb_r0), klass = _bound_classes(pairs, r)  # by each row's class
    need = np.full((P, R), every)
    # a first guess at the pick: the pair whose bound ranks best, and the fastest, the cheapest and
    # the least FLOPs by bound (the likeliest to meet a deadline, a budget, a FLOPs limit). One pair
    # per axis: the three fastest as well placed 1.8x the elements on plans/minimal.yaml's sweep
    # (44,900 against 24,900) and were never wanted there
    every_row = np.arange(R)
    for lb in (lb_r0, lb_wall, lb_cost, lb_flops):
        need[np.argmin(lb, axis=0)[klass], every_row] = True
    done = np.zeros((P, R), bool)
    apart = np.zeros(R, bool)
    d = None
    changed = np.arange(R)
    while True:
        pi, ri = np.nonzero(need & ~done)  # every (pair, row) still to place, in one pass
        if len(pi):
            blk = block(pairs, pi)
            sub = _subset(r, ri)
            lo, hi, empty, ivs, sized = _intervals(blk, sub)
            cache: dict = {}
            placed = [_place(blk, sub, kind, lo, hi, empty, sized, micro_fixed, divisors, cache) for kind in KINDS]
            store.put(pi, ri, lo, hi, ivs, placed)
            done[pi, ri] = True
            # the evaluations (tens of MB) are not needed past the store: freed before choosing, the
            # peak of memory, and the page faults of touching it, are a third less
            del blk, sub, lo, hi, empty, ivs, sized, cache, placed
        if d is None:
            d = _choose(pairs, r, store, searched)
        else:  # only the rows that were given more pairs can change their pick
            _merge(d, _choose(pairs, _subset(r, changed), store.view(changed), searched), changed)
        margin = 1e-8
        # only the rows given more pairs can want more: the others' picks and placements are as
        # they were when they wanted nothing
        c = slice(None) if len(changed) == R else changed
        pw, pc, pf = d.wall[c], d.cost[c], d.flops[c]
        kc = klass[c]
        lw, lc = lb_wall[:, kc], lb_cost[:, kc]
        with np.errstate(invalid="ignore"):
            threat = ((lw <= pw[None, :] * (1 + margin)) & (lc <= pc[None, :] * (1 + margin))
                      & (lb_flops[:, kc] <= pf[None, :] * (1 + margin)))
            better = lb_r0[:, kc] <= d.measure[c][None, :] * (1 + margin)
            # balanced below x = 1 (search_space.search_layouts): a pair whose bound is no faster
            # and no cheaper than the pick holds no configuration that ranks better and is not
            # dominated by (or a twin of) the pick; twins are threats
            below = (r.objective[c] == 0) & (d.batch[c] <= r.bc[c])
            better &= ~(below[None, :] & (lw >= pw[None, :]) & (lc >= pc[None, :]))
            wanted = ~done[:, c] & (~d.any[c][None, :] | better | threat) & ~apart[c][None, :]
        heavy = (not every) & ~apart[c] & ((need[:, c] | wanted).sum(axis=0) > HEAVY)
        if heavy.any():
            apart[c] |= heavy
            wanted &= ~heavy[None, :]
        if not wanted.any():
            break
        need[:, c] |= wanted
        changed = np.arange(R)[c][wanted.any(axis=0)]
    if apart.any():  # merge the rows placed apart
        rows = np.flatnonzero(apart)
        _merge(d, decide(pairs, _subset(r, rows), micro_fixed, divisors, searched, every=True), rows)
    return d


def _merge(d: Decided, other: Decided, rows: np.ndarray) -> None:
    """`other`'s rows (answers for the chunk's `rows`) written into `d`."""
    for f in fields(Decided):
        a, b = getattr(d, f.name), getattr(other, f.name)
        if isinstance(a, dict):
            for name in a:
                for x, y in zip(a[name], b[name]):
                    x[rows] = y
        else:
            a[rows] = b


def _choose(pairs: list[Pair], r: Rows, store: _Store, searched: bool):
    """objectives.choose per row over the placed candidates: (Decided, the pick's wall clock,
    cost, FLOPs and measure)."""
    from budgetdsl.solve.objectives import rank_key

    R = len(r)
    cols = [(i, k, st["kinds"][k], st["kinds"][k]["has"]) for i, st in store.pairs.items() for k in range(len(KINDS))]
    unsure = store.unsure.copy()
    C = len(cols)
    valid = np.ascontiguousarray(np.stack([c[3] for c in cols]).T)  # (R, C)

    def stack(attr):
        return np.ascontiguousarray(np.stack([c[2][attr] for c in cols]).T)
    wall, cost, flops, batch = stack("wall"), stack("cost"), stack("flops"), stack("batch")
    wall = np.where(valid, wall, np.inf)
    cost = np.where(valid, cost, np.inf)
    flops = np.where(valid, flops, np.inf)
    gpus = np.array([pairs[c[0]].gpus for c in cols])
    t = TOLERANCE
    dominated = np.zeros((R, C), bool)
    rows = np.arange(R)[:, None]
    # Within one GPU count cost is a non-decreasing function of the wall clock: sorted by wall
    # clock, j is dominated iff an earlier point (wall clock better beyond the tolerance) has at
    # most its FLOPs (within the tolerance). Walls within the tolerance of each other, or FLOPs
    # within a few tolerances of the bound: the scalar order decides, the row is unsure.
    groups = sorted(set(gpus.tolist()))
    for g in groups:
        in_g = np.flatnonzero(gpus == g)  # the group's columns only
        w = wall[:, in_g]  # invalid candidates are already +inf
        order = np.lexsort((flops[:, in_g], w), axis=1)
        ws = np.take_along_axis(w, order, axis=1)
        fs = np.take_along_axis(flops[:, in_g], order, axis=1)
        fin = np.isfinite(ws)
        # twins: the same (wall clock, FLOPs) as the point before (another layout, one step time);
        # neither dominates the other, and what dominates one dominates both
        twin = np.zeros(ws.shape, bool)
        twin[:, 1:] = fin[:, 1:] & (ws[:, 1:] == ws[:, :-1]) & (fs[:, 1:] == fs[:, :-1])
        first = np.where(twin, -1, np.arange(ws.shape[1])[None, :])
        first = np.maximum.accumulate(first, axis=1)  # the first point of each run of twins
        prefix = np.minimum.accumulate(fs, axis=1)
        before = np.concatenate([np.full((R, 1), np.inf), prefix[:, :-1]], axis=1)
        before = np.take_along_axis(before, first, axis=1)
        with np.errstate(invalid="ignore"):
            dom_sorted = fin & (before <= fs * (1.0 + t))
            # within a few tolerances but not equal: whether a chain of dominance reaches j
            close = fin & np.isfinite(before) & (before != fs) & (np.abs(before - fs) <= 4.0 * t * fs)
            band = fin[:, 1:] & ~twin[:, 1:] & (ws[:, :-1] >= ws[:, 1:] * (1.0 - t))
        unsure |= close.any(axis=1) | band.any(axis=1)
        d = np.zeros((R, len(in_g)), bool)
        d[rows, order] = dom_sorted
        dominated[:, in_g] |= d
    if len(groups) > 1:  # across GPU counts: every survivor against every survivor
        alive = valid & ~dominated
        # each row's survivors packed to the left (a row has a few of the C columns): (R, K)
        K = int(alive.sum(axis=1).max(initial=0))
        order = np.argsort(~alive, axis=1, kind="stable")[:, :K]
        A = np.take_along_axis(alive, order, axis=1)
        W, Cc, F = (np.take_along_axis(x, order, axis=1) for x in (wall, cost, flops))
        dom = np.zeros((R, K), bool)
        for j in range(K):
            wj, cj, fj = W[:, j:j + 1], Cc[:, j:j + 1], F[:, j:j + 1]
            with np.errstate(invalid="ignore"):  # objectives.dominates, elementwise
                no_worse = (W <= wj * (1 + t)) & (Cc <= cj * (1 + t)) & (F <= fj * (1 + t))
                better = (W < wj * (1 - t)) | (Cc < cj * (1 - t)) | (F < fj * (1 - t))
            dom[:, j] = A[:, j] & (A & no_worse & better).any(axis=1)
        dominated[rows, order] |= dom
    front = valid & ~dominated
    # the objective's measure of every candidate
    obj = r.objective[:, None]
    points = _Cfg(wall, cost, cost, flops, batch)  # objectives.rank reads a configuration's fields
    b_crit: Any = r.bc[:, None]
    with np.errstate(divide="ignore", invalid="ignore"):
        present = sorted(set(r.objective.tolist()))
        measures: list[Any] = [rank(OBJECTIVES[o], points, b_crit)[0] for o in present]
        measure = np.where(front, np.select([obj == o for o in present], measures), np.inf)
    best = measure.min(axis=1)
    contenders = front & (measure <= best[:, None] * (1.0 + 1e-10))
    n_cont = contenders.sum(axis=1)
    pick = np.argmin(measure, axis=1)
    feasible = np.asarray(front.any(axis=1))
    kind_of = np.array([c[1] for c in cols])
    pair_of = np.array([c[0] for c in cols])
    order_of = _search_order(pairs, searched, r, pair_of, kind_of)
    micro = stack("micro")
    accum = stack("accum")
    ok = feasible & ~unsure
    # several contenders: the rounded measure and the tie-breaks, as `choose` ranks them; a tie
    # on the whole key goes to the candidate placed first (the search's order of pairs)
    for row in np.flatnonzero(ok & (n_cont > 1)):
        objective = OBJECTIVES[int(r.objective[row])]
        price = None if np.isnan(r.price[row]) else float(r.price[row])
        keys = []
        for j in np.flatnonzero(contenders[row]).tolist():
            c = _Cfg(float(wall[row, j]), float(cost[row, j]) if price is not None else None, float(cost[row, j]),
                     float(flops[row, j]), float(batch[row, j]))
            rk = rank(objective, c, float(r.bc[row]))
            keys.append((rank_key(rk), int(j)))
        top = min(k for k, _ in keys)
        tied = [j for k, j in keys if k == top]
        if len({(pair_of[j], micro[row, j], accum[row, j]) for j in tied}) > 1:
            # twins (the same wall clock, cost and FLOPs from two splits) are ordered by the search's
            # pool (`objectives.choose` over its candidates), not by the bound: solve() decides them
            same = len({(wall[row, j], cost[row, j], flops[row, j]) for j in tied}) < len(tied)
            met = None if same else order_of(tied, row, objective, price)  # the column solve() meets first
            if met is None:
                ok[row] = False
                continue
            pick[row] = met
        else:
            pick[row] = tied[0]

    def at(a):
        return a[np.arange(R), pick]
    chosen = pair_of[pick]
    kind = np.array([_KIND_OF[o] for o in OBJECTIVES])[r.objective]
    lo, hi, target, sized = np.full(R, np.nan), np.full(R, np.nan), np.full(R, np.nan), np.zeros(R, bool)
    ivs = {n: (np.full(R, np.nan), np.full(R, np.nan), np.zeros(R, bool))
           for n in ("flops", "deadline", "gpu_hours", "usd")}
    for i in sorted(set(chosen.tolist())):  # the chosen pair's interval and the objective's own target on it
        st = store.pairs[int(i)]
        m = chosen == i
        lo[m], hi[m] = st["lo"][m], st["hi"][m]
        for k in range(len(KINDS)):
            mk = m & (kind == k)
            target[mk] = st["targets"][k][mk]
            # the objective's own interval widened by a pipeline's sizes: its bindings by solve()
            sized[mk] = st["kinds"][k]["sized"][mk]
        for n, (ilo, ihi, iok) in ivs.items():
            ilo[m], ihi[m], iok[m] = st["ivs"][n][0][m], st["ivs"][n][1][m], st["ivs"][n][3][m]
    sized &= ok
    if sized.any():  # the interval those rows' own placements hold (placement._sized), for their bindings
        rows = np.flatnonzero(sized)
        q, rq = block(pairs, chosen[rows]), _subset(r, rows)
        w_lo, w_hi, w_empty, w_ivs, w_sized = _intervals(q, rq)
        if w_sized is None:  # not what the placements said: solve() decides
            ok &= ~sized
            unsure |= sized
        else:
            w_lo, w_hi, w_ivs = _widened(q, rq, w_lo, w_hi, w_empty, w_ivs, w_sized)
            lo[rows], hi[rows] = w_lo, w_hi
            for n, (ilo, ihi, iok) in ivs.items():
                ilo[rows], ihi[rows], iok[rows] = w_ivs[n][0], w_ivs[n][1], w_ivs[n][3]
    return Decided(at(micro), at(accum), at(batch), at(stack("steps")), at(wall), at(stack("gh")), at(cost),
                   at(flops), ok=ok, any=feasible, unsure=unsure, pair=chosen, kind=kind_of[pick],
                   measure=at(measure), lo=lo, hi=hi, target=target, ivs=ivs)


# -- rows: values per axis, chunks, summaries ------------------------------------------------------

@dataclass(slots=True)
class _Axis:
    path: str
    values: tuple[str, ...]
    numbers: list  # per value: the field's value (None: absent), or a PlanError
    plans: list


def _field(plan, path: str):
    from budgetdsl.plan.noise import noise_estimate

    if path == "noise.b_crit":
        return noise_estimate(plan).b_crit
    if path == "objective":
        return OBJECTIVES.index(str(plan.objective))
    section, key = path.split(".")
    return _exact(getattr(getattr(plan, section), key))


def _exact(value):
    """A plan number as the float the kernel computes with; ValueError when the scalar's Python
    arithmetic (exact integer comparisons) could differ from a float's."""
    if isinstance(value, int) and abs(value) > 2 ** 53:
        raise ValueError("an integer beyond a float's exact range")
    return None if value is None else float(value)


def _dump_without(plan, path: str) -> dict:
    """The plan's fields as JSON data without `path`. Dumped with `Plan`'s serializer: a loaded
    plan's own (`LoadedPlan`, built on first use) writes the same fields but costs a second schema."""
    from budgetdsl.plan.model import Plan

    data = Plan.__pydantic_serializer__.to_python(plan, mode="json")
    node = data
    keys = path.split(".")
    for k in keys[:-1]:
        node = node.get(k) or {}
    if isinstance(node, dict):
        node.pop(keys[-1], None)
    return data


def prepare(source, settings, cache: SolveCache):
    """(base plan, pairs, axes) when the kernel models this sweep, else None."""
    from budgetdsl.solve.sweep_rows import variant

    paths = [s.path for s in settings]
    if not settings or any(p not in SUPPORTED for p in paths) or len(set(paths)) != len(paths):
        return None
    if sum(p.startswith("target.") for p in paths) > 1 or {"budget.usd", "budget.usd_per_gpu_hour"} <= set(paths):
        return None  # the section's rule relates the two values: each combination is checked
    for s in settings:  # a value that reads another swept path depends on the combination
        if any(other in v for v in s.values for other in paths if other != s.path):
            return None
    try:
        base = variant(source, {})
        from budgetdsl.plan.noise import noise_estimate
        noise_estimate(base)
        pairs = plan_pairs(base, cache)
    except (PlanError, ValueError):
        return None
    if not pairs:
        return None
    axes = []
    for s in settings:
        reference = _dump_without(base, s.path)
        numbers: list[float | PlanError] = []
        plans: list[Plan | None] = []  # None: the value does not load (its row reports the error)
        for v in s.values:
            try:
                plan = variant(source, {s.path: v})
                if _dump_without(plan, s.path) != reference:
                    return None  # an expression of the file reads this path
                numbers.append(_field(plan, s.path))
                plans.append(plan)
            except PlanError as exc:
                numbers.append(exc)
                plans.append(None)
            except ValueError:
                return None
        axes.append(_Axis(s.path, s.values, numbers, plans))
    try:
        _rows(base, axes, [np.zeros(1, dtype=int) for _ in axes])
    except ValueError:
        return None
    return base, pairs, axes


def _column(base_value, axes, idx, path, R):
    """One row parameter: the base plan's value, or the swept axis's (NaN: absent)."""
    for axis, ix in zip(axes, idx):
        if axis.path == path:
            table = np.array([np.nan if (v is None or isinstance(v, PlanError)) else float(v)
                              for v in axis.numbers])
            return table[ix]
    return np.full(R, np.nan if base_value is None else _exact(base_value))


def _rows(base, axes, idx) -> tuple[Rows, np.ndarray]:
    """The chunk's row parameters, and which rows hold an invalid value."""
    from budgetdsl.plan.noise import noise_estimate

    R = len(idx[0]) if idx else 1
    b, t = base.budget, base.target
    bc = _column(noise_estimate(base).b_crit, axes, idx, "noise.b_crit", R)
    tokens = _column(t.tokens, axes, idx, "target.tokens", R)
    at_batch = _column(t.at_batch, axes, idx, "target.at_batch", R)
    min_tokens = _column(t.min_tokens, axes, idx, "target.min_tokens", R)
    em = np.where(~np.isnan(min_tokens), min_tokens, cf.e_min_from_target(tokens, at_batch, bc))  # e_min_of
    objective = _column(OBJECTIVES.index(str(base.objective)), axes, idx, "objective", R)
    invalid = np.zeros(R, bool)
    for axis, ix in zip(axes, idx):
        bad = np.array([isinstance(v, PlanError) for v in axis.numbers])
        invalid |= bad[ix]
    objective = np.where(np.isnan(objective), 0, objective).astype(int)
    rows = Rows(bc, em, _column(b.deadline, axes, idx, "budget.deadline", R),
                _column(b.flops, axes, idx, "budget.flops", R), _column(b.gpu_hours, axes, idx, "budget.gpu_hours", R),
                _column(b.usd, axes, idx, "budget.usd", R), _column(b.usd_per_gpu_hour, axes, idx,
                                                                    "budget.usd_per_gpu_hour", R), objective)
    return rows, invalid


def _bindings(pairs: list[Pair], r: Rows, d: Decided, ok: np.ndarray) -> list:
    """infeasibility.constraints' binding names of every decided (feasible, non-pinned) row, from
    the chosen pair's interval and the objective's own target on it, by its rules on arrays."""
    from budgetdsl.solve.infeasibility import floor_binds, limit_binds, pushed_against, room_filled

    R = len(r)
    bits = np.zeros(R, dtype=np.int64)
    rows = np.flatnonzero(ok)
    pi = d.pair[rows].astype(int)
    lo, hi, tgt = d.lo[rows], d.hi[rows], d.target[rows]
    pushed_lo, pushed_hi = tgt < lo, tgt > hi
    values = {"deadline": d.wall, "flops": d.flops, "gpu_hours": d.gh, "usd": d.cost}
    limits = {"deadline": r.deadline, "flops": r.flops, "gpu_hours": r.gpu_hours, "usd": r.usd}
    names = (*LIMIT_NAMES, "memory", "min_batch")
    with np.errstate(invalid="ignore"):
        for b, name in enumerate(LIMIT_NAMES):
            limit, value = limits[name][rows], values[name][rows]
            ilo, ihi, iok = (x[rows] for x in d.ivs[name])
            decided = iok & pushed_against(pushed_lo, pushed_hi, ilo, ihi, lo, hi)
            bits[rows] |= (~np.isnan(limit) & limit_binds(decided, value, limit, np)).astype(np.int64) << b
        micro, accum = d.micro[rows].astype(int), d.accum[rows].astype(int)
        need = np.zeros(len(rows))
        for i, m in {(i, m) for i, m in zip(pi.tolist(), micro.tolist())}:  # memory per device
            need[(pi == i) & (micro == m)] = pairs[i].cm.memory_at(m)
        cap = np.array([float(p.cm.memory_per_device) for p in pairs])[pi]
        room = np.array([p.micro_max for p in pairs])[pi]
        floor = np.array([float(p.dp * p.seq_len) for p in pairs])[pi]
        memory = limit_binds(room_filled(micro, room, accum), need, cap, np)
        bits[rows] |= memory.astype(np.int64) << 4
        bits[rows] |= floor_binds(pushed_lo, floor, lo, d.batch[rows]).astype(np.int64) << 5
    table: dict[int, tuple[str, ...]] = {}
    out = []
    for v in bits.tolist():
        t = table.get(v)
        if t is None:
            t = table[v] = tuple(n for b, n in enumerate(names) if v >> b & 1)
        out.append(t)
    return out


# -- infeasible rows: the diagnosed layout -------------------------------------------------------

_ORDER_MARGIN = 1e-6  # pairs whose vectorized bound is this close to the least get their exact key


def _conflict_counts(pairs: list[Pair], r: Rows, micro_fixed: int | None) -> np.ndarray:
    """len(infeasibility.conflicting_names(placement)) of every pair (rows of the result) on every
    row of `r` (columns), for rows where no pair has a feasible configuration: memory alone where a
    micro-batch has no room, else `infeasibility.conflicting` of the limits' intervals (`_intervals`,
    placement.limit_intervals's numbers)."""
    from budgetdsl.solve.infeasibility import conflicting

    P, R = len(pairs), len(r)
    pi = np.repeat(np.arange(P), R)
    blk = block(pairs, pi)
    rows = _subset(r, np.tile(np.arange(R), P))
    lo, hi, empty, ivs, sized = _intervals(blk, rows)
    if sized is not None:
        lo, hi, ivs = _widened(blk, rows, lo, hi, empty, ivs, sized)
    # the intervals: min_batch (dp·s, INF) always, then each present limit's
    spans = [(blk.per, np.full(P * R, INF), np.ones(P * R, bool), np.ones(P * R, bool))]
    spans += [ivs[n] for n in ("flops", "deadline", "gpu_hours", "usd")]
    with np.errstate(invalid="ignore"):
        named = conflicting(spans, lo, hi, np)
    count = np.sum(named, axis=0)
    memory = no_room(blk.micro_max, micro_fixed)
    return np.where(memory, 1, count).reshape(P, R)


def _widened(p: Block, r: Rows, lo, hi, empty, ivs: dict, sized: tuple) -> tuple:
    """(lo, hi, ivs) as the rows' own objectives' placements hold them (placement._sized): where a
    pipeline's micro-batch sizes reach nearer the target, the hull of their pieces, and each time
    limit's interval widened by its own sizes' hull."""
    h_lo, h_hi, h_ok, _ = sized
    kind = np.array([_KIND_OF[o] for o in OBJECTIVES])[r.objective]
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        target = np.select([kind == k for k in range(len(KINDS))],
                           [objective_target(k, p, r, np) + np.zeros(len(r)) for k in KINDS])
        r_ok = ~empty & (lo <= hi)
        use = sizes_matter(target, lo, hi, r_ok, h_lo, h_hi, h_ok, np)
        if not use.any():
            return lo, hi, ivs
        w_lo, w_hi, _ = hull(lo, hi, r_ok, h_lo, h_hi, h_ok, np)
        lo, hi = np.where(use, w_lo, lo), np.where(use, w_hi, hi)
        idx = np.flatnonzero(use)
        q, rq = _take(p, idx), _subset(r, idx)
        ivs = dict(ivs)
        for name in TIME_LIMITS:
            ilo, ihi, present, iok = (x.copy() for x in ivs[name])
            wall = wall_limit(name, getattr(rq, name), rq.price, q.gpus)
            w_lo, w_hi, w_ok, _ = size_pieces(q, rq, wall, q.micro_max, np.zeros(len(idx)), INF, np)
            ilo[idx], ihi[idx], iok[idx] = hull(ilo[idx], ihi[idx], iok[idx], w_lo, w_hi, w_ok & present[idx], np)
            ivs[name] = (ilo, ihi, present, iok)
    return lo, hi, ivs


def _diagnosed(base, pairs: list[Pair], r: Rows, micro_fixed: int | None, searched: bool) -> list:
    """For each row of `r` (none with a feasible configuration on any pair), what solve() reports:
    (pair index, binding names), or None where the kernel cannot tell (then solve()).

    solve() diagnoses the layout whose placement conflicts least (solver._solve: the first of the
    layouts' `closest`, in the order the search first placed each layout: with nothing feasible
    the walk places every pair in the order of its bound's rank, search_space.search_layouts);
    within a layout, and on a pinned one, `solve_context.closest`: the fewest conflicting limits,
    ties to the most GPUs. The binding limits are `diagnosis.constraints` of that pair's own
    placement (placement.place, the scalar code)."""
    from budgetdsl.solve.infeasibility import conflicting_names, constraints
    from budgetdsl.solve.placement import Limits, place
    from budgetdsl.solve.search_space import (
        balanced_key,
        bound_rank,
        lower_bound,
        step_bound,
    )
    from budgetdsl.theory.frontier import Frontier

    counts = _conflict_counts(pairs, r, micro_fixed)
    gpus = np.array([p.gpus for p in pairs])
    layouts: dict = {}
    layout = np.array([layouts.setdefault((p.split.tensor_parallel, p.split.pipeline_parallel, p.split.zero,
                                            str(p.split.recompute), p.split.recompute_layers), len(layouts))
                       for p in pairs])
    approx = _bounds(pairs, r)[3] if searched else None  # each pair's bound rank, vectorized
    ref = pairs[0].cm
    simple = [_sort_key(p) for p in pairs]
    kept: dict[int, tuple] = {}

    def lines_of(i: int) -> tuple:
        """search_space.step_bound of pair i (as bound_rank's caller computes it), once."""
        lines = kept.get(i)
        if lines is None:
            p = pairs[i]
            linear = _per_token(p)
            lines = kept[i] = step_bound(p.cm._step, p.micro_max, float(p.dp * ref.seq_len), linear)
        return lines
    out: list = []
    for row in range(len(r)):
        cnt = counts[:, row]
        least = cnt.min()
        objective = OBJECTIVES[int(r.objective[row])]
        fr = Frontier(float(r.bc[row]), float(r.em[row]))
        limits = Limits(*(None if math.isnan(v) else v for v in
                          (float(r.deadline[row]), float(r.flops[row]), float(r.gpu_hours[row]), float(r.usd[row]),
                           float(r.price[row]))))
        if limits.price == 0.0:
            out.append(None)  # a zero price is no price to the scalar path's `if price`
            continue
        among = np.flatnonzero(cnt == least)
        if searched:
            # the layouts holding a least-conflicting pair; the one the walk met first, by any pair
            mine = np.flatnonzero(np.isin(layout, layout[among]))
            assert approx is not None
            a = approx[mine, row]
            if not np.isfinite(a).all():
                out.append(None)
                continue
            near = mine[a <= a.min() * (1.0 + _ORDER_MARGIN)]
            keyed = []
            for i in near.tolist():  # search_space.bound_rank, the search's tie order
                p = pairs[i]
                key: tuple[float, ...]
                if objective == "balanced":
                    key = balanced_key(lines_of(i), float(p.dp * ref.seq_len), p.gpus, fr.b_crit, fr.s_min,
                                       limits.price)
                else:
                    key = bound_rank(objective, lower_bound(ref, p.gpus, p.dp, p.cm._step, fr, limits, p.micro_max),
                                     p.dp, ref, fr)
                keyed.append((key, simple[i], p.gpus, i))
            first = min(keyed)[3]
            among = among[layout[among] == layout[first]]
        i = int(among[np.argmax(gpus[among])])  # the fewest conflicts, ties to the most GPUs
        p = pairs[i]
        pl = place(p.cm, fr, limits, objective, micro_fixed)
        if pl.feasible or len(conflicting_names(pl)) != int(cnt[i]):
            out.append(None)  # not what the vectorized count says: solve() decides
            continue
        out.append((i, tuple(c.name for c in constraints(limits, pl, False) if c.binding)))
    return out


def _sort_key(p: Pair) -> tuple:
    """layout_search.LayoutChoice.sort_key of the pair's layout: the search's tie order."""
    from budgetdsl.solve.layout_search import LayoutChoice

    s = p.split
    return LayoutChoice(s.tensor_parallel, s.pipeline_parallel, s.zero, str(s.recompute),
                        recompute_layers=s.recompute_layers).sort_key()


def iter_kernel_rows(source, settings, cache=None) -> Iterator:
    """The sweep's rows (sweep.SweepRow, in order), the decidable ones from the kernel."""
    from budgetdsl.solve.solution import recompute_label
    from budgetdsl.solve.sweep_rows import Blame, Summary, SweepRow, solve_row

    blame = Blame(source, cache)  # where the invalid rows' problems are reported, shared by the sweep
    prepared = prepare(source, settings, blame.cache)
    combos = itertools.product(*(s.values for s in settings))
    if prepared is None:
        for combo in combos:
            yield solve_row(source, {s.path: v for s, v in zip(settings, combo)}, blame)
        return
    base, pairs, axes = prepared
    run = base.run
    micro_fixed = run.micro_batch if run is not None and run.micro_batch not in (None, "auto") else None
    shape = [len(s.values) for s in settings]
    total = math.prod(shape)
    divisors = _Divisors()
    searched = bool(base.hardware.searched())
    for start in range(0, total, CHUNK):
        flat = np.arange(start, min(total, start + CHUNK))
        idx = np.unravel_index(flat, shape)
        r, invalid = _rows(base, axes, idx)
        d = decide(pairs, r, micro_fixed, divisors, searched)
        with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
            x = d.batch / r.bc
            finite = np.isfinite(d.wall) & np.isfinite(d.gh) & np.isfinite(d.flops) & np.isfinite(x) \
                & np.isfinite(d.steps * d.batch)
        ok = d.ok & ~invalid & finite
        binding = _bindings(pairs, r, d, ok)
        # rows with no feasible configuration on any pair (every pair placed): the diagnosis
        diagnosed = {}
        lost = np.flatnonzero(~d.any & ~d.unsure & ~invalid)
        if lost.size:
            for row, answer in zip(lost.tolist(), _diagnosed(base, pairs, _subset(r, lost), micro_fixed, searched)):
                if answer is not None:
                    diagnosed[row] = answer
        okl = ok.tolist()
        pair_l = np.where(ok, d.pair, 0).astype(int).tolist()
        micro_l, accum_l = (np.where(ok, a, 0).astype(np.int64).tolist() for a in (d.micro, d.accum))
        steps_l = np.where(ok, d.steps, 0).astype(np.int64).tolist()
        batch_l, flops_l, wall_l, gh_l, cost_l, x_l = (a.tolist() for a in (d.batch, d.flops, d.wall, d.gh, d.cost, x))
        price_l = (~np.isnan(r.price)).tolist()
        shown = [(p.gpus, p.dp, p.split.tensor_parallel, p.split.pipeline_parallel, p.split.zero,
                  recompute_label(str(p.split.recompute), p.split.recompute_layers, p.split.virtual_stages))
                 for p in pairs]
        paths = [s.path for s in settings]
        given = [[s.values[j] for j in i.tolist()] for s, i in zip(settings, idx)]  # each axis's text per row
        for row, combo in enumerate(zip(*given)):
            values = dict(zip(paths, combo))
            if not okl[row]:
                answer = diagnosed.get(row)
                if answer is None:
                    yield solve_row(source, values, blame)
                    continue
                gpus, dp, tp, pp, zero, recompute = shown[answer[0]]
                yield SweepRow(values, None, None, summary=Summary(
                    "infeasible", False, gpus, None, None, None, dp, tp, pp, zero, recompute, None, None, None,
                    None, None, None, None, answer[1]))
                continue
            gpus, dp, tp, pp, zero, recompute = shown[pair_l[row]]
            steps, batch = steps_l[row], batch_l[row]
            yield SweepRow(values, None, None, summary=Summary(
                "optimal", True, gpus, batch, micro_l[row], accum_l[row], dp, tp, pp, zero, recompute, steps,
                steps * batch, flops_l[row], wall_l[row], gh_l[row], cost_l[row] if price_l[row] else None,
                x_l[row], binding[row]))
