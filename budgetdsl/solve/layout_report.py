"""What the report says about a layout search and the Pareto front: the chosen layout, the best
runners-up with what each costs and why the winner won (`layout_report`); a few points of the front
over (wall clock, cost, FLOPs) with where each objective lands (`front`); and a note when an
objective's pick beats the launched run on every axis (`dominated_by_objectives`). Wording and
selection only: the search itself is `search_space`'s.
"""

from __future__ import annotations

from budgetdsl.solve.context import Context
from budgetdsl.solve.objectives import (
    MEASURE,
    OBJECTIVES,
    axes,
    dominates,
    pareto,
    rank,
)
from budgetdsl.solve.placement import Config, Placement
from budgetdsl.solve.search_space import LayoutResult
from budgetdsl.solve.solution import FrontPoint, LayoutOption, LayoutSearch, recompute_label


def layout_report(ctx: Context, results: list[LayoutResult], winner: LayoutResult, considered: int,
                   pruned: int, bounded: int, searched: list[str]) -> LayoutSearch:
    """The chosen layout, the best runners-up and why (`searched`: the plan keys set to auto)."""
    from budgetdsl.quantities.humanize import human

    b = ctx.frontier.b_crit
    w = winner.chosen.config
    best = [(r, r.chosen) for r in results if r.chosen.feasible and r is not winner]
    # the layouts the winner does not dominate first (their trade-off is real), then the rest
    wa = axes(w) if w is not None else None
    best.sort(key=lambda rc: (wa is not None and dominates(wa, axes(rc[1].config)),
                              rank(ctx.objective, rc[1].config, b)))

    def option(r: LayoutResult, pl: Placement) -> LayoutOption:
        c, top = _config(pl), w
        ratio = _measure(ctx, c) / _measure(ctx, top) if top is not None and _measure(ctx, top) > 0 else None
        return LayoutOption(tensor_parallel=r.choice.tensor_parallel, pipeline_parallel=r.choice.pipeline_parallel,
                            zero=r.choice.zero, recompute=r.choice.recompute, gpus=c.gpus, micro_batch=c.micro_batch,
                            batch_tokens=c.batch, wall_clock_s=c.wall, gpu_hours=c.gpu_hours, flops=c.flops,
                            step_time_s=pl.cm.step_time(c.batch, c.grad_accum), objective_ratio=ratio,
                            dominated=top is not None and r is not winner and dominates(axes(top), axes(c)),
                            sequence_parallel=r.choice.sequence_parallel,
                            virtual_pipeline_stages=r.choice.virtual_stages,
                            recompute_layers=r.choice.recompute_layers)
    feasible = sum(1 for r in results if r.chosen.feasible)
    runners = [option(r, pl) for r, pl in best[:3]]
    if w is None:
        reason = "no searched layout has a feasible configuration"
    else:
        measure = MEASURE[ctx.objective]
        reason = (f"{winner.choice.describe()} gives the best {measure} of the {feasible} feasible layouts "
                  f"({considered} layout × GPU-count pairs searched, {pruned} skipped as dominated by a "
                  "simpler layout with the same micro-batch room"
                  + (f", {bounded} never placed: a lower bound shows none of their configurations can "
                     "beat or dominate the pick" if bounded else "") + ")")
        if runners:
            r0 = runners[0]
            reason += (f"; the runner-up TP {r0.tensor_parallel} · PP {r0.pipeline_parallel} · ZeRO "
                       f"{r0.zero} · recompute "
                       f"{recompute_label(r0.recompute, r0.recompute_layers, r0.virtual_pipeline_stages)} takes "
                       f"{human('s', r0.wall_clock_s)} and "
                       f"{human('GPU-h', r0.gpu_hours)} at {human('tokens', r0.batch_tokens)}"
                       + (", dominated by the winner (slower or as slow, no cheaper, no fewer FLOPs)"
                          if r0.dominated else f" ({measure} {r0.objective_ratio:.3g}× the winner's)"))
        if winner.chosen.cm.mode == "declared":
            reason += ("; with a declared MFU every layout that fits runs at that MFU, so the simplest "
                       "layout that fits the chosen micro-batch wins")
    return LayoutSearch(searched=searched, considered=considered, pruned=pruned, bounded=bounded, feasible=feasible,
                        chosen=option(winner, winner.chosen) if w is not None else None,
                        runners_up=runners, reason=reason)


def _measure(ctx: Context, cfg: Config) -> float:
    return rank(ctx.objective, cfg, ctx.frontier.b_crit)[0]


def _config(pl: Placement) -> Config:
    """A candidate's configuration: every feasible placement has one."""
    assert pl.config is not None
    return pl.config


def front(ctx: Context, candidates: list[Placement], chosen: Placement, points: int = 5,
          on_front: list[Placement] | None = None,
          picks: dict[str, Placement | None] | None = None) -> list[FrontPoint]:
    """A few points of the Pareto front over (wall clock, cost, FLOPs) of the evaluated candidates,
    each with the objectives that land on it (always including every objective's own point).
    `on_front`: the candidates' front when the caller has it already (the search's pool);
    `picks`: each objective's own pick when the candidates were placed for one objective (a
    layout search prunes what no objective's pick needs: the least measure among them is not
    another objective's answer)."""
    b = ctx.frontier.b_crit
    front = list(on_front) if on_front is not None else pareto(candidates, lambda pl: axes(pl.config))
    if not front:
        return []
    front.sort(key=lambda pl: (_config(pl).wall, _config(pl).gpu_hours))
    lands: dict[tuple, list[str]] = {}  # by the point's axes: equal points are shown once
    for objective in OBJECTIVES:
        pick = picks[objective] if picks else min(front, key=lambda pl: rank(objective, pl.config, b))
        assert pick is not None  # a feasible search: every objective has a pick
        lands.setdefault(axes(pick.config), []).append(objective)
    keep = {id(pl) for pl in front if axes(pl.config) in lands}
    if len(front) > 1:
        for i in range(points):
            keep.add(id(front[round(i * (len(front) - 1) / max(1, points - 1))]))
    out = []
    shown: set = set()
    for pl in front:
        if id(pl) not in keep or axes(pl.config) in shown:
            continue
        shown.add(axes(pl.config))
        c = _config(pl)
        sp = pl.cm.split
        out.append(FrontPoint(gpus=c.gpus, batch_tokens=c.batch, x=c.batch / b, micro_batch=c.micro_batch,
                              tensor_parallel=sp.tensor_parallel, pipeline_parallel=sp.pipeline_parallel,
                              zero=sp.zero, recompute=sp.recompute, wall_clock_s=c.wall, gpu_hours=c.gpu_hours,
                              usd=c.usd, flops=c.flops, objectives=lands.get(axes(c), []),
                              chosen=pl.config == chosen.config and pl.cm.split == chosen.cm.split,
                              recompute_layers=sp.recompute_layers,
                              virtual_pipeline_stages=pl.cm.layout.virtual_stages
                              if sp.recompute_layers is not None and pl.cm.layout is not None else None))
    return out


def dominated_by_objectives(front: list[FrontPoint], cfg: Config | None, pinned: bool) -> list[str]:
    """A note when an objective's pick is better on every axis (wall clock, cost, FLOPs) than the
    launched run (issue 16). The solver's own pick is on the Pareto front, so this is a pinned run
    (`run.batch`) that some objective dominates: the case a reviewer needs to see, with figures."""
    if cfg is None:
        return []
    from budgetdsl.quantities.humanize import human

    mine = axes(cfg)
    cost = "usd" if cfg.usd is not None else "gpu_hours"
    unit = "USD" if cfg.usd is not None else "GPU-h"
    what = "the pinned run" if pinned else "the launched run"
    out = []
    for p in front:
        theirs = (p.wall_clock_s, getattr(p, cost), p.flops)
        if not p.objectives or p.chosen or not dominates(theirs, mine):
            continue
        objs = p.objectives
        names = objs[0] if len(objs) == 1 else ", ".join(objs[:-1]) + " and " + objs[-1]
        out.append(f"{what} is dominated: {names} pick{'s' if len(objs) == 1 else ''} "
                   f"B = {human('tokens', p.batch_tokens)} on "
                   f"{p.gpus:,} GPUs, {human('s', p.wall_clock_s)}, {human(unit, getattr(p, cost))}, "
                   f"{human('FLOP', p.flops)} against this run's {human('s', cfg.wall)}, "
                   f"{human(unit, mine[1])}, {human('FLOP', cfg.flops)}: no worse on any and better on "
                   "at least one")
    return out
