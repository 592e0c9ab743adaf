"""The frontier picture for reports: where the run sits, what each limit allows, what B_crit is.

Drawn from a `Solution` alone (its frontier and the coefficients of its cost model), so the picture
and the table can never disagree. Log-log axes: FLOPs (or tokens) against wall clock (or steps).
In (FLOPs, wall clock) both the FLOP budget and the deadline are straight lines. matplotlib is an
optional extra (`plot`), imported only here; the SVG is deterministic
(fixed hash salt, no date), so a committed picture diffs only when the plan changes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from budgetdsl.solve.solution import Solution


@dataclass(frozen=True)
class Curve:
    """Points of the frontier S(B), E(B) for a geometric range of batches."""

    batch: list[float]
    tokens: list[float]
    steps: list[float]
    flops: list[float]
    wall: list[float]


def frontier_curve(sol: Solution, margin: float = 1.0, points: int = 400) -> Curve:
    """The run's frontier, S = S_min(1 + B_crit/B), E = E_min(1 + B/B_crit) (McCandlish et al.
    2018, eqs. 2.11-2.12), and its wall clock W = S·T(B) with T(B) = f·B/rate + c
    on the solution's hardware (docs/design.md §2), for batches `margin` decades around B_crit and the
    run's batch."""
    fr, a = sol.frontier, sol.assumptions
    f = a["flops_per_token"].value
    # T(B) = f·B/rate + c at the launched micro-batch (cost_model.linear_at): c holds the pipeline
    # bubble, the exposed gradient reduction and the optimizer step (0 with a declared MFU)
    rate = a["achieved_flops"].value
    fixed = a["fixed_time"].value if "fixed_time" in a else 0.0
    ends = [fr.b_crit_tokens, sol.batch.tokens or fr.b_crit_tokens]
    lo, hi = math.log10(min(ends)) - margin, math.log10(max(ends)) + margin  # decades around both
    batch = [10 ** (lo + (hi - lo) * i / (points - 1)) for i in range(points)]
    steps = [fr.s_min * (1 + fr.b_crit_tokens / b) for b in batch]
    tokens = [fr.e_min_tokens * (1 + b / fr.b_crit_tokens) for b in batch]
    wall = [s * (f * b / rate + fixed) for s, b in zip(steps, batch)]
    return Curve(batch, tokens, steps, [f * e for e in tokens], wall)


def feasible_batches(sol: Solution) -> tuple[float, float]:
    """The batches every limit allows (the intersection of the constraints' intervals)."""
    lo, hi = 0.0, math.inf
    for c in sol.constraints:
        if c.allowed_batch is not None:
            low, high = c.allowed_batch  # None: unbounded on that side
            lo = max(lo, low if low is not None else 0.0)
            hi = min(hi, high if high is not None else math.inf)
    return lo, hi


def draw(sol: Solution, path: str, axes: str = "flops-wallclock") -> None:
    """Write the picture to `path` (.svg or .png)."""
    from budgetdsl.report.figures import (
        new_figure,
        plain_log_labels,
        plain_number,
        save,
    )

    curve = frontier_curve(sol)
    use_flops = axes == "flops-wallclock"
    xs = curve.flops if use_flops else curve.tokens
    ys = [w / 86400 for w in curve.wall] if use_flops else curve.steps
    f = sol.assumptions["flops_per_token"].value

    fig, ax = new_figure()
    ax.plot(xs, ys, color="#9aa5b1", lw=1.5, label="frontier (all batch sizes)")
    lo, hi = feasible_batches(sol)
    arc = [(x, y) for x, y, b in zip(xs, ys, curve.batch) if lo <= b <= hi]
    if arc:
        ax.plot([p[0] for p in arc], [p[1] for p in arc], color="#2f9e44", lw=4, alpha=0.8,
                label="feasible arc")
    # B_crit: x = 1, where (S/S_min)(E/E_min) is smallest (2 × 2).
    i_crit = min(range(len(curve.batch)), key=lambda i: abs(math.log(curve.batch[i] / sol.frontier.b_crit_tokens)))
    ax.plot([xs[i_crit]], [ys[i_crit]], marker="D", color="#5f3dc4", ls="none", ms=7,
            label=f"B_crit = {_si(sol.frontier.b_crit_tokens)} tokens (x = 1)")
    limit_flops = next((c for c in sol.constraints if c.name == "flops"), None)
    if limit_flops is not None:
        x = limit_flops.limit if use_flops else limit_flops.limit / f
        ax.axvline(x, color="#e8590c", ls="--", lw=1.2, label="FLOP budget")
    deadline = next((c for c in sol.constraints if c.name == "deadline"), None)
    if deadline is not None and use_flops:
        ax.axhline(deadline.limit / 86400, color="#c92a2a", ls="--", lw=1.2, label="deadline")
    if sol.tokens is not None and sol.steps is not None:
        px = sol.flops if use_flops else sol.tokens
        py = (sol.wall_clock_s or 0) / 86400 if use_flops else sol.steps
        colour = "#1971c2" if sol.feasible else "#c92a2a"
        ax.plot([px], [py], marker="o", ms=10, color=colour, ls="none",
                label=f"this run: B = {_si(sol.batch.tokens or 0)} tokens, x = B/B_crit = {sol.frontier.x:.2g}")
    ax.set_xlabel("training compute (FLOP)" if use_flops else "tokens E")
    ax.set_ylabel("wall clock (days)" if use_flops else "optimizer steps S")
    ax.set_title(title(sol))
    ax.grid(True, which="major", alpha=0.3)
    if use_flops:
        plain_log_labels(ax.xaxis, plain_number)  # 4e22, 1e23
        plain_log_labels(ax.yaxis, plain_number)  # 7, 10, 20, 30 days, not 2 × 10¹
    else:
        plain_log_labels(ax.xaxis, _si)  # 500B, 1T, 2T tokens
        plain_log_labels(ax.yaxis, _si)  # 300k, 500k steps
    ax.legend(loc="best", fontsize=8, framealpha=0.9)
    save(fig, path)


def title(sol: Solution) -> str:
    """`plan: feasible (balanced)` for the objective's own choice; a run the plan pins (`run:`)
    says so, since no objective chose its batch: `plan: feasible (pinned run)`."""
    word = "feasible" if sol.feasible else "INFEASIBLE"
    pinned = sol.pinned is not None or sol.status == "pinned"
    return f"{sol.plan}: {word} ({'pinned run' if pinned else sol.objective})"


def _si(v: float) -> str:
    from budgetdsl.quantities.humanize import si

    return si(v)
