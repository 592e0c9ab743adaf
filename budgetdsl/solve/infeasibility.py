"""Infeasibility diagnosis: which limits a placement violates or which pairs of limits exclude
each other (`conflicts`), and every limit at the launched configuration with its slack and whether
it binds (`constraints`) — the words and numbers a reviewer reads when a plan is tight or
infeasible. The smallest change that makes a plan feasible is `relaxations`'s.
"""

from __future__ import annotations

import functools
import operator
from typing import TYPE_CHECKING

from budgetdsl.solve.placement import INF, LIMIT_NAMES, Placement, binds
from budgetdsl.theory.xp import SCALAR

if TYPE_CHECKING:
    from budgetdsl.solve.placement import Limits
    from budgetdsl.solve.solution import Constraint

UNITS = {"deadline": "s", "flops": "FLOP", "gpu_hours": "GPU-h", "usd": "USD", "memory": "B",
         "min_batch": "tokens"}


def conflicting_names(pl: Placement) -> list[str]:
    if pl.config is not None:
        return list(pl.config.violated)
    if pl.empty_reason == "memory":
        return ["memory"]
    spans = [(0.0, 0.0, True, False) if iv is None else (iv[0], iv[1], True, True) for iv in pl.intervals.values()]
    return [n for n, named in zip(pl.intervals, conflicting(spans, pl.lo, pl.hi)) if named]


def conflicting(spans: list[tuple], lo, hi, xp=SCALAR) -> list:
    """Which limits a placement with no configuration names, from their intervals of B (`spans`:
    (low, high, present, nonempty) each, in `Placement.intervals` order) and their intersection
    [lo, hi]: each limit that holds at no batch, each two whose intervals exclude each other, and
    failing those (no whole number of sequences or no launchable configuration between lo and hi)
    each limit whose interval sets an end of [lo, hi]. Floats, or a sweep's arrays."""
    valid = [there & ok for _, _, there, ok in spans]
    named = [there & xp.logical_not(ok) for _, _, there, ok in spans]
    for a, (alo, _, _, _) in enumerate(spans):
        for b, (_, bhi, _, _) in enumerate(spans):
            cross = valid[a] & valid[b] & (alo > bhi)
            named[a] = named[a] | cross
            named[b] = named[b] | cross
    none = xp.logical_not(functools.reduce(operator.or_, named))
    return [named[a] | (none & valid[a] & ((alo >= lo) | (ahi <= hi))) for a, (alo, ahi, _, _) in enumerate(spans)]


def pushed_against(pushed_lo, pushed_hi, iv_lo, iv_hi, lo, hi):
    """Whether a limit's own interval [iv_lo, iv_hi] sets the end of the feasible [lo, hi] that the
    objective's target lay beyond (cvxpy's "active" constraint). Floats, or a sweep's arrays."""
    return (pushed_lo & (iv_lo == lo)) | (pushed_hi & (iv_hi == hi))


def room_filled(micro, micro_max, accum):
    """Memory decided the split: the micro-batch at the room, accumulation restoring the batch."""
    return (micro == micro_max) & (accum > 1)


def limit_binds(decided, value, limit, xp=SCALAR):
    """A limit binds at a configuration: the placement was decided by it (`pushed_against`,
    `room_filled`), the value is not within it, or less than TIGHT of it is left (`binds`)."""
    return decided | xp.logical_not(value <= limit) | binds(limit - value, limit)


def floor_binds(pushed_lo, floor, lo, batch):
    """The batch floor (one sequence per replica) binds: it set the interval's low end the target
    was pushed to, or the batch sits on it."""
    return (pushed_lo & (floor == lo)) | (batch == floor)


def fmt(name: str, v: float) -> str:
    from budgetdsl.quantities.humanize import human

    return human(UNITS[name], v)


def conflicts(pl: Placement) -> list[str]:
    out: list[str] = []
    cm = pl.cm
    if pl.empty_reason == "memory":
        need = cm.memory_at(1)
        out.append(f"memory: one sequence per device needs {fmt('memory', need)} "
                   f"(weights, gradients, optimizer state, activations and reserve) of "
                   f"{fmt('memory', cm.memory_per_device)}")
        return out
    if pl.config is not None:  # a pinned configuration that violates limits
        for name in pl.config.violated:
            if name == "memory":
                out.append(f"memory: micro-batch {pl.config.micro_batch} needs "
                           f"{fmt('memory', pl.config.memory)} of {fmt('memory', cm.memory_per_device)}")
            else:
                out.append(f"{name}: the pinned configuration needs "
                           f"{fmt(name, pl.config.value_of(name))}")
        return out
    for name, iv in pl.intervals.items():
        if iv is None:
            out.append(f"{name}: no global batch meets it on {cm.gpus:,} GPUs")
    items = [(n, iv) for n, iv in pl.intervals.items() if iv is not None]
    for n, iv in items:
        for m, jv in items:
            if iv[0] > jv[1]:
                out.append(f"{n} needs B ≥ {fmt('min_batch', iv[0])} but {m} allows B ≤ "
                           f"{fmt('min_batch', jv[1])}")
    if not out:
        out.append(f"the feasible batches {fmt('min_batch', pl.lo)}–{fmt('min_batch', pl.hi)} hold no "
                   f"launchable configuration of whole sequences per replica and whole steps")
    return out


def constraints(limits: Limits, pl: Placement, pinned: bool) -> list[Constraint]:
    """Each limit at the configuration (`solution.Constraint`, its numbers checked finite)."""
    from budgetdsl.solve.solution import Constraint  # a sweep's kernel rows build no solution

    cm, cfg = pl.cm, pl.config
    out: list[Constraint] = []
    # Which bound the objective was pushed against (cvxpy's "active" constraint).
    pushed_lo = pl.clipped is not None and pl.target < pl.lo and not pinned
    pushed_hi = pl.clipped is not None and pl.target > pl.hi and not pinned
    present = [(n, getattr(limits, n)) for n in LIMIT_NAMES if getattr(limits, n) is not None]
    present.append(("memory", cm.memory_per_device))
    for name, limit in present:
        iv = pl.intervals.get(name)
        value = cfg.value_of(name) if cfg is not None else (cm.memory_at(1) if name == "memory" else None)
        slack = None if value is None else limit - value
        satisfied = None if value is None else value <= limit
        if name == "memory":
            decided = cfg is not None and room_filled(cfg.micro_batch, pl.micro_max, cfg.grad_accum)
            detail = (f"micro-batch ≤ {pl.micro_max} sequences per device"
                      + ("; accumulation restores the batch" if decided else ""))
        else:
            decided = iv is not None and pushed_against(pushed_lo, pushed_hi, iv[0], iv[1], pl.lo, pl.hi)
            detail = ""
        out.append(Constraint(
            name=name, sense="<=", limit=limit, value=value, slack=slack,
            binding=bool((decided if value is None else limit_binds(decided, value, limit))
                         or (iv is None and name in pl.intervals)
                         or (name == "memory" and pl.empty_reason == "memory")),
            satisfied=satisfied, unit=UNITS[name],
            allowed_batch=(None if iv is None else (iv[0], iv[1] if iv[1] < INF else None))
            if name in pl.intervals else None,
            detail=detail))
    floor = float(cm.data_parallel * cm.seq_len)
    value = cfg.batch if cfg is not None else None
    out.append(Constraint(
        name="min_batch", sense=">=", limit=floor, value=value,
        slack=None if value is None else value - floor,
        binding=bool(floor_binds(pushed_lo, floor, pl.lo, value)),
        satisfied=None if value is None else value >= floor, unit="tokens",
        allowed_batch=(floor, None), detail=f"one sequence per data-parallel replica (dp = {cm.data_parallel})"))
    return out
