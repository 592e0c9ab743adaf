"""Infeasibility diagnosis: which limits a placement violates or which pairs of limits exclude
each other (`conflicts`), and every limit at the launched configuration with its slack and whether
it binds (`constraints`) — the words and numbers a reviewer reads when a plan is tight or
infeasible. The smallest change that makes a plan feasible is `relaxations`'s.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from budgetdsl.solve.placement import INF, LIMIT_NAMES, Placement
from budgetdsl.solve.solution import Constraint

if TYPE_CHECKING:
    from budgetdsl.solve.placement import Limits

UNITS = {"deadline": "s", "flops": "FLOP", "gpu_hours": "GPU-h", "usd": "USD", "memory": "B",
         "min_batch": "tokens"}
TIGHT = 0.01  # a limit with less than 1 % slack binds


def conflicting_names(pl: Placement) -> list[str]:
    if pl.config is not None:
        return list(pl.config.violated)
    if pl.empty_reason == "memory":
        return ["memory"]
    names = [n for n, iv in pl.intervals.items() if iv is None]
    for n, iv in pl.intervals.items():
        for m, jv in pl.intervals.items():
            if iv is not None and jv is not None and iv[0] > jv[1]:
                names += [n, m]
    if not names and pl.empty_reason == "integer":
        names = [n for n, iv in pl.intervals.items()
                 if iv is not None and (iv[0] >= pl.lo or iv[1] <= pl.hi)]
    return sorted(set(names), key=list(pl.intervals).index if names else None)


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
            decided = cfg is not None and cfg.micro_batch == pl.micro_max and cfg.grad_accum > 1
            detail = (f"micro-batch ≤ {pl.micro_max} sequences per device"
                      + ("; accumulation restores the batch" if decided else ""))
        else:
            decided = iv is not None and ((pushed_lo and iv[0] == pl.lo) or (pushed_hi and iv[1] == pl.hi))
            detail = ""
        tight = slack is not None and limit > 0 and slack < TIGHT * limit
        out.append(Constraint(
            name=name, sense="<=", limit=limit, value=value, slack=slack,
            binding=bool(decided or tight or satisfied is False or (iv is None and name in pl.intervals)
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
        binding=bool((pushed_lo and floor == pl.lo) or (value is not None and value == floor)),
        satisfied=None if value is None else value >= floor, unit="tokens",
        allowed_batch=(floor, None), detail=f"one sequence per data-parallel replica (dp = {cm.data_parallel})"))
    return out
