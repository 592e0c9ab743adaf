"""A pinned run (`run.batch`) beside the objective's own choice on the same layout: the ratios of
batch, steps, tokens, wall clock and FLOPs, and the objective's measure against its optimum. Its
own module: it is a second solve of the plan with the batch left free.
"""

from __future__ import annotations

from budgetdsl.solve.context import Context, solve_core
from budgetdsl.solve.objectives import MEASURE
from budgetdsl.solve.placement import Placement, score
from budgetdsl.solve.solution import PinnedComparison


def comparison(ctx: Context, pinned: Placement) -> PinnedComparison:
    chosen, _ = solve_core(ctx)
    p, o = pinned.config, chosen.config if chosen.feasible else None
    assert p is not None
    if o is None:
        return PinnedComparison(objective_batch_tokens=None, objective_feasible=False,
                                summary=f"the {ctx.objective} objective finds no feasible configuration")
    ratio = score(ctx.objective, ctx.frontier, p) / score(ctx.objective, ctx.frontier, o)
    from budgetdsl.quantities.humanize import human

    summary = (f"the {ctx.objective} choice is B = {human('tokens', o.batch)} on {o.gpus} GPUs; the pinned "
               f"batch is {p.batch / o.batch:.3g}× it, with {p.steps / o.steps:.3g}× the steps, "
               f"{p.wall / o.wall:.3g}× the wall clock and {p.flops / o.flops:.3g}× the FLOPs "
               f"({MEASURE[ctx.objective]} {ratio:.3g}× the optimum)")
    return PinnedComparison(objective_batch_tokens=o.batch, objective_feasible=True,
                            batch_ratio=p.batch / o.batch, steps_ratio=p.steps / o.steps,
                            tokens_ratio=p.tokens / o.tokens, wall_clock_ratio=p.wall / o.wall,
                            flops_ratio=p.flops / o.flops, objective_ratio=ratio, summary=summary)
