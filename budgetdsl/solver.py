"""`solve(plan) -> Solution`: place a run on the critical-batch frontier (docs/design.md section 3).

1. B_crit from the noise source, E_min and S_min from the target (`noise_source`, `frontier`).
2. On each GPU count the plan allows: the feasible interval of B, the objective's point in it, the
   snap to a launchable integer configuration, every limit re-checked (`placement`).
3. With a GPU range, the count too: the best objective value, ties to the fewest GPUs.
4. `run:` pinned: that configuration is evaluated instead, beside the objective's own choice.
5. Infeasible: the conflicting limits, the smallest change of each limit that makes the plan
   feasible on its own (re-solved, not estimated), and memory remedies with numbers.
6. With `noise.uncertainty`: the launched configuration at B_crit·(1 ± u).

Infeasible is a status, not an exception. Exceptions (PlanError, located) are for plans the
solver cannot read: a pinned batch that is not a whole number of sequences per replica, a memory
model without a shape, a calibration that cannot be read.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from pydantic import ValidationError

from budgetdsl.cost_model import CostModel, Split, cost_model_key
from budgetdsl.frontier import frontier_from_target
from budgetdsl.layout import launchable
from budgetdsl.noise_source import noise_estimate, plan_error
from budgetdsl.plan_model import MAX_GPUS
from budgetdsl.diagnostics import PlanError
from budgetdsl.diagnosis import (UNITS as _UNITS, conflicting_names as _conflicting_names, conflicts as _conflicts,
                                 constraints as _constraints, fmt as _fmt)
from budgetdsl.layout_search import concrete, launches
from budgetdsl.objectives import (MEASURE as _OBJECTIVE_MEASURE, OBJECTIVES, axes, dominates, pareto, rank)
from budgetdsl.placement import LIMIT_NAMES, Config, Limits, Placement, evaluate, score
from budgetdsl.search_space import LayoutResult as _LayoutResult, search_layouts as _search_layouts
from budgetdsl.solve_context import (Context as _Context, candidates as _candidates, closest as _closest,
                                     contains as pl_in, cost_model as _cost_model, gpu_counts as _gpu_counts,
                                     pick as _choose, place_on as _place, plan_limits, raw_counts as _raw_counts,
                                     solve_core as _solve_core, solve_layout as _solve_layout)
from budgetdsl.solution import (FEASIBLE, GpuChoice, MemoryRemedy, PinnedComparison, Relaxation,
                                Solution, Status)

if TYPE_CHECKING:
    from budgetdsl.plan_model import Plan

__all__ = ["solve", "plan_limits"]

_GPU_LINEAR = 64  # GPU counts tried one by one before growing geometrically (relaxations)


# -- choosing among GPU counts --------------------------------------------------------------------

def _gpu_choice_reason(ctx: _Context, chosen: Placement, placements: list[Placement]) -> str:
    measure = _OBJECTIVE_MEASURE[ctx.objective]
    feasible = [p for p in placements if p.feasible]
    g = chosen.cm.gpus
    smaller_bad = [p for p in placements if p.cm.gpus < g and not p.feasible]
    why = f"{g} GPUs give the best {measure} of the {len(feasible)} feasible counts"
    if smaller_bad:
        names = sorted({n for p in smaller_bad for n in _conflicting_names(p)})
        why += f"; fewer GPUs miss the {', '.join(names)} limit" + ("s" if len(names) > 1 else "")
    larger = [p for p in feasible if p.cm.gpus > g]
    if larger:
        if ctx.objective in ("min_time",):
            why += "; more GPUs are slower (the all-reduce and the batch floor grow)"
        elif ctx.objective in ("min_cost", "min_flops", "balanced"):
            why += "; more GPUs cost more or gain nothing" if ctx.objective == "min_cost" else \
                "; more GPUs do not improve it, so the fewest are chosen"
    return why


# -- constraints, conflicts, relaxations ----------------------------------------------------------

def _feasible_with(ctx: _Context, limits: Limits, objective: str, gpus: list[int] | None = None) -> Placement | None:
    best = None
    for g in gpus or _gpu_counts(ctx.plan):
        pl = _place(ctx, g, limits, objective)
        if pl.feasible and (best is None or score(objective, ctx.frontier, pl.config)
                            < score(objective, ctx.frontier, best.config)):
            best = pl
    return best


def _relaxations(ctx: _Context, pl: Placement, pinned: bool) -> list[Relaxation]:
    """For each limit, the smallest value that makes the plan feasible with the others unchanged:
    the plan is re-solved without that limit under the objective that minimizes its measure, and
    the value of that configuration is the answer (it is launchable and meets every other limit)."""
    out: list[Relaxation] = []
    memory_bound = pl.empty_reason == "memory" or (pl.config is not None and "memory" in pl.config.violated)
    conflicting = set(_conflicting_names(pl))
    metric = {"deadline": "min_time", "flops": "min_flops", "gpu_hours": "min_cost", "usd": "min_cost"}
    for name in LIMIT_NAMES:
        current = getattr(ctx.limits, name)
        if current is None:
            continue
        unit = _UNITS[name]
        if pinned:  # the configuration is fixed: the limit must reach its value there
            cfg = pl.config
            assert cfg is not None
            if name in cfg.violated:
                need = cfg.value_of(name)
                out.append(Relaxation(name=name, current=current, required=need, unit=unit,
                                      message=f"{name} ≥ {_fmt(name, need)} (now {_fmt(name, current)})"))
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
                              message=f"{name} ≥ {_fmt(name, required)} (now {_fmt(name, current)})"))
    if not pinned:
        out.append(_gpu_relaxation(ctx, pl))
    return out


def _valid(ctx: _Context, g: int) -> bool:
    hw = ctx.plan.hardware
    return g % (hw.tensor_parallel * hw.pipeline_parallel) == 0 and (g <= hw.gpus_per_node or g % hw.gpus_per_node == 0)


class _Launchable:
    """The launchable GPU counts in [lo, hi], sorted, as a sequence computed on demand (len and
    indexing in O(1)): the multiples of t·p up to one node, then the multiples of
    lcm(node, t·p) — whole nodes. A range of a million GPU counts is never listed."""

    def __init__(self, ctx: _Context, lo: int, hi: int):
        hw = ctx.plan.hardware
        self.unit = hw.tensor_parallel * hw.pipeline_parallel
        self.node = hw.gpus_per_node * self.unit // math.gcd(hw.gpus_per_node, self.unit)
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


def _step_count(ctx: _Context, g: int, direction: int) -> int | None:
    """The next launchable GPU count after `g` in `direction`, in closed form; None below one."""
    if direction > 0:
        seq = _Launchable(ctx, g + 1, max(g + 1, MAX_GPUS))
        return seq[0] if len(seq) else None
    seq = _Launchable(ctx, 1, g - 1)
    return seq[len(seq) - 1] if len(seq) else None


def _next_counts(ctx: _Context, start: int, direction: int) -> list[int]:
    """Launchable GPU counts beyond `start`: the next _GPU_LINEAR one by one, then growing by
    ~10 % a step up to 64× (or down to 1) — at most a few hundred counts, whatever the values."""
    hw = ctx.plan.hardware
    unit = hw.tensor_parallel * hw.pipeline_parallel
    node = hw.gpus_per_node * unit // math.gcd(hw.gpus_per_node, unit)
    out: list[int] = []
    g: int | None = start
    while len(out) < _GPU_LINEAR:
        g = _step_count(ctx, g, direction)
        if g is None or g > MAX_GPUS:
            return out
        out.append(g)
    while True:
        g = int(g * 1.1) if direction > 0 else int(g / 1.1)
        g = (g // node) * node if g > hw.gpus_per_node else (g // unit) * unit
        if g < unit or (direction > 0 and g > min(64 * start, MAX_GPUS)) or (out and g == out[-1]):
            return out
        if _valid(ctx, g):
            out.append(g)


def _gpu_relaxation(ctx: _Context, pl: Placement) -> Relaxation:
    counts = _gpu_counts(ctx.plan)
    lo_count, hi_count = min(counts), max(counts)
    current = float(hi_count)
    for direction, start in ((1, hi_count), (-1, lo_count)):
        previous = start
        for g in _next_counts(ctx, start, direction):
            if not _place(ctx, g).feasible:
                previous = g
                continue
            # a feasible count: bisect back towards the last infeasible one over launchable counts
            between = _Launchable(ctx, min(previous, g), max(previous, g))  # bisection: log2 placements
            a, b = 0, len(between) - 1  # between[b] (direction > 0) / between[a] is feasible
            while b - a > 1:
                mid = (a + b) // 2
                ok = _place(ctx, between[mid]).feasible
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
        far = _place(ctx, g)
        reasons.append(f"at {g:,} GPU{'s' if g != 1 else ''} " + "; ".join(_conflicts(far)))
    low, high = min(ends + [lo_count]), max(ends + [hi_count])
    span = f"{low:,}–{high:,}"
    return Relaxation(name="gpus", current=current, unit="GPUs",
                      message=f"no GPU count in {span} helps ({_span_ends(ctx, low, high, hi_count)}): "
                      + "; ".join(reasons))


def _span_ends(ctx: _Context, low: int, high: int, hi_count: int) -> str:
    """Where the two ends of a hopeless GPU search come from and what limits each (issue 16): the
    low end is the fewest GPUs the layout launches, the high end the search's reach (_next_counts:
    64× the plan's count, or MAX_GPUS); say why neither end, nor anything past it, helps."""
    hw = ctx.plan.hardware
    t, p = int(hw.tensor_parallel), int(hw.pipeline_parallel)
    parts = []
    if _step_count(ctx, low, -1) is None:
        lo_pl = _place(ctx, low)
        why = (", does not fit in memory" if lo_pl.empty_reason == "memory" else "")
        parts.append(f"{low:,}, the fewest GPUs the layout launches (tensor {t} × pipeline {p}){why}")
    reach = min(64 * hi_count, MAX_GPUS)
    limit = ("MAX_GPUS, the largest count a plan may name" if reach == MAX_GPUS
             else f"up to 64× the plan's {hi_count:,}")
    top = f"{high:,}, the largest launchable count the search tries ({limit})"
    hi_pl = _place(ctx, high)
    floor = float(hi_pl.cm.data_parallel * hi_pl.cm.seq_len)  # one sequence per replica
    if hi_pl.hi < floor:
        dp_max = int(hi_pl.hi // hi_pl.cm.seq_len)
        top += (f": past data parallel {dp_max:,} one sequence per replica is already a larger batch "
                f"than the limits allow there ({_fmt('min_batch', hi_pl.hi)}), so more GPUs only make "
                f"it worse")
    parts.append(top)
    return "; ".join(parts)


def _relative_step_time(base: CostModel, alt: CostModel) -> float | None:
    """The price of a memory remedy: the predicted step time of `alt` over `base`
    (budgetdsl.throughput) at one-sequence micro-batches and one global batch — full recomputation
    is one more forward, a deeper pipeline a bigger bubble, ZeRO-3 more gathers. None without a
    shape."""
    if base.shape is None or alt.shape is None or base.device is None or alt.device is None:
        return None
    from budgetdsl.throughput import step_time

    seqs = 8.0 * max(base.data_parallel, alt.data_parallel) * max(base.split.pipeline_parallel,
                                                                  alt.split.pipeline_parallel)
    t0 = step_time(base.shape, base.device, base.layout, 1, seqs).total
    return step_time(alt.shape, alt.device, alt.layout, 1, seqs).total / t0 if t0 > 0 else None


def _memory_remedies(ctx: _Context, cm: CostModel) -> list[MemoryRemedy]:
    """Layouts that let one or more sequences fit, each with its numbers: every single change of
    ZeRO stage, recomputation, tensor or pipeline degree, then the smallest combinations that fit
    (fewest changed keys, then the largest micro-batch) when no single change does."""
    plan, base = ctx.plan, cm.split
    m, hw = plan.model, plan.hardware
    order = ("none", "selective", "full")
    zeros = list(range(base.zero, 4))
    recomputes = [r for r in order if order.index(r) >= order.index(base.recompute)]
    tps = [t for t in (base.tensor_parallel * 2**k for k in range(6))
           if t <= max(hw.gpus_per_node, base.tensor_parallel) and (m.heads is None or m.heads % t == 0)
           and launchable(cm.gpus, t, base.pipeline_parallel, hw.gpus_per_node)]
    pps = [p for p in (base.pipeline_parallel * 2**k for k in range(6))  # uneven stages are fine
           if (m.layers is None or p * hw.virtual_pipeline_stages <= m.layers)
           and launchable(cm.gpus, base.tensor_parallel, p, hw.gpus_per_node)]

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
                    if not launchable(cm.gpus, t, p, hw.gpus_per_node):
                        continue
                    split = Split(z, t, p, rc, base.flash_attention)
                    if split == base:
                        continue
                    alt = _cost_model(ctx, cm.gpus, split)
                    remedy = MemoryRemedy(change=describe(split), memory_per_device=alt.memory_at(1),
                                          micro_batch_max=alt.micro_batch_max, fits=alt.micro_batch_max >= 1,
                                          relative_step_time=_relative_step_time(cm, alt))
                    changed = remedy.change.count(" with ") + 1
                    if changed == 1 and (t == tps[min(1, len(tps) - 1)] or t == base.tensor_parallel) and \
                            (p == pps[min(1, len(pps) - 1)] or p == base.pipeline_parallel):
                        singles.append(remedy)  # one change: the next degree of each, every stage
                    elif remedy.fits:
                        combos.append((changed, -alt.micro_batch_max, remedy))
    out = singles
    if not any(r.fits for r in singles):
        combos.sort(key=lambda c: (c[0], c[1], c[2].change))
        out += [c[2] for c in combos[:3]]
    return out


# -- uncertainty ----------------------------------------------------------------------------------

def _uncertainty(ctx: _Context, pl: Placement) -> dict | None:
    """The fields of `Uncertainty`, or None without `noise.uncertainty`."""
    u = ctx.noise.uncertainty
    cfg = pl.config
    if u is None or cfg is None:
        return None
    b = ctx.frontier.b_crit
    ends = [b * max(1.0 - u, 1e-3), b, b * (1.0 + u)]
    evals: list[Config] = []
    for bc in ends:
        fr = frontier_from_target(ctx.plan.target, bc)
        evals.append(evaluate(pl.cm, fr, ctx.limits, cfg.micro_batch, cfg.grad_accum, pl.micro_max))

    def span(attr: str) -> dict:
        vals = [float(getattr(e, attr)) for e in evals]
        return {"low": min(vals), "high": max(vals)}

    holds = {name: all(name not in e.violated for e in evals)
             for name in (*[n for n in LIMIT_NAMES if getattr(ctx.limits, n) is not None], "memory")}
    return {"relative": u, "b_crit_tokens": {"low": ends[0], "high": ends[2]}, "steps": span("steps"),
            "tokens": span("tokens"), "flops": span("flops"), "wall_clock_s": span("wall"),
            "gpu_hours": span("gpu_hours"), "limits_hold": holds, "all_hold": all(holds.values())}


# -- the pinned comparison ------------------------------------------------------------------------

def _comparison(ctx: _Context, pinned: Placement) -> PinnedComparison:
    chosen, _ = _solve_core(ctx)
    p, o = pinned.config, chosen.config if chosen.feasible else None
    assert p is not None
    if o is None:
        return PinnedComparison(objective_batch_tokens=None, objective_feasible=False,
                                summary=f"the {ctx.objective} objective finds no feasible configuration")
    ratio = score(ctx.objective, ctx.frontier, p) / score(ctx.objective, ctx.frontier, o)
    from budgetdsl.humanize import human

    summary = (f"the {ctx.objective} choice is B = {human('tokens', o.batch)} on {o.gpus} GPUs; the pinned "
               f"batch is {p.batch / o.batch:.3g}× it, with {p.steps / o.steps:.3g}× the steps, "
               f"{p.wall / o.wall:.3g}× the wall clock and {p.flops / o.flops:.3g}× the FLOPs "
               f"({_OBJECTIVE_MEASURE[ctx.objective]} {ratio:.3g}× the optimum)")
    return PinnedComparison(objective_batch_tokens=o.batch, objective_feasible=True,
                            batch_ratio=p.batch / o.batch, steps_ratio=p.steps / o.steps,
                            tokens_ratio=p.tokens / o.tokens, wall_clock_ratio=p.wall / o.wall,
                            flops_ratio=p.flops / o.flops, objective_ratio=ratio, summary=summary)


# -- the batch ramp -------------------------------------------------------------------------------

def _ramp(ctx: _Context, pl: Placement) -> dict | None:
    """The fields of `Ramp` for `run.batch_schedule`, or None without one (or a configuration)."""
    from budgetdsl import batch_ramp as br
    from budgetdsl.humanize import human

    run, cfg, cm, fr = ctx.plan.run, pl.config, pl.cm, ctx.frontier
    if run is None or run.batch_schedule is None or cfg is None:
        return None
    notes: list[str] = []
    if ctx.plan.noise.calibration is not None:
        from budgetdsl.noise_source import calibration_path, read_calibration

        path = calibration_path(ctx.plan)
        cal = read_calibration(ctx.plan, path)
        try:
            traj = br.NoiseTrajectory.from_calibration(cal, path.name)
        except ValueError as exc:
            raise plan_error(ctx.plan, ("run", "batch_schedule"), "ramp-trajectory", str(exc)) from None
    else:
        traj = br.NoiseTrajectory.constant(fr.b_crit, "none: noise is not a calibration, B_noise taken constant")
        notes.append("without a calibration there is no B_noise trajectory: B_noise is taken constant "
                     "over the run, so a ramp can only cost against the fixed batch")
    traj = traj.scaled_to_mean(fr.b_crit)
    # One micro-batch for every stage (Megatron's schedules keep --micro-batch-size): the
    # solution's, or smaller when the smallest stage wants fewer sequences per replica.
    if run.batch_schedule == "auto":
        bounds = br.auto_boundaries(traj, int(run.ramp_stages))
        smallest = min(float(run.ramp_x) * traj.mean(a, b) for a, b in zip(bounds, bounds[1:]))
    else:
        smallest = min(float(st.batch) for st in run.batch_schedule)
    micro = max(1, min(cfg.micro_batch, int(smallest // (cfg.data_parallel * cm.seq_len))))
    unit = float(micro * cfg.data_parallel * cm.seq_len)  # one accumulation step

    def snap(batch: float) -> float:
        return max(1, round(batch / unit)) * unit

    if run.batch_schedule == "auto":
        x = float(run.ramp_x)
        costs = br.plan_auto(traj, fr.s_min, int(run.ramp_stages), x, snap)
        closed = br.adaptive_closed_form(fr.s_min, fr.e_min, x)
    else:
        x, closed = None, None
        given = [(float(st.until), float(st.batch)) for st in run.batch_schedule]
        snapped = [(u, snap(b)) for u, b in given]
        for (u, b), (_, b2) in zip(given, snapped):
            if abs(b2 - b) > 1e-9 * b:
                notes.append(f"the stage until {u:.0%} ({human('tokens', b)}) snapped to "
                             f"{human('tokens', b2)}: whole accumulation steps of {micro} "
                             f"sequences × {cfg.data_parallel} replicas")
        costs = br.stages_from_token_fractions(traj, fr.s_min, snapped)
    stages, acc_tokens = [], 0.0
    for c in costs:
        steps = math.ceil(c.steps - 1e-9)
        tokens = steps * c.batch
        acc_tokens += tokens
        stages.append(dict(until=0.0, progress_start=c.start, progress_end=c.end, batch_tokens=c.batch,
                           sequences=round(c.batch / cm.seq_len), grad_accum=round(c.batch / unit),
                           b_noise_tokens=c.b_noise, x=c.x, steps=steps, tokens=tokens,
                           wall_clock_s=steps * cm.step_time(c.batch)))
    for st in stages:  # `until` as the plan language writes it: a fraction of the run's tokens
        acc = sum(s2["tokens"] for s2 in stages[: stages.index(st) + 1])
        st["until"] = acc / acc_tokens
    steps = sum(st["steps"] for st in stages)
    wall = sum(st["wall_clock_s"] for st in stages)
    limit = ctx.limits.deadline
    if limit is not None and wall > limit:
        notes.append(f"the ramp's wall clock {human('s', wall)} exceeds the deadline {human('s', limit)}")
    return dict(schedule="auto" if run.batch_schedule == "auto" else "stages", x=x, micro_batch=micro,
                trajectory=traj.source, assumption=br.ASSUMPTION, stages=stages, steps=steps,
                tokens=acc_tokens, flops=acc_tokens * cm.flops_per_token, wall_clock_s=wall,
                fixed_steps=cfg.steps, fixed_tokens=cfg.tokens, fixed_wall_clock_s=cfg.wall,
                saves_steps=cfg.steps - steps, saves_tokens=cfg.tokens - acc_tokens,
                saves_wall_clock_s=cfg.wall - wall,
                closed_form_steps=closed[0] if closed else None,
                closed_form_tokens=closed[1] if closed else None, notes=notes)


# -- assembling the result ------------------------------------------------------------------------

def _throughput(cm: CostModel, cfg: Config | None) -> dict | None:
    """The fields of `Throughput`: utilization and seconds per step by cause at the launched
    configuration (declared: the modelled shares scaled inside the declared MFU)."""
    if cfg is None:
        return None
    bd = cm.breakdown(cfg.batch, cfg.grad_accum)
    if bd is None:  # no shape: declared MFU only
        total = cm.step_time(cfg.batch, cfg.grad_accum)
        return dict(source=cm.mode, mfu=cm.mfu, hfu=None, model_tflops_per_gpu=cm.flops_per_token * cfg.batch
                    / (total * cm.gpus) / 1e12, hardware_tflops_per_gpu=None, step_time_s=total,
                    breakdown={"compute": total})
    out = dict(source=cm.mode, mfu=bd.mfu, hfu=bd.hfu, model_tflops_per_gpu=bd.model_tflops_per_gpu,
               hardware_tflops_per_gpu=bd.hardware_tflops_per_gpu, step_time_s=bd.total,
               breakdown=bd.seconds(), stage_layers=list(bd.stage_layers))
    if cm.mode == "declared":  # what the layout alone would predict, for comparison
        from budgetdsl.throughput import step_time as predicted_step

        out["predicted_mfu"] = predicted_step(cm.shape, cm.device, cm.layout, cfg.micro_batch,
                                              cfg.sequences).mfu
    return out


def _assumptions(cm: CostModel, cfg: Config | None) -> dict[str, dict]:
    out = {k: {"value": c.value, "unit": c.unit, "origin": c.origin, "detail": c.detail}
           for k, c in cm.coefficients.items()}
    if cfg is not None:
        rate, fixed = cm.linear_at(cfg.micro_batch)  # T(B) = f·B/rate + c at the launched micro-batch
        out["achieved_flops"] = {"value": rate, "unit": "FLOP/s", "origin": "derived",
                                 "detail": cm.coefficients["achieved_flops"].detail
                                 + ("" if cm.mode == "declared" else f", at micro-batch {cfg.micro_batch}")}
        out["fixed_time"] = {"value": fixed, "unit": "s", "origin": "derived",
                             "detail": cm.coefficients["fixed_time"].detail.rsplit(" at micro-batch", 1)[0]
                             + ("" if cm.mode == "declared" else f" at micro-batch {cfg.micro_batch}")}
        out["step_time"] = {"value": cm.step_time(cfg.batch, cfg.grad_accum), "unit": "s", "origin": "derived",
                            "detail": "T(B) = f·B/(G·P·u), declared MFU" if cm.mode == "declared" else
                            f"predicted at micro-batch {cfg.micro_batch} × {cfg.grad_accum} accumulation "
                            "(budgetdsl.throughput; see throughput.breakdown)"}
        out["memory_at_micro_batch"] = {
            "value": cfg.memory, "unit": "B", "origin": "derived",
            "detail": "weights + grads + optimizer + micro-batch × activations + reserve"}
    return out


def _notes(ctx: _Context, pl: Placement, status: Status) -> list[str]:
    from budgetdsl.humanize import human

    notes: list[str] = []
    cm, cfg = pl.cm, pl.config
    if cfg is None:
        return notes
    if status is Status.optimal and pl.clipped is not None:
        t = pl.target
        what = {"balanced": "the balanced point B = B_crit", "min_time": "the minimum-time batch",
                "min_cost": "the minimum-time batch (on a fixed GPU count cost follows the wall clock)",
                "min_flops": "the smallest batch"}[ctx.objective]
        if ctx.objective == "min_flops":
            notes.append(f"{ctx.objective}: {what} the limits allow, {human('tokens', pl.lo)}")
        elif t < pl.lo or t > pl.hi:
            notes.append(f"{ctx.objective}: {what}, {human('tokens', t)}, lies outside the feasible "
                         f"{human('tokens', pl.lo)}–{human('tokens', pl.hi)}; clipped to "
                         f"{human('tokens', pl.clipped)}")
        else:
            notes.append(f"{ctx.objective}: {what}, {human('tokens', t)}, is feasible")
        if cm.fixed_time > 0 and ctx.objective != "min_time":
            from budgetdsl import closed_forms_generated as cf

            b_star = cf.min_time_batch(ctx.frontier.b_crit, cm.flops_per_token, cm.rate, cm.fixed_time)
            notes.append(f"past B = {human('tokens', b_star)} a bigger batch no longer buys time on "
                         f"{cm.gpus} GPUs (bubble, exposed gradient reduction and optimizer step = "
                         f"{human('s', cm.fixed_time)} per step)")
    if abs(cfg.batch - (pl.clipped or cfg.batch)) > 0 and status is Status.optimal:
        notes.append(f"snapped to {cfg.sequences} sequences = {cfg.micro_batch} × {cfg.grad_accum} "
                     f"accumulation × {cfg.data_parallel} replicas; steps rounded up to {cfg.steps}")
    if (cfg.micro_batch * cm.seq_len) % 8:
        notes.append(f"micro-batch of {cfg.micro_batch * cm.seq_len} tokens is not a multiple of 8 "
                     "(tensor cores prefer it)")
    return notes


def _not_finite(plan: "Plan", exc: ValidationError) -> PlanError | None:
    """Every number of an answer is finite, or the plan is rejected, located (issue 14). The
    plan's bounds (plan_model) keep every intermediate finite; the answer's models refuse a
    non-finite float where they are built (`solution._Frozen`: allow_inf_nan=False), so no renderer
    or export ever meets Infinity or NaN. None when `exc` is about something else (a bug)."""
    errors = exc.errors(include_url=False)
    if not errors or any(e["type"] != "finite_number" for e in errors):
        return None
    where = ".".join(str(k) for k in errors[0]["loc"]) or "a number"
    return plan_error(plan, (), "not-finite", f"the plan's numbers overflow: the answer's {where} is not finite",
                      "bring the plan's sizes and limits nearer to a real run's")


def _layout_report(ctx: _Context, results: list[_LayoutResult], winner: _LayoutResult, considered: int,
                   pruned: int, bounded: int = 0) -> dict:
    """The fields of `LayoutSearch`: the chosen layout, the best runners-up and why."""
    from budgetdsl.humanize import human

    b = ctx.frontier.b_crit
    w = winner.chosen.config
    best = [(r, r.chosen) for r in results if r.chosen.feasible and r is not winner]
    # the layouts the winner does not dominate first (their trade-off is real), then the rest
    best.sort(key=lambda rc: (w is not None and dominates(axes(w), axes(rc[1].config)),
                              rank(ctx.objective, rc[1].config, b)))

    def option(r: _LayoutResult, pl: Placement) -> dict:
        c = pl.config
        return dict(tensor_parallel=r.choice.tensor_parallel, pipeline_parallel=r.choice.pipeline_parallel,
                    zero=r.choice.zero, recompute=r.choice.recompute, gpus=c.gpus, micro_batch=c.micro_batch,
                    batch_tokens=c.batch, wall_clock_s=c.wall, gpu_hours=c.gpu_hours, flops=c.flops,
                    step_time_s=pl.cm.step_time(c.batch, c.grad_accum),
                    objective_ratio=_measure(ctx, c) / _measure(ctx, w) if w is not None and _measure(ctx, w) > 0
                    else None, dominated=w is not None and r is not winner and dominates(axes(w), axes(c)))
    feasible = sum(1 for r in results if r.chosen.feasible)
    runners = [option(r, pl) for r, pl in best[:3]]
    if w is None:
        reason = "no searched layout has a feasible configuration"
    else:
        measure = _OBJECTIVE_MEASURE[ctx.objective]
        reason = (f"{winner.choice.describe()} gives the best {measure} of the {feasible} feasible layouts "
                  f"({considered} layout × GPU-count pairs searched, {pruned} skipped as dominated by a "
                  "simpler layout with the same micro-batch room"
                  + (f", {bounded} never placed: a lower bound shows none of their configurations can "
                     "beat or dominate the pick" if bounded else "") + ")")
        if runners:
            r0 = runners[0]
            reason += (f"; the runner-up TP {r0['tensor_parallel']} · PP {r0['pipeline_parallel']} · ZeRO "
                       f"{r0['zero']} · recompute {r0['recompute']} takes {human('s', r0['wall_clock_s'])} and "
                       f"{human('GPU-h', r0['gpu_hours'])} at {human('tokens', r0['batch_tokens'])}"
                       + (", dominated by the winner (slower or as slow, no cheaper, no fewer FLOPs)"
                          if r0["dominated"] else f" ({measure} {r0['objective_ratio']:.3g}× the winner's)"))
        if winner.chosen.cm.mode == "declared":
            reason += ("; with a declared MFU every layout that fits runs at that MFU, so the simplest "
                       "layout that fits the chosen micro-batch wins")
    return dict(searched=list(ctx.plan.hardware.searched()) if hasattr(ctx.plan.hardware, "searched") else [],
                considered=considered, pruned=pruned, bounded=bounded, feasible=feasible,
                chosen=option(winner, winner.chosen) if w is not None else None,
                runners_up=runners, reason=reason)


def _measure(ctx: _Context, cfg: Config) -> float:
    return rank(ctx.objective, cfg, ctx.frontier.b_crit)[0]


def _front(ctx: _Context, candidates: list[Placement], chosen: Placement, points: int = 5) -> list[dict]:
    """A few points of the Pareto front over (wall clock, cost, FLOPs) of the evaluated candidates,
    each with the objectives that land on it (always including every objective's own point)."""
    b = ctx.frontier.b_crit
    front = pareto(candidates, lambda pl: axes(pl.config))
    if not front:
        return []
    front.sort(key=lambda pl: (pl.config.wall, pl.config.gpu_hours))
    lands: dict[int, list[str]] = {}
    for objective in OBJECTIVES:
        pick = min(front, key=lambda pl: rank(objective, pl.config, b))
        lands.setdefault(id(pick), []).append(objective)
    keep = {id(pl) for pl in front if id(pl) in lands}
    if len(front) > 1:
        for i in range(points):
            keep.add(id(front[round(i * (len(front) - 1) / max(1, points - 1))]))
    out = []
    shown: set = set()
    for pl in front:
        if id(pl) not in keep or axes(pl.config) in shown:
            continue
        shown.add(axes(pl.config))
        c = pl.config
        sp = pl.cm.split
        out.append(dict(gpus=c.gpus, batch_tokens=c.batch, x=c.batch / b, micro_batch=c.micro_batch,
                        tensor_parallel=sp.tensor_parallel, pipeline_parallel=sp.pipeline_parallel,
                        zero=sp.zero, recompute=sp.recompute, wall_clock_s=c.wall, gpu_hours=c.gpu_hours,
                        usd=c.usd, flops=c.flops, objectives=lands.get(id(pl), []),
                        chosen=pl.config == chosen.config and pl.cm.split == chosen.cm.split))
    return out


def _dominated_by_objectives(front: list[dict], cfg: Config | None, pinned: bool) -> list[str]:
    """A note when an objective's pick is better on every axis (wall clock, cost, FLOPs) than the
    launched run (issue 16). The solver's own pick is on the Pareto front, so this is a pinned run
    (`run.batch`) that some objective dominates: the case a reviewer needs to see, with figures."""
    if cfg is None:
        return []
    from budgetdsl.humanize import human

    mine = axes(cfg)
    cost = "usd" if cfg.usd is not None else "gpu_hours"
    unit = "USD" if cfg.usd is not None else "GPU-h"
    what = "the pinned run" if pinned else "the launched run"
    out = []
    for p in front:
        theirs = (p["wall_clock_s"], p[cost], p["flops"])
        if not p["objectives"] or p["chosen"] or not dominates(theirs, mine):
            continue
        objs = p["objectives"]
        names = objs[0] if len(objs) == 1 else ", ".join(objs[:-1]) + " and " + objs[-1]
        out.append(f"{what} is dominated: {names} pick{'s' if len(objs) == 1 else ''} B = {human('tokens', p['batch_tokens'])} on "
                   f"{p['gpus']:,} GPUs, {human('s', p['wall_clock_s'])}, {human(unit, p[cost])}, "
                   f"{human('FLOP', p['flops'])} against this run's {human('s', cfg.wall)}, "
                   f"{human(unit, mine[1])}, {human('FLOP', cfg.flops)}: no worse on any and better on "
                   "at least one")
    return out


def solve(plan: "Plan") -> Solution:
    """Place `plan` on the frontier and pick a launchable configuration. Never mutates `plan`."""
    try:
        return _solve(plan)
    except ValidationError as exc:
        err = _not_finite(plan, exc)
        if err is None:
            raise
        raise err from None


def _solve(plan: "Plan") -> Solution:
    noise = noise_estimate(plan)
    fr0, limits, objective = frontier_from_target(plan.target, noise.b_crit), plan_limits(plan), str(plan.objective)
    run = plan.run
    pinned_batch = run is not None and run.batch is not None
    micro_fixed = run.micro_batch if run is not None and not pinned_batch and run.micro_batch != "auto" else None
    gpu_choice: GpuChoice | None = None
    layout_fields = None

    if plan.hardware.searched():
        results, considered, pruned, bounded = _search_layouts(plan, noise, fr0, limits, objective,
                                                               pinned_batch, micro_fixed)
        if not results:
            raise plan_error(plan, ("hardware",), "no-layout",
                             "no searched layout launches on the plan's GPU counts",
                             "give hardware.gpus a count that fills whole nodes")
        probe = _Context(plan, noise, fr0, limits, objective)
        pick = _choose(probe, [pl for r in results for pl in r.candidates])
        if pick is not None:
            winner = next(r for r in results if pl_in(pick, r.candidates))
            winner.chosen = pick
        else:
            winner = min(results, key=lambda r: len(_conflicting_names(r.chosen)))
        # the winner's plan with its layout written in (what the report, ramp and exports read)
        ctx = _Context(concrete(plan, winner.choice), noise, fr0, limits, objective, winner.ctx.memo,
                       winner.ctx.split, winner.ctx.key)
        chosen, placements = winner.chosen, winner.placements
        if not pinned_batch:  # every count of the winning layout, pruned by bound or not (gpu_choice)
            gpn = int(plan.hardware.gpus_per_node)
            placements = [_place(ctx, g, micro_fixed=micro_fixed) for g in _raw_counts(plan)
                          if launches(winner.choice, g, gpn)]
        candidates = [pl for r in results for pl in r.candidates]
        layout_fields = _layout_report(ctx, results, winner, considered, pruned, bounded)
        layout_fields["searched"] = list(plan.hardware.searched())
    else:
        ctx = _Context(concrete(plan, None), noise, fr0, limits, objective, key=cost_model_key(plan))
        chosen, placements, candidates = _solve_layout(ctx, pinned_batch, micro_fixed)
    plan = ctx.plan
    dominated_note = None
    if not pinned_batch and chosen.feasible:
        # the objective's own target on the chosen count, for the constraints and notes; the
        # configuration is the non-dominated pick
        own = _place(ctx, chosen.cm.gpus, micro_fixed=micro_fixed)
        if own.config is not None and own.config != chosen.config and own.feasible and \
                dominates(axes(chosen.config), axes(own.config)):
            from budgetdsl.humanize import human

            dominated_note = (f"{ctx.objective}: its own batch on {chosen.cm.gpus} GPUs, "
                              f"{human('tokens', own.config.batch)}, is dominated (slower or as slow, no "
                              f"cheaper, more FLOPs) by {human('tokens', chosen.config.batch)}, "
                              "the non-dominated point chosen instead (docs/solver.md, Objectives)")
        chosen = Placement(chosen.cm, chosen.frontier, own.intervals, own.lo, own.hi, own.target, own.clipped,
                           chosen.config, chosen.micro_max, None)

    from budgetdsl.plan_model import GpuRange

    if isinstance(plan.hardware.gpus, GpuRange):
        r = plan.hardware.gpus
        feasible = [p for p in placements if p.feasible]
        reason = (_gpu_choice_reason(ctx, chosen, placements) if chosen.feasible
                  else "no count in the range has a feasible configuration")
        gpu_choice = GpuChoice(min=r.min, max=r.max, step=r.step, considered=len(placements),
                               feasible=len(feasible), chosen=chosen.cm.gpus if chosen.feasible else None,
                               reason=reason)

    cfg = chosen.config
    feasible = chosen.feasible
    status = (Status.pinned if pinned_batch else Status.optimal) if feasible else Status.infeasible
    fr, cm = ctx.frontier, chosen.cm
    x = fr.x(cfg.batch) if cfg is not None else None
    return Solution.model_validate(dict(
        status=status, feasible=status in FEASIBLE, plan=plan.name, objective=ctx.objective,
        gpus=cm.gpus,
        batch=dict(tokens=cfg.batch, sequences=cfg.sequences, micro_batch=cfg.micro_batch,
                   grad_accum=cfg.grad_accum, data_parallel=cfg.data_parallel,
                   tensor_parallel=cm.split.tensor_parallel, pipeline_parallel=cm.split.pipeline_parallel,
                   zero=cm.split.zero, recompute=cm.split.recompute)
        if cfg is not None else dict(data_parallel=cm.data_parallel, tensor_parallel=cm.split.tensor_parallel,
                                     pipeline_parallel=cm.split.pipeline_parallel, zero=cm.split.zero,
                                     recompute=cm.split.recompute),
        steps=cfg.steps if cfg else None, tokens=cfg.tokens if cfg else None,
        flops=cfg.flops if cfg else None, wall_clock_s=cfg.wall if cfg else None,
        gpu_hours=cfg.gpu_hours if cfg else None, usd=cfg.usd if cfg else None,
        frontier=dict(b_crit_tokens=fr.b_crit, b_crit_source=noise.source,
                      b_crit_uncertainty=noise.uncertainty, s_min=fr.s_min, e_min_tokens=fr.e_min,
                      x=x, s_over_smin=None if x is None else 1.0 + 1.0 / x,
                      e_over_emin=None if x is None else 1.0 + x),
        constraints=_constraints(ctx, chosen, pinned_batch),
        conflicts=[] if feasible else _conflicts(chosen),
        relaxations=[] if feasible else _relaxations(ctx, chosen, pinned_batch),
        memory_remedies=(_memory_remedies(ctx, cm) if chosen.micro_max < 1
                         or (cfg is not None and "memory" in cfg.violated) else []),
        uncertainty=_uncertainty(ctx, chosen),
        pinned=_comparison(ctx, chosen) if pinned_batch and cfg is not None else None,
        gpu_choice=gpu_choice,
        ramp=_ramp(ctx, chosen) if feasible else None,
        assumptions=_assumptions(cm, cfg),
        throughput=_throughput(cm, cfg),
        layout=layout_fields,
        front=(front := _front(ctx, candidates if not pinned_batch else
                               [*_candidates(ctx, _gpu_counts(ctx.plan), None), chosen], chosen)
               if feasible else []),
        notes=[*_notes(ctx, chosen, status), *([dominated_note] if dominated_note else []),
               *_dominated_by_objectives(front, cfg, pinned_batch), *noise.notes],
        warnings=[_warning_fields(w) for w in (*noise.warnings, *_x_warnings(ctx, x, pinned_batch))],
    ))


# x = B/B_crit beyond this factor either way: x = 100 spends E/E_min = 1 + x = 101x the minimal
# tokens, x = 1/100 takes S/S_min = 1 + 1/x = 101x the minimal steps (McCandlish et al. 2018,
# eq. 2.11). No plan sits there on purpose, so B_crit is the likelier mistake: a warning.
X_DOUBTFUL = 100.0


def _x_warnings(ctx: _Context, x: float | None, pinned: bool) -> list:
    """A located warning when the batch is more than X_DOUBTFUL times B_crit, or less than its
    inverse: most likely B_crit is wrong (a transfer from another corpus), not the batch."""
    from budgetdsl.humanize import human
    from budgetdsl.noise_source import plan_warning

    if x is None or 1.0 / X_DOUBTFUL <= x <= X_DOUBTFUL:
        return []
    fr = ctx.frontier
    side = (f"spends E/E_min = {1 + x:.3g}× the minimal tokens" if x > 1
            else f"takes S/S_min = {1 + 1 / x:.3g}× the minimal steps")
    where = ("run", "batch") if pinned else ("noise",)
    return [plan_warning(
        ctx.plan, where, "batch-far-from-b-crit",
        f"the batch is x = {x:.3g} × B_crit (B_crit {human('tokens', fr.b_crit)}, {ctx.noise.source}); "
        f"on the frontier it {side}, far outside x in [1/{X_DOUBTFUL:g}, {X_DOUBTFUL:g}]",
        "check where B_crit comes from (a calibration on another corpus or tokenizer transfers badly)")]


def _warning_fields(d) -> dict:
    return dict(file=d.location.file, line=d.location.line, col=d.location.col, code=d.code,
                message=d.message, hint=d.hint)
