"""The launched configuration re-evaluated at B_crit·(1 ± u) (`noise.uncertainty`, or the
calibration's own): the spans of steps, tokens, FLOPs, wall clock and GPU-hours, and whether every
limit still holds at both ends. Its own module: it re-prices one configuration on other frontiers,
which nothing else in a solve does.
"""

from __future__ import annotations

from budgetdsl.solve.context import Context
from budgetdsl.solve.placement import LIMIT_NAMES, Config, Placement, evaluate
from budgetdsl.solve.solution import Uncertainty
from budgetdsl.theory.frontier import frontier_from_target


def uncertainty(ctx: Context, pl: Placement) -> Uncertainty | None:
    """The spans at B_crit·(1 ± u), or None without `noise.uncertainty`."""
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

    def span(attr: str) -> dict[str, float]:  # a Span, validated (finite) inside the Uncertainty
        vals = [float(getattr(e, attr)) for e in evals]
        return {"low": min(vals), "high": max(vals)}

    holds = {name: all(name not in e.violated for e in evals)
             for name in (*[n for n in LIMIT_NAMES if getattr(ctx.limits, n) is not None], "memory")}
    return Uncertainty(relative=u, b_crit_tokens={"low": ends[0], "high": ends[2]}, steps=span("steps"),
                       tokens=span("tokens"), flops=span("flops"), wall_clock_s=span("wall"),
                       gpu_hours=span("gpu_hours"), limits_hold=holds, all_hold=all(holds.values()))
