"""Placement on one GPU count: the feasible interval of the global batch, the objective's point in
it, and the snap to a launchable integer configuration (docs/design.md section 3, steps 2–4).

Plain floats and slotted dataclasses: this is the hot path of a sweep (≥ 10,000 solves/s), so the
pydantic result is built once, by `solver`, from what this module returns.

The interval of B (tokens) is the intersection of each limit's own interval:
    min_batch   B ≥ dp·s (one sequence per replica)
    flops       f·E(B) ≤ F                       ⇔ B ≤ B_crit (F/(f·E_min) − 1)          (linear)
    deadline    W(B) = S(B)·T(B) ≤ D             ⇔ a2·B² + a1·B + a0 ≤ 0                (quadratic)
    gpu_hours   G·W(B)/3600 ≤ H                  ⇔ the same quadratic with D = 3600·H/G
    usd         price·G·W(B)/3600 ≤ U            ⇔ the same quadratic with D = 3600·U/(price·G)
    memory      micro-batch 1 fits               (does not bound B: accumulation restores it)
with the closed forms derived by sympy in `closed_forms` (emitted into `closed_forms_generated`).
"""

from __future__ import annotations

import functools
import math
import sys
from dataclasses import dataclass
from itertools import islice
from typing import NamedTuple

from budgetdsl.cost.cost_model import CostModel, step_time
from budgetdsl.cost.throughput import step_seconds
from budgetdsl.theory import closed_forms_generated as cf
from budgetdsl.theory.frontier import Frontier, balance_at, steps
from budgetdsl.theory.xp import SCALAR

INF = math.inf
TIME_LIMITS = ("deadline", "gpu_hours", "usd")
LIMIT_NAMES = ("deadline", "flops", "gpu_hours", "usd")
# An integer step count is ceil(S(B)); the tolerance keeps S(B) = 476837.0000000001 (float noise on
# an exact integer) from costing a whole extra step.
_STEP_TOL = 1e-12
TIGHT = 0.01  # a limit with less than 1 % slack binds (`binds`)
_FALLBACK_SCAN = 512  # integer batch sizes tried when the neighbours of the target all fail
_DIVISOR_SCAN = 4096


@dataclass(frozen=True, slots=True)
class Limits:
    deadline: float | None = None  # seconds
    flops: float | None = None  # FLOP
    gpu_hours: float | None = None
    usd: float | None = None
    price: float | None = None  # USD per GPU-hour

    def without(self, name: str) -> Limits:
        values = {k: getattr(self, k) for k in ("deadline", "flops", "gpu_hours", "usd", "price")}
        values[name] = None
        return Limits(**values)

    def replaced(self, name: str, value: float) -> Limits:
        values = {k: getattr(self, k) for k in ("deadline", "flops", "gpu_hours", "usd", "price")}
        values[name] = value
        return Limits(**values)

    def wall_limit(self, name: str, gpus: int) -> float | None:
        """A time-type limit as a bound on the wall clock W, seconds."""
        value = getattr(self, name)
        if value is None or (name == "usd" and not self.price):
            return None
        return wall_limit(name, value, self.price, gpus)


def wall_limit(name: str, value, price, gpus):
    """The time-type limit `name` (deadline s, gpu_hours, usd at `price` per GPU-hour) of `value` as
    a bound on the wall clock W of a run on `gpus` GPUs, seconds (floats, or a sweep's arrays)."""
    if name == "deadline":
        return value
    if name == "gpu_hours":
        return 3600.0 * value / gpus
    return 3600.0 * value / (price * gpus)


def binds(slack, limit):
    """A limit binds when the run sits on it: less than TIGHT of a positive limit left. Floats, or
    numpy arrays of a sweep's rows (elementwise)."""
    return (limit > 0) & (slack < TIGHT * limit)


class Config(NamedTuple):
    """One launchable configuration, evaluated exactly (integer steps). A named tuple: immutable,
    and built ~6x faster than a frozen dataclass (a search evaluates ~100 per solve)."""

    gpus: int
    micro_batch: int
    grad_accum: int
    data_parallel: int
    sequences: int
    batch: float  # tokens
    steps: int
    tokens: float
    flops: float
    wall: float  # seconds
    gpu_hours: float
    usd: float | None
    memory: float  # bytes per device
    violated: tuple[str, ...]

    @property
    def feasible(self) -> bool:
        return not self.violated

    def value_of(self, name: str) -> float:
        return {"deadline": self.wall, "flops": self.flops, "gpu_hours": self.gpu_hours,
                "usd": self.usd if self.usd is not None else INF, "memory": self.memory,
                "min_batch": self.batch}[name]


_new_config = tuple.__new__  # Config(*fields) without binding 14 keyword-capable arguments


def quadratic_interval(a2: float, a1: float, a0: float) -> tuple[float, float] | None:
    """{B > 0 : a2·B² + a1·B + a0 ≤ 0} for a2 > 0, a0 ≥ 0, or None when empty."""
    lo, hi, ok = quadratic_roots(a2, a1, a0)
    return (lo, hi) if ok else None


def quadratic_roots(a2, a1, a0, xp=SCALAR):
    """`quadratic_interval` as (low, high, nonempty): floats, or a sweep's arrays with `xp` numpy
    (low and high mean something only where nonempty).

    The roots are those of `cf.time_roots` (sympy's), computed in the cancellation-free form
    q = −(a1 + sign(a1)·√disc)/2, roots q/a2 and a0/q (Press et al., Numerical Recipes, §5.6)."""
    disc = a1 * a1 - 4.0 * a2 * a0
    real = disc >= 0.0
    q = -0.5 * (a1 + xp.copysign(xp.sqrt(xp.where(real, disc, 0.0)), a1))
    ok = real & (q != 0.0)
    q = xp.where(ok, q, 1.0)
    r1, r2 = q / a2, a0 / q
    hi = xp.maximum(r1, r2)
    return xp.maximum(xp.minimum(r1, r2), 0.0), hi, ok & (hi > 0.0)


def limit_intervals(cm: CostModel, fr: Frontier, limits: Limits) -> dict[str, tuple[float, float] | None]:
    """Each present limit's own interval of B (tokens); None when it holds at no batch."""
    out: dict[str, tuple[float, float] | None] = {"min_batch": (float(cm.data_parallel * cm.seq_len), INF)}
    for name in ("flops", *TIME_LIMITS):
        bound = limits.flops if name == "flops" else limits.wall_limit(name, cm.gpus)
        if bound is not None:
            lo, hi, ok = limit_interval(name, cm, fr, bound)
            out[name] = (lo, hi) if ok else None
    return out


def limit_interval(name: str, cm, fr, bound, xp=SCALAR) -> tuple:
    """(low, high, nonempty) of the batches B (tokens) that meet one limit: the FLOP budget `bound`
    (f·E(B) ≤ F, linear in B), or a time-type limit as a bound on the wall clock (`wall_limit`;
    W(B) ≤ bound, quadratic in B), from the closed forms. One plan, or a sweep's arrays (`cm` and
    `fr` with array fields, `xp` numpy)."""
    if name == "flops":
        hi = cf.flops_upper_bound(fr.b_crit, fr.e_min, cm.flops_per_token, bound)
        return 0.0, hi, hi > 0.0
    return _time_roots(cm.rate, cm.fixed_time, cm, fr, bound, xp)


HULL_SIZES = 16  # a pipeline's micro-batch sizes with a line of their own; above, one line below the rest


def size_intervals(cm, fr, bound, micro_max, xp=SCALAR):
    """With a pipeline, the reference line T(B) = f·B/rate + c (one sequence a micro-batch) bounds
    no larger micro-batch's step (less latency a token, more bubble): each size's own interval of
    the batches meeting W(B) ≤ `bound`, as (b, low, high, nonempty), cut to the batches it launches
    (B = m·b·dp·s, m ≥ 1). Sizes 2 to HULL_SIZES exactly (`wall_lines`: T(b, m) = m·u + v), then
    b = 0: one line below every larger size that fits (the largest's line less the bubble the
    smallest of them saves), on no grid. One plan, or a sweep's arrays (`micro_max` an array)."""
    dp, s, f = cm.data_parallel, cm.seq_len, cm.flops_per_token
    lines = size_lines(cm._step, int(micro_max)) if xp is SCALAR else _size_lines(cm._step, micro_max, xp)
    for b, u, v in lines:
        if b:
            grid = b * dp * s
            lo, hi, ok = _time_roots(f * grid / u, v, cm, fr, bound, xp)
            ok = ok & (micro_max >= b) & (lo < INF)
            lo = xp.maximum(xp.ceil(xp.where(ok, lo, 0.0) / grid), 1.0) * grid
            hi = xp.where(hi < INF, xp.floor(xp.minimum(xp.where(ok, hi, 0.0), 1e300) / grid) * grid, hi)
            yield b, lo, hi, ok & (lo <= hi)
        else:
            big = xp.maximum(micro_max, HULL_SIZES + 1.0)
            lo, hi, ok = _time_roots(f * big * dp * s / u, v, cm, fr, bound, xp)
            yield 0, lo, hi, ok & (micro_max > HULL_SIZES) & (lo < INF)


@functools.lru_cache(maxsize=4096)  # a pure function of a layout's step and its room, asked again for every limit
def size_lines(step, micro_max: int) -> tuple:
    """`_size_lines` of one layout, floats."""
    return tuple(_size_lines(step, micro_max, SCALAR))


def _size_lines(step, micro_max, xp):
    """(b, u, v) of `size_intervals`' lines: T = m·u + v of sizes 2 to HULL_SIZES, then (0, u, v)
    of the line below every larger size (v less the bubble the smallest of them saves)."""
    top = int(micro_max) if xp is SCALAR else int(xp.max(micro_max))
    for b in range(2, min(top, HULL_SIZES) + 1):
        yield (b, *wall_lines(step, float(b), xp))
    if top > HULL_SIZES:
        big = xp.maximum(micro_max, HULL_SIZES + 1.0)
        u, v = wall_lines(step, big, xp)
        yield 0, u, v - step.bubble_k * (big - HULL_SIZES - 1.0)


def _may_reach(cm: CostModel, a: float, c: float) -> bool:
    """Whether some micro-batch size's line (`size_lines`) lies below the reference line T(B) =
    f·B/rate + c somewhere in [a, c] — what its interval needs to reach batches there that the
    reference's does not (W = S(B)·T(B), one S for both). Their difference is linear in B: its
    ends decide (an open end: its slope). A necessary test of a few float operations a size, so
    `_sized` computes the sizes' intervals only where one could widen toward the target."""
    per, ref = float(cm.data_parallel * cm.seq_len), cm.flops_per_token / cm.rate
    tol = _REACH_MARGIN * (cm.fixed_time + ref * a)
    for b, u, v in size_lines(cm._step, int(cm.micro_batch_max)):
        slope = u / ((b or max(cm.micro_batch_max, HULL_SIZES + 1.0)) * per) - ref
        gap = v - cm.fixed_time
        if gap + slope * a < tol or (slope < 0.0 if c == INF else gap + slope * c < tol):
            return True
    return False


_REACH_MARGIN = 1e-9  # `_may_reach` rules a size out only this clearly (its line and the reference's: float noise)


def size_pieces(cm, fr, bound, micro_max, lo, hi, xp=SCALAR):
    """`size_intervals` intersected with [lo, hi] (the other limits): (their hull's low, high and
    nonempty, the pieces as (b, low, high, nonempty)) — what a pipeline's sizes add to the reference
    line's interval. One plan (floats; only the nonempty pieces), or a sweep's arrays."""
    h_lo, h_hi, h_ok = INF + lo * 0.0, -INF + lo * 0.0, lo < -INF
    pieces = []
    for b, p_lo, p_hi, ok in size_intervals(cm, fr, bound, micro_max, xp):
        p_lo, p_hi = xp.maximum(p_lo, lo), xp.minimum(p_hi, hi)
        ok = ok & (p_lo <= p_hi)
        h_lo = xp.where(ok, xp.minimum(h_lo, p_lo), h_lo)
        h_hi = xp.where(ok, xp.maximum(h_hi, p_hi), h_hi)
        h_ok = h_ok | ok
        if xp is not SCALAR or ok:
            pieces.append((b, p_lo, p_hi, ok))
    return h_lo, h_hi, h_ok, tuple(pieces)


def piece_sizes(b: int, micro_max) -> tuple:
    """The micro-batch sizes `place` weighs for a piece of `size_intervals`: b itself, or for the
    line below the larger sizes (b = 0) the least and the largest of them (`micro_max`: an integer,
    or a sweep's array)."""
    return (b,) if b else (HULL_SIZES + 1, micro_max)


def piece_accumulations(p_lo, p_hi, clipped, grid, xp=SCALAR) -> tuple:
    """(floor, ceiling, least, most) accumulation counts of a piece [p_lo, p_hi] of batches on the
    grid B = m·grid: the two nearest the clipped target, and the piece's own m range (a candidate
    outside it is no candidate). Floats, or a sweep's arrays."""
    m_lo = xp.maximum(1.0, xp.ceil(p_lo / grid * (1.0 - 1e-12)))
    m_hi = xp.where(p_hi < INF, xp.floor(xp.minimum(p_hi, 1e300) / grid * (1.0 + 1e-12)), INF)
    m_t = xp.minimum(xp.maximum(clipped / grid, m_lo), m_hi)
    return xp.floor(m_t), xp.ceil(m_t), m_lo, m_hi


def clip_pieces(target, pieces, xp=SCALAR):
    """The target clipped into the union of `pieces` ((low, high, nonempty) each): itself inside
    one, else the nearest end, the lower of two as near. Floats, or a sweep's arrays."""
    best, gap = target, INF + target * 0.0
    for p_lo, p_hi, ok in pieces:
        at = xp.minimum(xp.maximum(target, p_lo), p_hi)
        d = xp.abs(at - target)
        take = ok & ((d < gap) | ((d == gap) & (at < best)))
        best, gap = xp.where(take, at, best), xp.where(take, d, gap)
    return best


def hull(a_lo, a_hi, a_ok, b_lo, b_hi, b_ok, xp=SCALAR) -> tuple:
    """(low, high, nonempty) of the hull of two intervals, either possibly empty: how a pipeline's
    sizes widen an interval of B (`_sized`; the sweep kernel's `_start` and `_widened`). Floats, or
    a sweep's arrays."""
    return (xp.where(a_ok, xp.where(b_ok, xp.minimum(a_lo, b_lo), a_lo), b_lo),
            xp.where(a_ok, xp.where(b_ok, xp.maximum(a_hi, b_hi), a_hi), b_hi), a_ok | b_ok)


def sizes_matter(target, r_lo, r_hi, r_ok, h_lo, h_hi, h_ok, xp=SCALAR):
    """Whether a pipeline's sizes (`size_pieces`' hull h) reach batches nearer the objective's
    target than the reference interval r (after the other limits; r_ok: nonempty) does: there
    `place` weighs them (the sweep kernel leaves such elements to it). Floats, or a sweep's arrays
    with `xp` numpy."""
    return h_ok & (xp.logical_not(r_ok) | ((target < r_lo) & (h_lo < r_lo)) | ((target > r_hi) & (h_hi > r_hi)))


def _time_roots(rate, fixed, cm, fr, bound, xp):
    a2, a1, a0 = cf.time_quadratic(fr.b_crit, fr.e_min, cm.flops_per_token, rate, fixed, bound)
    return quadratic_roots(a2, a1, a0, xp)


def objective_target(objective: str, cm, fr, xp=SCALAR):
    """The objective's unconstrained batch (tokens); 0 means 'as small as allowed'. One plan, or a
    sweep's arrays (`cm` and `fr` with array fields, `xp` numpy)."""
    if objective == "balanced":
        return cf.balanced_batch(fr.b_crit)
    if objective in ("min_time", "min_cost"):
        # At a fixed GPU count cost = price·G·W(B)/3600, so both minimize W(B).
        c = cm.fixed_time
        return xp.where(c > 0.0, cf.min_time_batch(fr.b_crit, cm.flops_per_token, cm.rate, xp.maximum(c, 0.0), xp),
                        0.0)
    return 0.0  # min_flops: f·E(B) grows with B


def no_room(micro_max, micro_fixed: int | None):
    """Not even the micro-batch asked for (one sequence, or the pinned size) fits in memory."""
    return (micro_max < 1) | (micro_fixed is not None and micro_fixed > micro_max)


def open_end(n_lo, n_t, xp=SCALAR):
    """The last count `place` weighs when no limit bounds the batch from above: one past the
    target's (or the least count's) ceiling."""
    return xp.maximum(n_lo, xp.ceil(n_t)) + 1


KIND = {"balanced": 0, "min_time": 1, "min_flops": 2, "min_cost": 3}  # `measure`'s kind of each objective


def measure(kind: int, b_crit, batch, wall, flops, cost):
    """An objective's measure of a configuration, lower is better: kind 0 balanced, (S/S_min)(E/E_min)
    at the batch; 1 the wall clock (min_time); 2 the FLOPs (min_flops); 3 the cost (min_cost: USD
    with a price, else GPU-hours). Floats, or a sweep's arrays."""
    if kind == 0:
        return balance_at(b_crit, batch)
    if kind == 1:
        return wall
    return flops if kind == 2 else cost


def score(objective: str, fr: Frontier, cfg: Config) -> float:
    """The objective's measure of a configuration (lower is better)."""
    return measure(KIND[objective], fr.b_crit, cfg.batch, cfg.wall, cfg.flops,
                   cfg.usd if cfg.usd is not None else cfg.gpu_hours)


def evaluate(cm: CostModel, fr: Frontier, limits: Limits, micro: int, accum: int,
             micro_max: int) -> Config:
    """A configuration's exact numbers and the limits it violates."""
    return _config(cm, limits, micro, accum, micro_max, _numbers(cm, fr, micro, accum))


def _numbers(cm: CostModel, fr: Frontier, micro: int, accum: int) -> tuple:
    """What `evaluate` computes before the limits: (sequences, batch, steps, tokens, flops, wall,
    GPU-hours, memory), a pure function of the cost model, the frontier, micro and accum."""
    return (*numbers(cm, fr.b_crit, fr.e_min, micro, accum), cm.memory_at(micro))


def numbers(cm, b_crit, e_min, micro, accum, xp=SCALAR) -> tuple:
    """(sequences, batch, steps, tokens, flops, wall clock, GPU-hours) of `micro` × `accum` on `cm`:
    one configuration (floats), or a sweep's (numpy arrays; `cm`'s fields arrays, `xp` numpy)."""
    sequences = micro * accum * cm.data_parallel
    batch = sequences * cm.seq_len * 1.0  # tokens, a float: the exact (integer) product, rounded once
    n = xp.maximum(1, xp.ceil(steps(e_min, b_crit, batch) * (1.0 - _STEP_TOL)))  # ceil(S(B)), ≥ 1
    tokens = n * batch
    wall = n * step_time(cm, batch, accum, xp)
    return sequences, batch, n, tokens, cm.flops_per_token * tokens, wall, cm.gpus * wall / 3600.0


def _config(cm: CostModel, limits: Limits, micro: int, accum: int, micro_max: int, numbers: tuple) -> Config:
    """`evaluate` from its `_numbers`: the price, the limits violated, the Config."""
    sequences, batch, steps, tokens, flops, wall, gpu_hours, memory = numbers
    price = limits.price
    usd = gpu_hours * price if price else None
    over = violations(limits, micro, micro_max, wall, flops, gpu_hours, usd)
    violated = tuple(n for n, o in zip(VIOLATIONS, over) if o) if any(over) else ()
    return _new_config(Config, (cm.gpus, micro, accum, cm.data_parallel, sequences, batch, steps, tokens, flops,
                                wall, gpu_hours, usd, memory, violated))


VIOLATIONS = ("memory", *LIMIT_NAMES)  # what `violations` checks, in its order


def violations(limits, micro, micro_max, wall, flops, gpu_hours, usd) -> tuple:
    """Whether a configuration breaks each of VIOLATIONS: a micro-batch above the room in memory, a
    number above its limit. Floats with `Limits` (an absent limit None; usd None without a price),
    or a sweep's arrays with its rows' limits (absent: NaN, which no comparison exceeds)."""
    return (micro > micro_max, _over(wall, limits.deadline), _over(flops, limits.flops),
            _over(gpu_hours, limits.gpu_hours), _over(usd, limits.usd))


def _over(value, limit):
    return limit is not None and value is not None and value > limit


NUMBERS_FRONTIERS = 8  # frontiers whose evaluations a cost model keeps (a sweep's B_crit axis moves on)


def _numbers_kept(cm: CostModel, fr: Frontier) -> dict:
    """The evaluations (`numbers`, by (micro, accum)) of `cm` on `fr`, kept on the cost model: a
    solve with other limits (a sweep's row, an edit in the TUI) evaluates the same configurations
    again, and the caller's `SolveCache` owns the cost model, so nothing outlives it."""
    kept = cm._numbers
    key = (fr.b_crit, fr.e_min)
    hit = kept.get(key)
    if hit is None:
        if len(kept) >= NUMBERS_FRONTIERS:
            del kept[next(iter(kept))]
        hit = kept[key] = {}
    return hit


def largest_divisor_at_most(n: int, cap: int) -> int:
    """The largest divisor of n that is ≤ cap (1 always divides; the scan is bounded)."""
    k = min(n, cap)
    if k <= 1:
        return 1
    if n % k == 0:  # the common case: the cap (or n itself) divides
        return k
    for _ in range(_DIVISOR_SCAN - 1):
        k -= 1
        if k <= 1:
            return 1
        if n % k == 0:
            return k
    return 1


def _configs_for(n: int, micro_max: int, micro_fixed: int | None, pipeline: bool = False) -> list[tuple[int, int]]:
    """(micro, accum) pairs near n sequences per replica: the fewest accumulation steps, and n
    exactly; with a pipeline also micro-batches of one sequence, the most micro-batches per step
    and so the smallest bubble."""
    return list(_pairs_near(n, micro_max, micro_fixed, pipeline))


@functools.lru_cache(maxsize=1 << 16)  # a pure function of four integers, asked the same few on every solve
def _pairs_near(n: int, micro_max: int, micro_fixed: int | None, pipeline: bool) -> tuple[tuple[int, int], ...]:
    return tuple(sorted({(m, a) for m, a, there in split_candidates(n, micro_max, micro_fixed, pipeline,
                                                                     largest_divisor_at_most) if there}))


def split_candidates(n, micro_max, micro_fixed: int | None, pipeline, divisor, xp=SCALAR) -> list[tuple]:
    """The (micro, accum, exists) splits weighed for n sequences per replica: with a pinned micro-batch
    the accumulations on either side of n; else the fewest accumulation steps (the two micro-batches
    nearest n over them), n exactly (`divisor(n, cap)`: the largest micro-batch dividing n), and
    with a pipeline micro-batches of one sequence (the most per step, the smallest bubble). Integers
    for one count (`_pairs_near`), or a sweep's integer arrays with `xp` numpy and `divisor` on
    arrays; a split may repeat another."""
    if micro_fixed is not None:
        a = xp.maximum(1, n // micro_fixed)
        return [(micro_fixed, a, True), (micro_fixed, a + 1, a * micro_fixed < n)]
    cap = xp.maximum(1, micro_max)
    a = -(-n // cap)
    m1, m2 = n // a, -(-n // a)
    d = divisor(n, cap)
    return [(m1, a, (m1 >= 1) & (m1 <= cap)), (m2, a, (m2 >= 1) & (m2 <= cap)), (d, n // d, True),
            (1, n, pipeline)]


class Placement(NamedTuple):
    """The answer on one GPU count (a named tuple, as `Config`)."""

    cm: CostModel
    frontier: Frontier
    intervals: dict[str, tuple[float, float] | None]
    lo: float
    hi: float
    target: float  # the objective's unconstrained batch
    clipped: float | None  # the target clipped into [lo, hi]
    config: Config | None
    micro_max: int
    empty_reason: str | None  # why there is no configuration

    @property
    def feasible(self) -> bool:
        return self.config is not None and self.config.feasible


_new_placement = tuple.__new__  # Placement(*fields), as `_new_config`


def place(cm: CostModel, fr: Frontier, limits: Limits, objective: str,
          micro_fixed: int | None = None, evals: dict | None = None) -> Placement:
    """The objective's best launchable configuration on `cm.gpus` GPUs, or why there is none.
    `evals`: what was already computed on this cost model, frontier and limits — the
    configurations evaluated, keyed by (micro, accum), the limits' intervals, the (micro, accum)
    candidates of each sequence count — so the objectives of one solve share them."""
    if evals is None:
        evals = {}
    micro_max = cm.micro_batch_max
    shared = evals.get("intervals")
    if shared is None:
        shared = evals["intervals"] = _shared(cm, fr, limits)
    intervals, lo, hi, per, n_lo, n_hi, configs, counts, sized = shared
    target = objective_target(objective, cm, fr)
    if no_room(micro_max, micro_fixed):
        return _new_placement(Placement, (cm, fr, intervals, lo, hi, target, None, None, micro_max, "memory"))
    pieces = None if sized is None or lo <= target <= hi else _sized(cm, fr, limits, sized, target, intervals, lo, hi)
    if pieces is not None:  # the target is nearer batches only larger micro-batches reach
        pieces, intervals, lo, hi, n_lo, n_hi = pieces
        evals[("pieces", objective, micro_fixed)] = True  # not `carried` on
    if lo > hi:
        return _new_placement(Placement, (cm, fr, intervals, lo, hi, target, None, None, micro_max, "interval"))
    clipped = _clip(target, lo, hi) if pieces is None else clip_pieces(target, [p[1:] for p in pieces])
    n_t = clipped / per
    n_lo = least_sequences(lo, per) if n_lo is None else n_lo
    n_hi = open_end(n_lo, n_t) if n_hi is None else n_hi
    if n_lo > n_hi:
        return _new_placement(Placement, (cm, fr, intervals, lo, hi, target, clipped, None, micro_max, "integer"))
    entries = counts.get(micro_fixed)
    if entries is None:
        entries = counts[micro_fixed] = {}
    pipeline = cm.split.pipeline_parallel > 1
    kind = KIND[objective]
    bc = fr.b_crit
    best: Config | None = None
    best_key: tuple[float, int, float] | None = None

    # The neighbours of the target, and the interval's ends (the objective may prefer either);
    # each count's feasible configurations are kept (every objective asks for the ends, and the
    # neighbours overlap). Ties (the batch decides most objectives) go to the faster run, then to
    # fewer accumulation steps (with a pipeline, more micro-batches shrink the bubble).
    f, c = math.floor(n_t), math.ceil(n_t)
    f = n_lo if n_lo > f else (n_hi if f > n_hi else f)
    c = n_lo if n_lo > c else (n_hi if c > n_hi else c)
    order = (f,) if f == c else (f, c)
    neighbours = len(order)
    if n_lo not in order:
        order += (n_lo,)
    hit = False
    for i, n in enumerate(order):
        entry = entries.get(n)
        if entry is None:
            entry = entries[n] = _feasible_at(cm, fr, limits, n, micro_max, micro_fixed, pipeline, configs)
        if i < neighbours:  # the target's neighbours: whether either launches exactly
            hit = entry[0] or hit
        best, best_key = _better(entry[1], kind, bc, clipped, best, best_key)
    if n_hi not in order:  # the upper end last; what came before it is kept for `carried`
        end = evals[("end", objective, micro_fixed)] = [best, best_key, hit, False]
        entry = entries.get(n_hi)
        if entry is None:
            entry = entries[n_hi] = _feasible_at(cm, fr, limits, n_hi, micro_max, micro_fixed, pipeline, configs)
        best, best_key = _better(entry[1], kind, bc, clipped, best, best_key)
        end[3] = best is not end[0]  # the upper end's configuration won
        order += (n_hi,)
    if not hit and pieces is not None:
        # The target lies where only a pipeline's larger micro-batch sizes meet the time limits:
        # each size's accumulations nearest it.
        met = [cfg for b, m in _piece_splits(pieces, clipped, per, micro_max, micro_fixed)
               if not (cfg := _config_at(cm, fr, limits, b, m, micro_max, configs)).violated]
        hit = bool(met)
        best, best_key = _better(met, kind, bc, clipped, best, best_key)
    if not hit:
        # Integer steps pushed the target's neighbours over a limit: walk outward from the target
        # to the nearest launchable batch, so the answer stays next to the objective's choice.
        def consider(n: int, _live: bool) -> bool:
            nonlocal best, best_key
            entry = entries.get(n)
            if entry is None:
                entry = entries[n] = _feasible_at(cm, fr, limits, n, micro_max, micro_fixed, pipeline, configs)
            best, best_key = _better(entry[1], kind, bc, clipped, best, best_key)
            return entry[0]
        walk_out(True, min(max(round(n_t), n_lo), n_hi), n_lo, n_hi, order, consider, _FALLBACK_SCAN)
    if kind & 1 and cm._step is not None:
        # The wall-clock objectives: the split the walk met is checked against every split
        # (`_wall_search`), as T is not linear in B across accumulation boundaries.
        flops = intervals.get("flops")
        n_max = INF if flops is None else most_sequences(flops[1], per)
        best = _wall_search(cm, fr, limits, micro_max, micro_fixed, n_max, configs,
                            lambda found, b, k: _better(found, kind, bc, clipped, b, k), best, best_key)
    return _new_placement(Placement, (cm, fr, intervals, lo, hi, target, clipped, best, micro_max,
                                      None if best is not None else "integer"))


_BOUND_MARGIN = 1e-9  # a lower bound this close to the best is not trusted to exclude (float noise)
WALL_SIZES = 64  # micro-batch sizes `_wall_search` weighs at most (its work is linear in them)
WALL_EVALUATIONS = 64  # splits `_wall_search` evaluates at most (near-ties of a degenerate plan)
_WALL_VECTOR = 8  # sizes `_WallSizes` adds at once on numpy arrays (fewer: one by one, as cheap)


def wall_lines(step, micro, xp=SCALAR):
    """(u, v) of T(micro, m) = m·u + v: the step time of m micro-batches of `micro` sequences is
    affine in m (throughput.StepCost: every share is per micro-batch or per step; ZeRO-3's exposed
    collective and ZeRO-2's further reductions are m times a per-micro-batch amount)."""
    t1, t2 = step_seconds(step, micro, 1.0, xp), step_seconds(step, micro, 2.0, xp)
    return t2 - t1, 2.0 * t1 - t2


def wall_floor(s_min, beta, u, v, m):
    """S_min(1 + β/m)(m·u + v): the wall clock of m micro-batches on the continuous frontier (β =
    B_crit over the batch of one micro-batch; eq. 2.11), a lower bound of the integer-step one.
    Convex in m (u > 0), least at m = √(β·v/u)."""
    return s_min * (1.0 + beta / m) * (m * u + v)


def least_accumulation(beta, u, v, m_lo, m_hi, xp=SCALAR):
    """The real m in [m_lo, m_hi] where `wall_floor` is least (√(β·v/u) clipped; floats, or a
    sweep's arrays with `xp` numpy)."""
    return xp.minimum(xp.maximum(xp.sqrt(xp.maximum(0.0, beta * v / u)), m_lo), m_hi)


def micro_limit(s_min, beta1, per_sequence, fixed, threshold, xp=SCALAR):
    """The largest micro-batch (sequences) that can run faster than `threshold` seconds: every
    split of n = m·b ≥ b sequences per replica takes at least S_min(1 + β₁/n)(n·K + fixed) (K the
    compute of one sequence, β₁ = B_crit over one sequence per replica; the other shares of T are
    ≥ 0), convex in n, so b is at most that bound's upper root; 0 when no n gets under it."""
    lo, hi, ok = quadratic_roots(per_sequence, fixed + beta1 * per_sequence - threshold / s_min, beta1 * fixed, xp)
    return xp.where(ok, xp.floor(hi * (1.0 + _BOUND_MARGIN)), 0.0)


def _wall_search(cm: CostModel, fr: Frontier, limits: Limits, micro_max: int, micro_fixed: int | None,
                 n_max: float, configs: dict, better, best, best_key):
    """The wall-clock objectives' best split over every micro-batch size and accumulation count
    with at most `n_max` sequences per replica (the FLOP budget), from `best` (its `best_key` the
    comparisons start from; the placement keeps the configuration only): micro-batch sizes up
    to `micro_limit` (and WALL_SIZES), and a split only where its `wall_floor` is below the best
    wall clock met, so the answer is exact wherever the bound leaves at most WALL_SIZES sizes and
    WALL_EVALUATIONS splits (a plan whose splits all nearly tie — a fixed step of 1e10 s — stops
    there, never worse than the walk's answer).

    Anything faster than a feasible run meets the time limits too (each is W ≤ a bound on one GPU
    count); with none feasible yet, the least wall clock met that only a time limit refused
    stands for it (nothing slower meets that limit either)."""
    s_min, step = fr.s_min, cm._step
    if micro_max < 1 or step is None:
        return best
    per = float(cm.seq_len * cm.data_parallel)
    size = _WallSizes(step, fr, per, configs["numbers"])
    # the best, its key, the threshold, the evaluations left
    state = [best, best_key, best.wall if best is not None else INF, WALL_EVALUATIONS]
    beta1 = fr.b_crit / per
    # micro-batches past `micro_limit` of the best met cannot beat it; past WALL_SIZES (sequences
    # of a few tokens, a micro-batch of thousands) the sizes are not searched
    top = min(micro_max, WALL_SIZES) if best is None else min(micro_max, WALL_SIZES, int(micro_limit(
        s_min, beta1, step.per_sequence, step.fixed, state[2])))
    by_size = best is None and micro_fixed is None  # nothing met yet: by size, else by least floor
    for floor0, b in size.candidates(top, micro_fixed, by_size, state[2]):
        threshold = state[2]
        if by_size:
            if threshold < INF:  # past the limit of the least wall met, nothing
                top = min(top, int(micro_limit(s_min, beta1, step.per_sequence, step.fixed, threshold)))
            if b > top:
                break
        elif floor0 * (1.0 - _BOUND_MARGIN) > threshold:
            break
        m_hi = INF if n_max == INF else float(n_max // b)
        if state[3] <= 0:
            break
        if b <= top and m_hi >= 1.0 and floor0 * (1.0 - _BOUND_MARGIN) <= threshold:
            _accumulations(cm, fr, limits, micro_max, configs, better, size(b), b, m_hi, state)
    return state[0]


class _WallSizes:
    """Each micro-batch size's least `wall_floor` over m ≥ 1 and its (u, v, β), computed as asked
    and kept with the cost model's evaluations on this frontier (new limits ask again), by size."""

    __slots__ = ("step", "fr", "per", "kept", "sizes")

    def __init__(self, step, fr: Frontier, per: float, kept: dict) -> None:
        self.step, self.fr, self.per, self.kept = step, fr, per, kept
        sizes = kept.get("wall_sizes")
        if sizes is None:
            sizes = kept["wall_sizes"] = {}
        self.sizes = sizes

    def __call__(self, b: int) -> tuple[float, float, float, float]:
        line = self.sizes.get(b)
        if line is None:
            line = self.sizes[b] = self._line(b)
        return line

    def _line(self, k: int) -> tuple[float, float, float, float]:
        u, v = wall_lines(self.step, float(k))
        beta = self.fr.b_crit / (k * self.per)
        # T with no slope in m (a fixed time that swamps the compute): no least accumulation,
        # a NaN floor that is never below a threshold (numpy's NaN in the sweep kernel)
        floor = wall_floor(self.fr.s_min, beta, u, v, least_accumulation(beta, u, v, 1.0, INF)) \
            if u != 0.0 else math.nan
        return floor, u, v, beta

    def fill(self, wanted: list[int]) -> None:
        """The sizes of `wanted` not yet kept: on numpy arrays where numpy is already loaded and
        they are many (`_vector`), else one by one."""
        sizes = self.sizes
        missing = [b for b in wanted if b not in sizes]
        if len(missing) < _WALL_VECTOR or not self._vector(missing):
            for b in missing:
                sizes[b] = self._line(b)

    def _vector(self, missing: list[int]) -> bool:
        """The sizes of `missing` at once on numpy arrays, where numpy is already loaded (a large
        search: the walk's bounds and pool read it; a small plan never pays its import):
        `wall_lines`, `least_accumulation` and `wall_floor` written once against the namespace, the
        same float operations in the same order, so the same numbers. False (nothing added) where a
        line is not finite: `max` and numpy's `maximum` differ on NaN, so those go one by one."""
        np = sys.modules.get("numpy")
        if np is None:
            return False
        fr = self.fr
        k = np.array(missing, dtype=float)
        with np.errstate(all="ignore"):
            u, v = wall_lines(self.step, k, np)
            if not (np.isfinite(u).all() and np.isfinite(v).all()):
                return False
            beta = fr.b_crit / (k * self.per)
            floor = np.where(u != 0.0, wall_floor(fr.s_min, beta, u, v, least_accumulation(beta, u, v, 1.0, INF, np)),
                             math.nan)
        self.sizes.update(zip(missing, zip(floor.tolist(), u.tolist(), v.tolist(), beta.tolist())))
        return True

    def bounds(self, top: int) -> list[float]:
        """A lower bound of each size's least floor, sizes 1 to `top` (kept): T(b, m) ≥ m·(b·K +
        latency) + bubble_k·b + fixed (`throughput.step_seconds`: the exposed data-parallel time and
        ZeRO-2's further reductions are ≥ 0), so m·u + v, which is T(b, m) (`wall_lines`), is at
        least that line in m, and its `wall_floor` over m ≥ 1 at least the line's (each least at
        `least_accumulation`); 0 (no bound) where the line has no slope."""
        out = self.kept.get("wall_bounds")
        if out is None:
            out = self.kept["wall_bounds"] = []
        step, fr = self.step, self.fr
        while len(out) < top:
            b = len(out) + 1
            slope, line = b * step.per_sequence + step.latency, step.bubble_k * b + step.fixed
            beta = fr.b_crit / (b * self.per)
            out.append(wall_floor(fr.s_min, beta, slope, line, least_accumulation(beta, slope, line, 1.0, INF))
                       if slope > 0.0 else 0.0)
        return out

    def candidates(self, top: int, micro_fixed: int | None, by_size: bool, threshold: float = INF):
        """(least floor, b): a pinned size alone; by size from 1; or by least floor, the sizes up to
        `top` whose floor's lower bound (`bounds`, with a margin for rounding) leaves them under
        `threshold`: `_wall_search` breaks off at the first size whose floor is over its threshold,
        which only falls, so the sizes it meets before that are the same as in the order of every
        size; the floors of the others are not computed."""
        if micro_fixed is not None:
            return [(self(micro_fixed)[0], micro_fixed)] if micro_fixed <= top else []
        if by_size:
            return ((self(b)[0], b) for b in range(1, top + 1))
        keep = (1.0 - 1e-9) * (1.0 - _BOUND_MARGIN)
        bounds = self.bounds(top)
        filled = self.kept.get("wall_filled")  # (top, threshold) whose sizes under it are all kept
        if filled is None or top > filled[0] or threshold > filled[1]:
            self.fill([b for b in range(1, top + 1) if not bounds[b - 1] * keep > threshold])
            self.kept["wall_filled"] = (top, threshold)
        # every kept size by floor (kept until a size is added: new limits on the same cost model
        # read it again), those up to `top` under the threshold taken from it
        sizes, kept = self.sizes, self.kept.get("wall_order")
        if kept is None or kept[0] != len(sizes):
            floors = [(line[0], b) for b, line in sizes.items()]
            if any(f != f for f, _ in floors):  # NaN floors last (never below a threshold)
                floors.sort(key=lambda fb: (fb[0] != fb[0], 0.0 if fb[0] != fb[0] else fb[0], fb[1]))
            else:
                floors.sort()
            kept = self.kept["wall_order"] = (len(sizes), floors)
        return ((f, b) for f, b in kept[1] if b <= top and not bounds[b - 1] * keep > threshold)


def _accumulations(cm: CostModel, fr: Frontier, limits: Limits, micro_max: int, configs: dict, better,
                   line: tuple, b: int, m_hi: float, state: list) -> None:
    """`_wall_search` at micro-batch size b: the accumulations out from the least of `wall_floor`
    while the floor is below the threshold, each evaluated and weighed; `state` = [best, its key,
    threshold] updated."""
    _, u, v, beta = line
    s_min = fr.s_min
    mc = least_accumulation(beta, u, v, 1.0, m_hi)
    if wall_floor(s_min, beta, u, v, mc) * (1.0 - _BOUND_MARGIN) > state[2]:
        return
    lower = max(1, math.floor(mc))
    for m, dm in ((lower, -1), (lower + 1, 1)):
        while 1 <= m <= m_hi and state[3] > 0 and \
                wall_floor(s_min, beta, u, v, m) * (1.0 - _BOUND_MARGIN) <= state[2]:
            state[3] -= 1
            cfg = _config_at(cm, fr, limits, b, m, micro_max, configs)
            if not cfg.violated:
                state[0], state[1] = better((cfg,), state[0], state[1])
                state[2] = state[0].wall
            elif state[0] is None and "flops" not in cfg.violated:
                state[2] = min(state[2], cfg.wall)  # only a time limit refused it: nothing slower passes
            m += dm


def _shared(cm: CostModel, fr: Frontier, limits: Limits, configs: dict | None = None,
            counts: dict | None = None) -> tuple:
    """What every objective of one cost model, frontier and limits shares in `place`: the limits'
    intervals, their intersection [lo, hi], tokens per sequence per replica, the interval's integer
    ends (sequences per replica), the configurations by (micro, accum), the feasible ones of each
    count (`configs` and `counts`: those handed on by `seeded`), and with a pipeline and a time
    limit what its micro-batch sizes need (`_sized`; else None)."""
    intervals = limit_intervals(cm, fr, limits)
    lo, hi = _intersection(intervals, ())
    sized = None
    if cm._step is not None and cm.split.pipeline_parallel > 1:
        bounds = [b for b in (limits.wall_limit(n, cm.gpus) for n in TIME_LIMITS) if b is not None]
        if bounds:
            b_lo, b_hi = _intersection(intervals, TIME_LIMITS)
            if b_lo <= b_hi and (lo != b_lo or hi != b_hi):  # where the time limits cut the others' interval
                sized = [min(bounds), b_lo, b_hi, None]  # the least wall bound, the other limits', the pieces
    per = float(cm.seq_len * cm.data_parallel)  # tokens per sequence-per-replica
    n_lo = least_sequences(lo, per) if lo <= hi and lo < INF else None
    n_hi = most_sequences(hi, per) if n_lo is not None and hi < INF else None
    if configs is None:
        configs = {"numbers": _numbers_kept(cm, fr)}  # by (micro, accum); the numbers before the limits
    return (intervals, lo, hi, per, n_lo, n_hi, configs, {} if counts is None else counts, sized)


def _sized(cm: CostModel, fr: Frontier, limits: Limits, sized: list, target: float, intervals: dict,
           lo: float, hi: float):
    """A pipeline's micro-batch sizes where they reach batches nearer `target` than the reference
    interval [lo, hi] (`sizes_matter`): (the pieces, (b, low, high, True) each with the reference as
    b = 1, the intervals with each time limit's widened likewise, the pieces' hull's low and high
    and its integer ends); else None."""
    if lo <= hi and not _may_reach(cm, *((sized[1], lo) if target < lo else (hi, sized[2]))):
        return None
    if sized[3] is None:
        sized[3] = size_pieces(cm, fr, sized[0], cm.micro_batch_max, sized[1], sized[2])
    h_lo, h_hi, h_ok, found = sized[3]
    if not sizes_matter(target, lo, hi, lo <= hi, h_lo, h_hi, h_ok):
        return None
    pieces = (((1, lo, hi, True),) if lo <= hi else ()) + found
    widened = dict(intervals)
    for name in TIME_LIMITS:  # each time limit's own interval: the hull with its sizes' likewise
        bound = limits.wall_limit(name, cm.gpus)
        if bound is not None:
            iv = widened[name]
            w_lo, w_hi, w_ok, _ = size_pieces(cm, fr, bound, cm.micro_batch_max, 0.0, INF)
            a_lo, a_hi = iv if iv is not None else (0.0, 0.0)
            i_lo, i_hi, i_ok = hull(a_lo, a_hi, iv is not None, w_lo, w_hi, w_ok)
            widened[name] = (i_lo, i_hi) if i_ok else None
    lo, hi, _ = hull(lo, hi, lo <= hi, h_lo, h_hi, h_ok)
    per = float(cm.seq_len * cm.data_parallel)
    return pieces, widened, lo, hi, least_sequences(lo, per), (most_sequences(hi, per) if hi < INF else None)


def _intersection(intervals: dict, leave: tuple) -> tuple[float, float]:
    """[lo, hi] of the intervals not named in `leave`; (inf, 0) where one of them is empty."""
    lo, hi = 0.0, INF
    for name, iv in intervals.items():
        if name in leave:
            continue
        if iv is None:
            return INF, 0.0
        lo, hi = max(lo, iv[0]), min(hi, iv[1])
    return lo, hi


# New limits on a cost model and frontier already placed (a sweep's rows, the TUI's edits, the
# search replayed) mostly move no evaluated configuration across a limit: the evaluations are then
# handed on (`seeded`), and a placement whose inputs agree too is handed on (`carried`).
SEED_CONFIGS = 256  # configurations handed on at most (each new upper end adds a few): past it, afresh


def _limit_values(limits: Limits) -> list[float]:
    """The limits on a configuration's wall clock, FLOPs, GPU-hours and USD (`violations`), an
    absent one (or USD without a price) as +inf."""
    return [INF if v is None else v for v in (limits.deadline, limits.flops, limits.gpu_hours,
                                              limits.usd if limits.price else None)]


def seeded(cm: CostModel, fr: Frontier, limits: Limits, prev_limits: Limits, prev: dict) -> dict | None:
    """`place`'s evaluations (`evals`) on `limits`, handed on from `prev`, those of the same cost
    model and frontier on `prev_limits`; None where one of them breaks another set of limits there.

    A configuration's numbers do not depend on the limits (`_numbers`); what does is the limits it
    violates (`violations`: a number above its limit; the memory room is the cost model's) and its
    cost in USD (the price: the same one is required). Moving a limit from a to b changes the verdict
    of exactly the numbers in (min(a, b), max(a, b)] (an absent limit as +inf). `prev` keeps, per
    limit, the largest number evaluated at or under it and the least above it (`brackets`, kept up
    to date as configurations are added); where every new limit lies in its bracket, every
    configuration, and every count's feasible ones, is the same under `limits`: they are handed on as
    they are, the same objects (equal configurations on one count stay one object, as
    `candidates` expects), with the brackets, which hold for the new limits as well."""
    shared = prev.get("intervals")
    if shared is None or limits.price != prev_limits.price:
        return None
    configs = shared[6]
    if len(configs) > SEED_CONFIGS:
        return None
    kept = prev.get("brackets")
    if kept is None:
        kept = prev["brackets"] = [[-INF, INF] * 4, 0]
    brackets, covered = kept
    if covered < len(configs):
        at = _limit_values(prev_limits)
        for cfg in islice(configs.values(), covered, None):
            if type(cfg) is not Config:  # the numbers kept on the cost model
                continue
            for j, v in enumerate((cfg.wall, cfg.flops, cfg.gpu_hours, cfg.usd)):  # as `_limit_values`
                if v is None:  # USD without a price
                    continue
                if v <= at[j]:
                    if v > brackets[2 * j]:
                        brackets[2 * j] = v
                elif v < brackets[2 * j + 1]:
                    brackets[2 * j + 1] = v
        kept[1] = len(configs)
    for j, v in enumerate(_limit_values(limits)):
        if not (brackets[2 * j] <= v and (v < brackets[2 * j + 1] or brackets[2 * j + 1] == INF)):
            return None
    counts = {mf: dict(entries) for mf, entries in shared[7].items()}
    new = _shared(cm, fr, limits, dict(configs), counts)
    # what `carried` compares, once for every objective: the lower integer end and the FLOP budget's
    # most sequences (a nonempty interval), then the upper integer end
    intervals, lo, hi, per, n_lo, n_hi = new[:6]
    flops, was = intervals.get("flops"), shared[0].get("flops")
    same = lo <= hi and n_lo == shared[4] and (
        (flops is None and was is None) or (flops is not None and was is not None
                                             and most_sequences(flops[1], per) == most_sequences(was[1], per)))
    return {"intervals": new, "brackets": [list(brackets), len(configs)], "ends": (same, n_hi == shared[5])}


def _clip(target: float, lo: float, hi: float) -> float:
    """The objective's target batch clipped into the feasible [lo, hi]: min(max(target, lo), hi),
    without the builtins' calls (a placement's hot path)."""
    clipped = lo if lo > target else target
    return hi if hi < clipped else clipped


def _piece_splits(pieces: tuple, clipped: float, per: float, micro_max: int, micro_fixed: int | None):
    """(micro, accum) of each piece's sizes (`piece_sizes`; the reference, b = 1, has the count's
    own splits) at the two accumulation counts nearest the clipped target inside the piece."""
    for b0, p_lo, p_hi, _ in pieces:
        if b0 == 1:
            continue
        for b in piece_sizes(b0, micro_max):
            if b > micro_max or (micro_fixed is not None and b != micro_fixed):
                continue
            mf, mc, m_lo, m_hi = piece_accumulations(p_lo, p_hi, clipped, b * per)
            for m in (mf,) if mf == mc else (mf, mc):
                if m_lo <= m <= m_hi:
                    yield b, int(m)


def _neighbours(n_t: float, n_lo, n_hi) -> tuple:
    """The target's two integer neighbours clipped into [n_lo, n_hi], as `place` takes them."""
    f, c = math.floor(n_t), math.ceil(n_t)
    return (n_lo if n_lo > f else (n_hi if f > n_hi else f)), (n_lo if n_lo > c else (n_hi if c > n_hi else c))


def _loses(cm: CostModel, fr: Frontier, kind: int, n: int, micro_fixed: int | None, configs: dict,
           best: float) -> bool:
    """Whether every configuration `place` weighs near n sequences per replica measures more than
    `best` under the objective of `kind`, found without evaluating them: the measure's bound does
    not depend on the limits (so neither on whether they are feasible). Balanced: the balance at
    the batch, exactly; min_flops: f·S(B)·B, which the integer steps only raise; min_time: the
    wall clock's `wall_floor` (predicted mode only), as `_wall_search` bounds it (with its margin)."""
    if kind == 3 or (kind == 1 and cm._step is None):  # min_cost is placed as min_time (`context.place_on`)
        return False
    per = cm.seq_len * cm.data_parallel
    b_crit = fr.b_crit
    near = _pairs_near(n, cm._micro_max, micro_fixed, cm.split.pipeline_parallel > 1)
    # one loop per objective, each bound as the objective's own (tokens as `numbers` forms them)
    if kind == 0:
        return all(balance_at(b_crit, micro * accum * per * 1.0) > best for micro, accum in near)
    if kind == 2:
        f, e_min, keep = cm.flops_per_token, fr.e_min, 1.0 - _BOUND_MARGIN
        for micro, accum in near:
            batch = micro * accum * per * 1.0
            if not f * steps(e_min, b_crit, batch) * batch * keep > best:
                return False
        return True
    size, s_min, keep = _WallSizes(cm._step, fr, float(per), configs["numbers"]), fr.s_min, 1.0 - _BOUND_MARGIN
    for micro, accum in near:
        _, u, v, beta = size(micro)
        if not wall_floor(s_min, beta, u, v, accum) * keep > best:
            return False
    return True


def carried(pl: Placement, fr: Frontier, limits: Limits, objective: str, micro_fixed: int | None, evals: dict,
            prev: dict) -> Placement | None:
    """`pl`, the placement for `objective` on the evaluations `prev`, on the limits of `evals`
    (`seeded` from `prev`), or None where `place` must run.

    `place` reads the limits only through the interval's integer ends, the target clipped into the
    interval, the most sequences the FLOP budget allows and the violated limits of what it weighs
    (the same in `evals`, `seeded`). Where those agree it weighs the same configurations in the same
    order and makes the same choice. Where only the upper end moved (a limit that bounds the batch
    from above, far from the target): the neighbours and the lower end are the same, the best
    before the old end is kept (`place`'s "end" record), the old end did not win and the new end's
    configurations (evaluated here, as `place` would) do not beat it; the target's neighbours
    launched, so no outward walk ran, and the wall-clock search starts from the same best. Either
    way only the intervals are new."""
    same, top = evals["ends"]  # `seeded`'s comparison of the integer ends and the FLOP budget
    if pl.clipped is None or not same:  # no room or an empty interval (`place` answers at once), or moved
        return None
    shared = evals["intervals"]
    intervals, lo, hi, per, n_lo, n_hi = shared[:6]
    target = pl.target
    sized = shared[8]
    if prev.get(("pieces", objective, micro_fixed)) or (
            sized is not None and not lo <= target <= hi
            and _sized(pl.cm, fr, limits, sized, target, intervals, lo, hi) is not None):
        return None  # a pipeline's micro-batch sizes widen the interval (`_sized`): placed afresh
    clipped = _clip(target, lo, hi)  # as `place` clips it
    if clipped != pl.clipped:
        return None
    key = ("end", objective, micro_fixed)
    end = prev.get(key)
    if top:
        if end is not None:
            evals[key] = end  # not changed after `place` made it
    else:
        n_was = prev["intervals"][5]
        if end is None or not end[2] or end[3] or n_lo is None or n_hi is None or n_was is None:
            return None
        n_t = clipped / per
        if math.ceil(n_t) < n_hi and math.ceil(n_t) < n_was:
            # both ends above the target's neighbours: they are clipped by n_lo alone, the same for
            # both, and only n_lo itself can be n_hi among them (`_neighbours`)
            if n_hi == n_lo:
                return None
        else:
            near = _neighbours(n_t, n_lo, n_hi)
            if near != _neighbours(n_t, n_lo, n_was) or n_hi in near or n_hi == n_lo:
                return None
        counts = shared[7]
        entries = counts.get(micro_fixed)
        if entries is None:
            entries = counts[micro_fixed] = {}
        entry = entries.get(n_hi)
        cm, kind = pl.cm, KIND[objective]
        if entry is not None or not _loses(cm, fr, kind, n_hi, micro_fixed, shared[6], end[1][0]):
            if entry is None:
                entry = entries[n_hi] = _feasible_at(cm, fr, limits, n_hi, cm.micro_batch_max, micro_fixed,
                                                     cm.split.pipeline_parallel > 1, shared[6])
            if _better(entry[1], kind, fr.b_crit, clipped, end[0], end[1])[0] is not end[0]:
                return None
        evals[key] = [end[0], end[1], end[2], False]  # the new end did not win
    return _new_placement(Placement, (pl.cm, fr, intervals, lo, hi, target, clipped, pl.config, pl.micro_max,
                                      pl.empty_reason))


def least_sequences(lo, per, xp=SCALAR):
    """The fewest whole sequences per replica (at least 1) whose batch, `per` tokens each, is ≥ lo
    (the relative 1e-12 keeps float noise on an exact multiple from adding one)."""
    return xp.maximum(1, xp.ceil(lo / per * (1.0 - 1e-12)))


def most_sequences(hi, per, xp=SCALAR):
    """The most whole sequences per replica whose batch, `per` tokens each, is ≤ hi."""
    return xp.floor(hi / per * (1.0 + 1e-12))


def walk_out(going, n0, n_lo, n_hi, seen: tuple, consider, counts: int, xp=SCALAR):
    """`place`'s outward walk, where `going`, from n0 sequences per replica (n0 + 1, n0 − 1, n0 + 2,
    ...) within [n_lo, n_hi], to the first count with a launchable configuration of exactly its
    sequences: `consider(n, live)` weighs the configurations near n where `live` and says where one
    launches n exactly; the counts in `seen` (already weighed) are passed over, and at most
    `counts` − 1 are met. Returns where the walk had not ended. One plan: bools and integers; a
    sweep's rows: arrays, `xp` numpy."""
    for i in range(1, counts):
        if not xp.any(going):
            break
        k = (i + 1) // 2
        n = n0 + k if i % 2 else n0 - k
        live = going & (n >= n_lo) & (n <= n_hi)
        for s in seen:
            live = live & (n != s)
        if xp.any(live):
            going = going & xp.logical_not(consider(n, live))
        going = going & xp.logical_not((n0 + k > n_hi) & (n0 - k < n_lo))  # both ways exhausted
    return going


def place_key(kind: int, b_crit, clipped, batch, wall, flops, cost, accum, xp=SCALAR) -> tuple:
    """`place`'s order of configurations, lexicographic: the objective's `measure`, then the faster
    run, then fewer accumulation steps (with a pipeline more micro-batches shrink the bubble), then
    the batch nearest the clipped target. Floats, or a sweep's arrays."""
    return (measure(kind, b_crit, batch, wall, flops, cost), wall, accum, xp.abs(batch - clipped))


def _better(configs, kind: int, bc: float, clipped: float, best, best_key):
    """The best of `configs` and (best, best_key) by `place_key`."""
    for cfg in configs:
        key = place_key(kind, bc, clipped, cfg.batch, cfg.wall, cfg.flops,
                        cfg.usd if cfg.usd is not None else cfg.gpu_hours, cfg.grad_accum)
        if best_key is None or key < best_key:
            best, best_key = cfg, key
    return best, best_key


def _feasible_at(cm: CostModel, fr: Frontier, limits: Limits, n: int, micro_max: int, micro_fixed: int | None,
                 pipeline: bool, configs: dict) -> tuple[bool, tuple[Config, ...]]:
    """(whether n sequences per replica exactly have a feasible configuration, the feasible
    configurations near n), each configuration evaluated once per (micro, accum) in `configs`."""
    exact, feasible = False, []
    for pair in _pairs_near(n, micro_max, micro_fixed, pipeline):
        cfg = configs.get(pair)
        if cfg is None:
            cfg = _config_at(cm, fr, limits, pair[0], pair[1], micro_max, configs)
        if cfg.violated:
            continue
        exact = exact or pair[0] * pair[1] == n
        feasible.append(cfg)
    return exact, tuple(feasible)


def _config_at(cm: CostModel, fr: Frontier, limits: Limits, micro: int, accum: int, micro_max: int,
               configs: dict) -> Config:
    """`evaluate` of (micro, accum), kept in `configs` (its numbers in `configs["numbers"]`)."""
    pair = (micro, accum)
    cfg = configs.get(pair)
    if cfg is None:
        kept = configs["numbers"]
        numbers = kept.get(pair)
        if numbers is None:
            numbers = _numbers(cm, fr, micro, accum)
            if len(kept) < 4096:
                kept[pair] = numbers
        cfg = configs[pair] = _config(cm, limits, micro, accum, micro_max, numbers)
    return cfg
