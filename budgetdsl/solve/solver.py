"""`solve(plan, cache=None) -> Solution`: place a run on the critical-batch frontier (docs/design.md section 3).

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

`solve` is a pure function of its arguments: the noise source (a calibration file) was read when
the plan was loaded (`plan.loader.LoadedPlan`), nothing here reads a file, and what is kept across
solves lives in the caller's `SolveCache` (a solve without one makes its own). Each concept has
its own module; this one orchestrates them:
    search_space        the layout × GPU-count pairs and the bound-and-prune search
    cache               what solves share: cost models, spaces, placements, picks, searches
    solve_context       what one solve shares: cost models, memoized placements, the pick
    diagnosis           conflicts, and each limit at the configuration (constraints)
    relaxations         the smallest change of each limit, the GPU count, memory remedies
    uncertainty         the configuration at B_crit·(1 ± u)
    pinned_comparison   a pinned run beside the objective's own choice
    ramp_solution       the batch-size ramp of the launched configuration
    layout_report       the chosen layout, its runners-up, the Pareto front shown
    solution_notes      the wording: notes, warnings, throughput, assumptions
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import BaseModel, ValidationError

from budgetdsl.hardware.layout import slot_names
from budgetdsl.plan.diagnostics import PlanError
from budgetdsl.plan.noise import noise_estimate, plan_error
from budgetdsl.solve import infeasibility as diagnosis
from budgetdsl.solve import (
    layout_report,
    pinned_comparison,
    ramp_solution,
    relaxations,
    uncertainty,
)
from budgetdsl.solve import notes as solution_notes
from budgetdsl.solve.cache import SolveCache
from budgetdsl.solve.context import (
    Context,
    candidates,
    contains,
    gpu_counts,
    pick,
    place_on,
    plan_limits,
    raw_counts,
    solve_layout,
)
from budgetdsl.solve.layout_search import concrete, launches
from budgetdsl.solve.objectives import axes, dominates
from budgetdsl.solve.placement import Placement
from budgetdsl.solve.search_space import search_layouts
from budgetdsl.solve.solution import (
    FEASIBLE,
    Batch,
    FrontierPoint,
    GpuChoice,
    Solution,
    Status,
)
from budgetdsl.theory.frontier import frontier_from_target

if TYPE_CHECKING:
    from budgetdsl.plan.model import Plan

__all__ = ["SolveCache", "solve", "plan_limits"]


def solve(plan: Plan, cache: SolveCache | None = None) -> Solution:
    """Place `plan` on the frontier and pick a launchable configuration. Never mutates `plan`.
    `cache`: what solves of many plans share (the caller's); the answer is the same without it."""
    try:
        return _solve(plan, SolveCache() if cache is None else cache)
    except ValidationError as exc:
        err = _not_finite(plan, exc)
        if err is None:
            raise
        raise err from None


def _solve(plan: Plan, cache: SolveCache) -> Solution:
    noise = noise_estimate(plan)
    fr0, limits, objective = frontier_from_target(plan.target, noise.b_crit), plan_limits(plan), str(plan.objective)
    run = plan.run
    pinned_batch = run is not None and run.batch is not None
    micro_fixed = run.micro_batch if run is not None and not pinned_batch and run.micro_batch != "auto" else None
    gpu_choice: GpuChoice | None = None
    layout_fields = None
    found = None

    if plan.hardware.searched():
        results, considered, pruned, bounded, found = search_layouts(plan, noise, fr0, limits, objective,
                                                                      pinned_batch, micro_fixed, cache)
        if not results:
            raise plan_error(plan, ("hardware",), "no-layout",
                             "no searched layout launches on the plan's GPU counts",
                             "give hardware.gpus a count that fills whole nodes")
        pool = [pl for r in results for pl in r.candidates]
        if found is not None:  # the search's own pool: its pick, an exact tie to the first in `pool`
            best = found.pick()
            if best is not None:
                tied = {id(pl) for pl in found.tied(best)}
                best = next(pl for pl in pool if id(pl) in tied) if len(tied) > 1 else best
        else:
            best = pick(Context(plan, noise, fr0, limits, objective, cache=cache), pool)
        if best is not None:
            winner = next(r for r in results if contains(best, r.candidates))
            winner.chosen = best
        else:
            winner = min(results, key=lambda r: len(diagnosis.conflicting_names(r.chosen)))
        # the winner's plan with its layout written in (what the report, ramp and exports read)
        ctx = Context(concrete(plan, winner.choice), noise, fr0, limits, objective, winner.ctx.memo,
                       winner.ctx.split, winner.ctx.key, cache)
        chosen, placements = winner.chosen, winner.placements
        if not pinned_batch:  # every count of the winning layout, pruned by bound or not (gpu_choice)
            gpn = int(plan.hardware.gpus_per_node)
            placements = [place_on(ctx, g, micro_fixed=micro_fixed) for g in raw_counts(plan)
                          if launches(winner.choice, g, gpn, plan)]
        layout_fields = layout_report.layout_report(ctx, results, winner, considered, pruned, bounded,
                                                     list(plan.hardware.searched()))
    else:
        ctx = Context(concrete(plan, None), noise, fr0, limits, objective, key=cache.model_key(plan), cache=cache)
        chosen, placements, pool = solve_layout(ctx, pinned_batch, micro_fixed)
    plan = ctx.plan
    dominated_note = None
    if not pinned_batch and chosen.feasible:
        # the objective's own target on the chosen count, for the constraints and notes; the
        # configuration is the non-dominated pick
        own, mine = place_on(ctx, chosen.cm.gpus, micro_fixed=micro_fixed), chosen.config
        if mine is not None and own.config is not None and own.config != mine and own.feasible and \
                dominates(axes(mine), axes(own.config)):
            from budgetdsl.quantities.humanize import human

            dominated_note = (f"{ctx.objective}: its own batch on {chosen.cm.gpus} GPUs, "
                              f"{human('tokens', own.config.batch)}, is dominated (slower or as slow, no "
                              f"cheaper, more FLOPs) by {human('tokens', mine.batch)}, "
                              "the non-dominated point chosen instead (docs/solver.md, Objectives)")
        chosen = Placement(chosen.cm, chosen.frontier, own.intervals, own.lo, own.hi, own.target, own.clipped,
                           chosen.config, chosen.micro_max, None)

    from budgetdsl.plan.model import GpuRange

    if isinstance(plan.hardware.gpus, GpuRange):
        r = plan.hardware.gpus
        feasible_counts = [p for p in placements if p.feasible]
        reason = (solution_notes.gpu_choice_reason(ctx, chosen, placements) if chosen.feasible
                  else "no count in the range has a feasible configuration")
        gpu_choice = GpuChoice(min=r.min, max=r.max, step=r.step, considered=len(placements),
                               feasible=len(feasible_counts), chosen=chosen.cm.gpus if chosen.feasible else None,
                               reason=reason)

    cfg = chosen.config
    feasible = chosen.feasible
    status = (Status.pinned if pinned_batch else Status.optimal) if feasible else Status.infeasible
    fr, cm = ctx.frontier, chosen.cm
    x = fr.x(cfg.batch) if cfg is not None else None
    return Solution(
        status=status, feasible=status in FEASIBLE, plan=plan.name, objective=ctx.objective,
        gpus=cm.gpus,
        batch=Batch(tokens=cfg.batch, sequences=cfg.sequences, micro_batch=cfg.micro_batch,
                    grad_accum=cfg.grad_accum, data_parallel=cfg.data_parallel,
                    tensor_parallel=cm.split.tensor_parallel, pipeline_parallel=cm.split.pipeline_parallel,
                    zero=cm.split.zero, recompute=cm.split.recompute, context_parallel=cm.split.context_parallel,
                    expert_parallel=cm.split.expert_parallel, sequence_parallel=cm.split.sequence_parallel,
                    virtual_pipeline_stages=cm.split.virtual_stages, recompute_layers=cm.split.recompute_layers,
                    pipeline_split_slots=list(slot_names(plan.hardware.split_slots(),
                                                         cm.split.pipeline_parallel)) or None)
        if cfg is not None else Batch(data_parallel=cm.data_parallel, tensor_parallel=cm.split.tensor_parallel,
                                      pipeline_parallel=cm.split.pipeline_parallel, zero=cm.split.zero,
                                      recompute=cm.split.recompute, recompute_layers=cm.split.recompute_layers),
        steps=cfg.steps if cfg else None, tokens=cfg.tokens if cfg else None,
        flops=cfg.flops if cfg else None, wall_clock_s=cfg.wall if cfg else None,
        gpu_hours=cfg.gpu_hours if cfg else None, usd=cfg.usd if cfg else None,
        frontier=FrontierPoint(b_crit_tokens=fr.b_crit, b_crit_source=noise.source,
                               b_crit_uncertainty=noise.uncertainty, s_min=fr.s_min, e_min_tokens=fr.e_min,
                               x=x, s_over_smin=None if x is None else 1.0 + 1.0 / x,
                               e_over_emin=None if x is None else 1.0 + x),
        constraints=diagnosis.constraints(ctx.limits, chosen, pinned_batch),
        conflicts=[] if feasible else diagnosis.conflicts(chosen),
        relaxations=[] if feasible else relaxations.relaxations(ctx, chosen, pinned_batch),
        memory_remedies=(relaxations.memory_remedies(ctx, cm) if chosen.micro_max < 1
                         or (cfg is not None and "memory" in cfg.violated) else []),
        uncertainty=uncertainty.uncertainty(ctx, chosen),
        pinned=pinned_comparison.comparison(ctx, chosen) if pinned_batch and cfg is not None else None,
        gpu_choice=gpu_choice,
        ramp=ramp_solution.ramp(ctx, chosen) if feasible else None,
        assumptions=solution_notes.assumptions(cm, cfg),
        throughput=solution_notes.throughput(cm, cfg),
        layout=layout_fields,
        front=(front := layout_report.front(ctx, pool if not pinned_batch else
                               [*candidates(ctx, gpu_counts(ctx.plan), None), chosen], chosen,
                               on_front=_front_of(found, pool) if found is not None else None,
                               picks=None if found is None else
                               {o: chosen if o == ctx.objective else found.pick(o) for o in found.objectives})
               if feasible else []),
        notes=[*solution_notes.run_notes(ctx, chosen, status), *([dominated_note] if dominated_note else []),
               *layout_report.dominated_by_objectives(front, cfg, pinned_batch), *noise.notes],
        warnings=[solution_notes.warning_fields(w)
                  for w in (*noise.warnings, *solution_notes.x_warnings(ctx, x, pinned_batch),
                            *solution_notes.layout_warnings(ctx), *solution_notes.shape_warnings(ctx))],
    )


def _front_of(found, pool: list[Placement]) -> list[Placement]:
    """The search pool's front (`objectives.Pool.front`), in the order of `pool`."""
    on = {id(pl) for pl in found.front()}
    return [pl for pl in pool if id(pl) in on]


def _not_finite(plan: Plan, exc: ValidationError) -> PlanError | None:
    """Every number of an answer is finite, or the plan is rejected, located (issue 14). The
    plan's bounds (plan_model) keep every intermediate finite; the answer's models refuse a
    non-finite float where they are built (`solution._Frozen`: allow_inf_nan=False), so no renderer
    or export ever meets Infinity or NaN. None when `exc` is about something else (a bug)."""
    errors = exc.errors(include_url=False)
    if not errors or any(e["type"] != "finite_number" for e in errors):
        return None
    where = ".".join(str(k) for k in errors[0]["loc"]) or "a number"
    part = _part_field(exc.title)  # the answer is built part by part: name the part's field
    if part is not None:
        where = f"{part}.{where}"
    return plan_error(plan, (), "not-finite", f"the plan's numbers overflow: the answer's {where} is not finite",
                      "bring the plan's sizes and limits nearer to a real run's")


def _part_field(title: str, model: type[BaseModel] = Solution) -> str | None:
    """Where in `Solution` a part of class `title` sits (FrontierPoint: frontier; RampStage:
    ramp.stages), or None for the Solution itself."""
    import typing

    def classes(annotation) -> list:
        out = [annotation] if isinstance(annotation, type) else []
        for arg in typing.get_args(annotation):
            out += classes(arg)
        return out

    for name, f in model.model_fields.items():
        for cls in classes(f.annotation):
            if cls.__name__ == title:
                return name
            if issubclass(cls, BaseModel) and cls is not model:
                inner = _part_field(title, cls)
                if inner is not None:
                    return f"{name}.{inner}"
    return None
