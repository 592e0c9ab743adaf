"""The frontier picture for reports: the trade-off between tokens and steps, what each limit allows,
where the run sits, and B_crit.

Drawn from a `Solution` alone (its frontier, constraints and Pareto front), so the picture and the
table can never disagree. The left panel is the TUI's frontier: the hyperbola (S/S_min − 1)(E/E_min − 1)
= 1 with its asymptotes, the FLOP budget as a bound on E, the deadline where it cuts the hyperbola at
the chosen GPU count. Where the GPU count was searched a right panel shows the wall clock against
GPU-hours along the Pareto front. matplotlib is an optional extra (`plot`), imported only when
drawing; the SVG is deterministic (figures.py), so a committed picture diffs only when the plan does.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from budgetdsl.solve.solution import Solution
from budgetdsl.theory.frontier import Frontier

AXES = ("tokens-steps", "flops-wallclock")  # x-axis first, as `--plot-axes` names them
_X_MIN, _X_MAX = 2.0 ** -6, 2.0 ** 6  # x = B/B_crit shown at least over this range (as the TUI)
_X_LIMIT = 2.0 ** 14  # ... and at most over [1/_X_LIMIT, _X_LIMIT]
_DAY = 86400.0


@dataclass(frozen=True)
class Curve:
    """Points of the frontier S(B), E(B) for a geometric range of batches."""

    batch: list[float]
    tokens: list[float]
    steps: list[float]
    flops: list[float]
    wall: list[float]


def _frontier(sol: Solution) -> Frontier:
    return Frontier(b_crit=sol.frontier.b_crit_tokens, e_min=sol.frontier.e_min_tokens)


def feasible_batches(sol: Solution) -> tuple[float, float] | None:
    """The global batches (tokens) every limit allows, from the constraints' `allowed_batch`; None
    when no batch meets them all (the TUI's plot shades the same interval)."""
    lo, hi = 0.0, math.inf
    for c in sol.constraints:
        if c.allowed_batch is None:
            # None means "does not bound B", or that no B meets it: then it binds, unmet. Memory
            # bounds the micro-batch, not B, unless not even one sequence fits (no configuration).
            unmet = not sol.feasible and c.binding and c.satisfied is not True
            if unmet and (c.name != "memory" or sol.batch.tokens is None):
                return None
            continue
        a, b = c.allowed_batch  # an open end arrives as None (infinity does not serialise)
        lo, hi = max(lo, a or 0.0), min(hi, math.inf if b is None else b)
    return (lo, hi) if lo <= hi else None


def batch_range(sol: Solution) -> tuple[float, float]:
    """The batches drawn: x = B/B_crit over [1/64, 64], widened to show the run and the feasible
    interval's ends, at most [2^-14, 2^14] (the TUI's range)."""
    fr = _frontier(sol)
    lo_x, hi_x = _X_MIN, _X_MAX
    marks = [sol.frontier.x] if sol.frontier.x else []
    arc = feasible_batches(sol)
    if arc is not None:
        marks += [fr.x(b) for b in arc if 0 < b < math.inf]
    for m in marks:
        lo_x, hi_x = min(lo_x, m / 2), max(hi_x, m * 2)
    lo_x, hi_x = max(lo_x, 1 / _X_LIMIT), min(hi_x, _X_LIMIT)
    return fr.b_crit * lo_x, fr.b_crit * hi_x


def frontier_curve(sol: Solution, points: int = 400) -> Curve:
    """The run's frontier S(B), E(B) (`theory.frontier.Frontier`: McCandlish et al. 2018, eqs.
    2.11-2.12) over `batch_range`, and its wall clock W = S·T(B) with T(B) = f·B/rate + c on the
    solution's GPU count (the cost model's linear fit at the launched micro-batch, docs/design.md §2)."""
    fr, a = _frontier(sol), sol.assumptions
    f = a["flops_per_token"].value
    rate = a["achieved_flops"].value
    fixed = a["fixed_time"].value if "fixed_time" in a else 0.0  # bubble, exposed reduction, optimizer
    b_lo, b_hi = batch_range(sol)
    batch = [b_lo * (b_hi / b_lo) ** (i / (points - 1)) for i in range(points)]
    steps = [fr.steps(b) for b in batch]
    tokens = [fr.examples(b) for b in batch]
    wall = [s * (f * b / rate + fixed) for s, b in zip(steps, batch)]
    return Curve(batch, tokens, steps, [f * e for e in tokens], wall)


@dataclass(frozen=True)
class Panel:
    """What the frontier panel shows, in the units drawn (x, y as `axes` names them)."""

    axes: str
    curve: list[tuple[float, float]]  # along increasing B
    feasible: list[bool]  # per point: inside every limit's interval of B
    run: tuple[float, float] | None
    b_crit: tuple[float, float]
    asymptote_x: float | None  # E_min (or f·E_min): no batch needs fewer tokens
    asymptote_y: float | None  # S_min: no batch needs fewer steps (none on the wall clock axis)
    budget_x: float | None  # the FLOP budget: tokens ≤ flops/f
    deadline_y: list[float]  # the deadline where it cuts this frontier on the chosen GPU count
    deadline_unreachable: bool


def frontier_panel(sol: Solution, axes: str = "tokens-steps", points: int = 400) -> Panel:
    """The frontier in `axes` units: tokens-steps (E, S) or flops-wallclock (f·E, days)."""
    fr, curve = _frontier(sol), frontier_curve(sol, points)
    f = sol.assumptions["flops_per_token"].value
    flops = axes == "flops-wallclock"
    xs = curve.flops if flops else curve.tokens
    ys = [w / _DAY for w in curve.wall] if flops else curve.steps
    arc = feasible_batches(sol)
    feasible = [arc is not None and arc[0] * (1 - 1e-9) <= b <= arc[1] * (1 + 1e-9) for b in curve.batch]
    run = None
    if sol.tokens is not None and sol.steps is not None:
        run = (float((sol.flops or 0.0) if flops else sol.tokens),
               (sol.wall_clock_s or 0.0) / _DAY if flops else float(sol.steps))
    i_crit = min(range(len(curve.batch)), key=lambda i: abs(math.log(curve.batch[i] / fr.b_crit)))
    budget = sol.constraint("flops")
    deadline = sol.constraint("deadline")
    cuts: list[float] = []
    if deadline is not None:
        if flops:
            cuts = [deadline.limit / _DAY]
        elif deadline.allowed_batch is not None:  # as the TUI: the frontier's steps at the interval's ends
            cuts = [fr.steps(b) for b in deadline.allowed_batch if b is not None and 0 < b < math.inf]
    return Panel(
        axes, list(zip(xs, ys)), feasible, run, (xs[i_crit], ys[i_crit]),
        fr.e_min * (f if flops else 1.0), None if flops else fr.s_min,
        None if budget is None else budget.limit / (1.0 if flops else f),
        cuts, deadline is not None and not flops and deadline.allowed_batch is None,
    )


def pareto_front(sol: Solution) -> list[tuple[float, float, int, bool]]:
    """(GPU-hours, wall clock in days, GPUs, chosen) along the solution's Pareto front, by GPU-hours;
    empty unless the front spans more than one GPU count (the count was searched). The picture has
    two axes: a point of the front that only its FLOPs keep there (another is as fast and as cheap)
    is left out, unless it is the one chosen."""
    if len({p.gpus for p in sol.front}) < 2:
        return []
    points = sorted((p.gpu_hours, p.wall_clock_s / _DAY, p.gpus, p.chosen) for p in sol.front)
    return [p for p in points if p[3] or not any(
        q[0] <= p[0] and q[1] <= p[1] and (q[0] < p[0] or q[1] < p[1]) for q in points)]


def draw(sol: Solution, path: str, axes: str = "tokens-steps") -> None:
    """Write the picture to `path` (.svg or .png); `axes` is one of `AXES`."""
    from budgetdsl.report.figures import new_panels, save

    front = pareto_front(sol)
    fig, panels = new_panels(2 if front else 1)
    _draw_frontier(panels[0], sol, frontier_panel(sol, axes))
    if front:
        _draw_front(panels[1], sol, front)
    fig.suptitle(title(sol), fontsize=11)
    save(fig, path)


def _draw_frontier(ax: Any, sol: Solution, p: Panel) -> None:
    from budgetdsl.report.figures import plain_log_labels, plain_number

    flops = p.axes == "flops-wallclock"
    ax.plot([x for x, _ in p.curve], [y for _, y in p.curve], color="#9aa5b1", lw=1.5,
            label="frontier (S/S_min − 1)(E/E_min − 1) = 1")
    arc = [xy for xy, ok in zip(p.curve, p.feasible) if ok]
    if arc:
        ax.plot([x for x, _ in arc], [y for _, y in arc], color="#2f9e44", lw=4, alpha=0.8,
                label="allowed by every limit")
    if p.asymptote_x is not None:
        ax.axvline(p.asymptote_x, color="#868e96", ls=":", lw=1,
                   label=f"E_min = {_si(sol.frontier.e_min_tokens)} tokens" if not flops else "f·E_min")
    if p.asymptote_y is not None:
        ax.axhline(p.asymptote_y, color="#495057", ls=":", lw=1, label=f"S_min = {_si(sol.frontier.s_min)} steps")
    if p.budget_x is not None:
        ax.axvline(p.budget_x, color="#e8590c", ls="--", lw=1.2,
                   label="FLOP budget" if flops else "FLOP budget: E ≤ FLOPs/f")
    on = f" on {sol.gpus} GPUs" if sol.gpus else ""
    for i, y in enumerate(p.deadline_y):
        ax.axhline(y, color="#c92a2a", ls="--", lw=1.2, label=f"deadline{on}" if i == 0 else None)
    ax.plot([p.b_crit[0]], [p.b_crit[1]], marker="D", color="#5f3dc4", ls="none", ms=7,
            label=f"B_crit = {_si(sol.frontier.b_crit_tokens)} tokens (x = 1)")
    if p.run is not None:
        ax.plot([p.run[0]], [p.run[1]], marker="o", ms=10, color="#1971c2" if sol.feasible else "#c92a2a",
                ls="none", label=f"this run: B = {_si(sol.batch.tokens or 0)} tokens, "
                f"x = B/B_crit = {sol.frontier.x:.2g}")
    if p.deadline_unreachable:
        ax.text(0.02, 0.02, f"the deadline is out of reach{on}", transform=ax.transAxes, fontsize=8,
                color="#c92a2a")
    ax.set_xlabel("training compute (FLOP)" if flops else "tokens E")
    ax.set_ylabel("wall clock (days)" if flops else "optimizer steps S")
    ax.grid(True, which="major", alpha=0.3)
    plain_log_labels(ax.xaxis, plain_number if flops else _si)  # 4e22 FLOP; 500B, 1T tokens
    plain_log_labels(ax.yaxis, plain_number if flops else _si)  # 20, 30 days; 300k, 1M steps
    ax.legend(loc="best", fontsize=7, framealpha=0.9)


def _draw_front(ax: Any, sol: Solution, front: list[tuple[float, float, int, bool]]) -> None:
    from budgetdsl.report.figures import plain_log_labels, plain_number

    ax.plot([p[0] for p in front], [p[1] for p in front], color="#9aa5b1", lw=1.2, marker="o", ms=4,
            label="Pareto front (one point per GPU count)")
    for hours, days, gpus, _chosen in front:
        ax.annotate(str(gpus), (hours, days), textcoords="offset points", xytext=(4, 4), fontsize=7,
                    color="#495057")
    for hours, days, gpus, chosen in front:
        if chosen:
            ax.plot([hours], [days], marker="o", ms=10, color="#1971c2" if sol.feasible else "#c92a2a",
                    ls="none", label=f"this run: {gpus} GPUs")
    deadline = sol.constraint("deadline")
    if deadline is not None:
        ax.axhline(deadline.limit / _DAY, color="#c92a2a", ls="--", lw=1.2, label="deadline")
    budget = sol.constraint("gpu_hours")
    if budget is not None:
        ax.axvline(budget.limit, color="#e8590c", ls="--", lw=1.2, label="GPU-hour budget")
    ax.set_xlabel("GPU-hours")
    ax.set_ylabel("wall clock (days)")
    ax.set_title("GPU count searched: wall clock against cost", fontsize=9)
    ax.grid(True, which="major", alpha=0.3)
    plain_log_labels(ax.xaxis, _si)
    plain_log_labels(ax.yaxis, plain_number)
    ax.legend(loc="lower left", fontsize=7, framealpha=0.9)


def title(sol: Solution) -> str:
    """`plan: feasible (balanced)` for the objective's own choice; a run the plan pins (`run:`)
    says so, since no objective chose its batch: `plan: feasible (pinned run)`. The plan's name is
    plan text: on one line and inert (a control character would go raw into the SVG, and into
    matplotlib's missing-glyph warning on stderr)."""
    from budgetdsl.io.terminal_text import one_line

    word = "feasible" if sol.feasible else "INFEASIBLE"
    pinned = sol.pinned is not None or sol.status == "pinned"
    return f"{one_line(sol.plan)}: {word} ({'pinned run' if pinned else sol.objective})"


def _si(v: float) -> str:
    from budgetdsl.quantities.humanize import si

    return si(v)
