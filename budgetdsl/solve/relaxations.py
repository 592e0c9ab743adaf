"""Relaxations of an infeasible plan: for each limit, the smallest value that makes the plan
feasible with the others unchanged (re-solved, not estimated); the GPU count that would (searched
outward and bisected over launchable counts, in closed form); and the memory remedies — layouts
that let one or more sequences fit, each with its numbers and its price in step time. Kept apart
from the diagnosis (`diagnosis`: what conflicts) because it re-solves the plan many times.
"""

from __future__ import annotations

import math
from dataclasses import replace

from budgetdsl.cost.cost_model import CostModel, Split
from budgetdsl.hardware.layout import launchable, zero_problem
from budgetdsl.plan.model import MAX_GPUS
from budgetdsl.solve.context import Context, cost_model, gpu_counts, place_on
from budgetdsl.solve.infeasibility import UNITS, conflicting_names, conflicts, fmt
from budgetdsl.solve.placement import LIMIT_NAMES, Limits, Placement, score
from budgetdsl.solve.solution import MemoryRemedy, Relaxation

_GPU_LINEAR = 64  # GPU counts tried one by one before growing geometrically (relaxations)


def _feasible_with(ctx: Context, limits: Limits, objective: str, gpus: list[int] | None = None) -> Placement | None:
    best, best_cfg = None, None
    for g in gpus or gpu_counts(ctx.plan):
        pl = place_on(ctx, g, limits, objective)
        cfg = pl.config
        if pl.feasible and cfg is not None and (best_cfg is None or score(objective, ctx.frontier, cfg)
                                                < score(objective, ctx.frontier, best_cfg)):
            best, best_cfg = pl, cfg
    return best


def needs(name: str, required: float, current: float) -> str:
    """"name ≥ required (now current)"; where the two round to the same figure, the gap as a share
    of the current value too, so the line never reads as asking for what the plan already has."""
    want, now = fmt(name, required), fmt(name, current)
    if want == now and current:
        from budgetdsl.quantities.humanize import significant

        return f"{name} ≥ {want} (now {now}: {significant(100.0 * (required / current - 1.0), 2)} % more)"
    return f"{name} ≥ {want} (now {now})"


def relaxations(ctx: Context, pl: Placement, pinned: bool) -> list[Relaxation]:
    """For each limit, the smallest value that makes the plan feasible with the others unchanged:
    the plan is re-solved without that limit under the objective that minimizes its measure, and
    the value of that configuration is the answer (it is launchable and meets every other limit)."""
    out: list[Relaxation] = []
    memory_bound = pl.empty_reason == "memory" or (pl.config is not None and "memory" in pl.config.violated)
    conflicting = set(conflicting_names(pl))
    metric = {"deadline": "min_time", "flops": "min_flops", "gpu_hours": "min_cost", "usd": "min_cost"}
    for name in LIMIT_NAMES:
        current = getattr(ctx.limits, name)
        if current is None:
            continue
        unit = UNITS[name]
        if pinned:  # the configuration is fixed: the limit must reach its value there
            cfg = pl.config
            assert cfg is not None
            if name in cfg.violated:
                need = cfg.value_of(name)
                out.append(Relaxation(name=name, current=current, required=need, unit=unit,
                                      message=needs(name, need, current)))
            continue
        if memory_bound:
            out.append(Relaxation(name=name, current=current, unit=unit,
                                  message=f"no {name} helps: the model does not fit in memory"))
            continue
        best = _feasible_with(ctx, ctx.limits.without(name), metric[name])
        if best is None:
            others = ", ".join(sorted(conflicting - {name})) or "the other limits"
            out.append(Relaxation(name=name, current=current, unit=unit,
                                  message=f"no {name} helps: {others} conflict without it"))
            continue
        required = best.config.value_of(name)  # type: ignore[union-attr]
        out.append(Relaxation(name=name, current=current, required=required, unit=unit,
                              message=needs(name, required, current)))
    if not pinned:
        out.append(_gpu_relaxation(ctx, pl))
    return out


def _valid(ctx: Context, g: int) -> bool:
    hw = ctx.plan.hardware
    return g % hw.gpu_unit() == 0 and (g <= hw.gpus_per_node or g % hw.gpus_per_node == 0)


class _Launchable:
    """The launchable GPU counts in [lo, hi], sorted, as a sequence computed on demand (len and
    indexing in O(1)): the multiples of t·p up to one node, then the multiples of
    lcm(node, t·p) — whole nodes. A range of a million GPU counts is never listed."""

    def __init__(self, ctx: Context, lo: int, hi: int):
        hw = ctx.plan.hardware
        self.unit = hw.gpu_unit()  # t·p, or its multiple with context or expert parallelism
        self.node = math.lcm(hw.gpus_per_node, self.unit)  # the step of whole-node counts
        gpn = hw.gpus_per_node
        self.a0 = max(1, -(-lo // self.unit))  # k·unit, k in [a0, a1], within one node
        self.a1 = min(hi, gpn) // self.unit
        self.b0 = max(gpn // self.node + 1, -(-lo // self.node))  # k·node beyond one node
        self.b1 = hi // self.node
        self.na = max(0, self.a1 - self.a0 + 1)

    def __len__(self) -> int:
        return self.na + max(0, self.b1 - self.b0 + 1)

    def __getitem__(self, i: int) -> int:
        if not 0 <= i < len(self):
            raise IndexError(i)
        return (self.a0 + i) * self.unit if i < self.na else (self.b0 + i - self.na) * self.node


def _step_count(ctx: Context, g: int, direction: int) -> int | None:
    """The next launchable GPU count after `g` in `direction`, in closed form; None below one."""
    if direction > 0:
        seq = _Launchable(ctx, g + 1, max(g + 1, MAX_GPUS))
        return seq[0] if len(seq) else None
    seq = _Launchable(ctx, 1, g - 1)
    return seq[len(seq) - 1] if len(seq) else None


def _next_counts(ctx: Context, start: int, direction: int) -> list[int]:
    """Launchable GPU counts beyond `start`: the next _GPU_LINEAR one by one, then growing by
    ~10 % a step up to 64× (or down to 1) — at most a few hundred counts, whatever the values."""
    hw = ctx.plan.hardware
    steps = _Launchable(ctx, 1, 0)  # no counts: the unit and the whole-node step
    unit, node = steps.unit, steps.node
    out: list[int] = []
    g = start
    while len(out) < _GPU_LINEAR:
        following = _step_count(ctx, g, direction)
        if following is None or following > MAX_GPUS:
            return out
        g = following
        out.append(g)
    while True:
        g = int(g * 1.1) if direction > 0 else int(g / 1.1)
        g = (g // node) * node if g > hw.gpus_per_node else (g // unit) * unit
        if g < unit or (direction > 0 and g > min(64 * start, MAX_GPUS)) or (out and g == out[-1]):
            return out
        if _valid(ctx, g):
            out.append(g)


def _written_with(ctx: Context, gpus: int) -> Context:
    """The context of the plan as written with `gpus` GPUs, where that changes the model: a declared
    MFU holds at the plan's own GPU count (`cost_model.declared_anchor`), so a count the relaxation
    names is checked as the plan that names it would be solved, anchored there."""
    if ctx.plan.hardware.mfu is None:
        return ctx
    plan = ctx.plan.model_copy(update={"hardware": ctx.plan.hardware.model_copy(update={"gpus": gpus})})
    return replace(ctx, plan=plan, memo={}, key=ctx.cache.model_key(plan) if ctx.key else ())


def _feasible_at(ctx: Context, gpus: int) -> bool:
    return place_on(_written_with(ctx, gpus), gpus).feasible


def _gpu_relaxation(ctx: Context, pl: Placement) -> Relaxation:
    counts = gpu_counts(ctx.plan)
    lo_count, hi_count = min(counts), max(counts)
    current = float(hi_count)
    for direction, start in ((1, hi_count), (-1, lo_count)):
        previous = start
        for g in _next_counts(ctx, start, direction):
            if not _feasible_at(ctx, g):
                previous = g
                continue
            # a feasible count: bisect back towards the last infeasible one over launchable counts
            between = _Launchable(ctx, min(previous, g), max(previous, g))  # bisection: log2 placements
            a, b = 0, len(between) - 1  # between[b] (direction > 0) / between[a] is feasible
            while b - a > 1:
                mid = (a + b) // 2
                ok = _feasible_at(ctx, between[mid])
                if direction > 0:
                    a, b = (a, mid) if ok else (mid, b)
                else:
                    a, b = (mid, b) if ok else (a, mid)
            g = between[b] if direction > 0 else between[a]
            word = "≥" if direction > 0 else "≤"
            now = int(current if direction > 0 else lo_count)
            return Relaxation(name="gpus", current=float(now), required=float(g), unit="GPUs",
                              message=f"GPUs {word} {g} (now {now})")
    top = _next_counts(ctx, hi_count, 1)
    bottom = _next_counts(ctx, lo_count, -1)
    ends = [g for g in (top[-1] if top else None, bottom[-1] if bottom else None) if g is not None]
    reasons = []
    for g in ends:
        far = place_on(_written_with(ctx, g), g)
        reasons.append(f"at {g:,} GPU{'s' if g != 1 else ''} " + "; ".join(conflicts(far)))
    low, high = min(ends + [lo_count]), max(ends + [hi_count])
    span = f"{low:,}–{high:,}"
    return Relaxation(name="gpus", current=current, unit="GPUs",
                      message=f"no GPU count in {span} helps ({_span_ends(ctx, low, high, hi_count)}): "
                      + "; ".join(reasons))


def _span_ends(ctx: Context, low: int, high: int, hi_count: int) -> str:
    """Where the two ends of a hopeless GPU search come from and what limits each (issue 16): the
    low end is the fewest GPUs the layout launches, the high end the search's reach (_next_counts:
    64× the plan's count, or MAX_GPUS); say why neither end, nor anything past it, helps."""
    hw = ctx.plan.hardware
    t, p = int(hw.tensor_parallel), int(hw.pipeline_parallel)
    parts = []
    if _step_count(ctx, low, -1) is None:
        lo_pl = place_on(ctx, low)
        why = (", does not fit in memory" if lo_pl.empty_reason == "memory" else "")
        parts.append(f"{low:,}, the fewest GPUs the layout launches (tensor {t} × pipeline {p}){why}")
    reach = min(64 * hi_count, MAX_GPUS)
    limit = ("MAX_GPUS, the largest count a plan may name" if reach == MAX_GPUS
             else f"up to 64× the plan's {hi_count:,}")
    top = f"{high:,}, the largest launchable count the search tries ({limit})"
    hi_pl = place_on(ctx, high)
    floor = float(hi_pl.cm.data_parallel * hi_pl.cm.seq_len)  # one sequence per replica
    if hi_pl.hi <= 0.0 or hi_pl.lo > hi_pl.hi and hi_pl.hi >= floor:
        # the limits' own intervals do not meet at any batch: nothing to say about replicas
        top += ": no global batch meets the limits there at all"
    elif hi_pl.hi < floor:
        dp_max = int(hi_pl.hi // hi_pl.cm.seq_len)
        top += (f": past data parallel {dp_max:,} one sequence per replica is already a larger batch "
                f"than the limits allow there ({fmt('min_batch', hi_pl.hi)}), so more GPUs only make "
                f"it worse")
    parts.append(top)
    return "; ".join(parts)


def _relative_step_time(base: CostModel, alt: CostModel) -> float | None:
    """The price of a memory remedy: the predicted step time of `alt` over `base`
    (budgetdsl.cost.throughput) at one-sequence micro-batches and one global batch — full recomputation
    is one more forward, a deeper pipeline a bigger bubble, ZeRO-3 more gathers. None without a
    shape."""
    if base.shape is None or alt.shape is None or base.device is None or alt.device is None:
        return None
    from budgetdsl.cost.throughput import step_time

    seqs = 8.0 * max(base.data_parallel, alt.data_parallel) * max(base.split.pipeline_parallel,
                                                                  alt.split.pipeline_parallel)
    assert base.layout is not None and alt.layout is not None  # set with the shape
    t0 = step_time(base.shape, base.device, base.layout, 1, seqs).total
    return step_time(alt.shape, alt.device, alt.layout, 1, seqs).total / t0 if t0 > 0 else None


def _expert_remedies(ctx: Context, cm: CostModel) -> list[MemoryRemedy]:
    """For a mixture-of-experts model: the next expert-parallel degrees (×2, ×4, ×8, dividing the
    experts, launching on the count), each splitting the routed experts further
    (budgetdsl.cost.experts), with its numbers."""
    plan, base = ctx.plan, cm.split
    m, hw = plan.model, plan.hardware
    if not m.experts:
        return []
    cp, ep = base.parallel(plan)
    out = []
    for k in (2, 4, 8):
        e = ep * k
        split = replace(base, expert_parallel=e)
        if m.experts % e or not launchable(cm.gpus, base.tensor_parallel, base.pipeline_parallel, hw.gpus_per_node,
                                            cp, split.expert_group(plan)):
            continue
        out.append(_remedy(f"hardware.expert_parallel: {e}", cm, cost_model(ctx, cm.gpus, split)))
    return out


def _remedy(change: str, cm: CostModel, alt: CostModel) -> MemoryRemedy:
    """The remedy `change` with the numbers of `alt`, its cost model: it fits when one sequence does."""
    return MemoryRemedy(change=change, memory_per_device=alt.memory_at(1), micro_batch_max=alt.micro_batch_max,
                        fits=alt.micro_batch_max >= 1, relative_step_time=_relative_step_time(cm, alt))


def _doublings(start: int, cap: int) -> list[int]:
    """start, 2·start, 4·start, … up to cap (start itself always)."""
    out = [start]
    while out[-1] * 2 <= cap:
        out.append(out[-1] * 2)
    return out


def memory_remedies(ctx: Context, cm: CostModel) -> list[MemoryRemedy]:
    """Layouts that let one or more sequences fit, each with its numbers: every single change of
    ZeRO stage, recomputation, tensor or pipeline degree, then the smallest combinations that fit
    (fewest changed keys, then the largest micro-batch) when no single change does."""
    plan, base = ctx.plan, cm.split
    m, hw = plan.model, plan.hardware
    order = ("none", "selective", "full")
    zeros = list(range(base.zero, 4))
    recomputes = [r for r in order if order.index(r) >= order.index(base.recompute)]

    def fits(t: int, p: int) -> bool:  # launches on the count, with the plan's context and expert parallelism
        split = Split(0, t, p, "none", True, *base.parallel(plan))
        return launchable(cm.gpus, t, p, hw.gpus_per_node, split.parallel(plan)[0], split.expert_group(plan))

    # the doublings of each degree up to what could launch: TP within a node, PP within the GPUs
    # (and the layers); `fits` keeps those the count launches
    tps = [t for t in _doublings(base.tensor_parallel, max(hw.gpus_per_node, base.tensor_parallel))
           if m.splits_over(t) and fits(t, base.pipeline_parallel)]
    pps = [p for p in _doublings(base.pipeline_parallel, cm.gpus // base.tensor_parallel)  # uneven stages are fine
           if (m.layers is None or p * (1 if hw.virtual_pipeline_stages == "auto" else hw.virtual_pipeline_stages)
               <= m.layers)
           and fits(base.tensor_parallel, p)]

    def describe(split: Split) -> str:
        parts = []
        if split.zero != base.zero:
            parts.append(f"hardware.zero: {split.zero}")
        if split.recompute != base.recompute:
            parts.append(f"hardware.recompute: {split.recompute}")
        if split.tensor_parallel != base.tensor_parallel:
            parts.append(f"hardware.tensor_parallel: {split.tensor_parallel}")
        if split.pipeline_parallel != base.pipeline_parallel:
            parts.append(f"hardware.pipeline_parallel: {split.pipeline_parallel}")
        return " with ".join(parts)

    singles: list[MemoryRemedy] = []
    combos: list[tuple[int, int, MemoryRemedy]] = []
    for z in zeros:
        for rc in recomputes:
            for t in tps:
                for p in pps:
                    if not fits(t, p) or \
                            (zero_problem(z, p) is not None and (z, p) != (base.zero, base.pipeline_parallel)):
                        continue
                    split = replace(base, zero=z, tensor_parallel=t, pipeline_parallel=p, recompute=rc)
                    if split == base:
                        continue
                    remedy = _remedy(describe(split), cm, cost_model(ctx, cm.gpus, split))
                    changed = remedy.change.count(" with ") + 1
                    if changed == 1 and (t == tps[min(1, len(tps) - 1)] or t == base.tensor_parallel) and \
                            (p == pps[min(1, len(pps) - 1)] or p == base.pipeline_parallel):
                        singles.append(remedy)  # one change: the next degree of each, every stage
                    elif remedy.fits:
                        combos.append((changed, -remedy.micro_batch_max, remedy))
    singles += _expert_remedies(ctx, cm)
    out = singles
    if not any(r.fits for r in singles):
        combos.sort(key=lambda c: (c[0], c[1], c[2].change))
        out += [c[2] for c in combos[:3]]
    return out
