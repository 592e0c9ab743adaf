"""The frontier sweep as a picture: measured (E, S) points, the fitted hyperbola, B_crit marked.

`render_text(sweep)`: deterministic plain text for `budgetdsl calibrate sweep`; `draw(sweep, path)`:
PNG or SVG through matplotlib (the optional `plot` extra, imported only when called).
The frontier (S/S_min − 1)(E/E_min − 1) = 1 (McCandlish et al. 2018, eq. 2.12) is a hyperbola with
asymptotes S = S_min and E = E_min; B_crit = E_min/S_min is its knee (2·E_min, 2·S_min).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from budgetdsl.quantities.humanize import si

if TYPE_CHECKING:
    from budgetdsl.plan.calibration_file import Sweep


def hyperbola(s_min: float, e_min: float, lo: float, hi: float, points: int = 200) -> list[tuple[float, float, float]]:
    """(B, E, S) along the frontier for batches lo..hi (geometric): S = S_min + E_min/B,
    E = B·S (McCandlish et al. 2018, eq. 2.11)."""
    out = []
    for i in range(points):
        b = lo * (hi / lo) ** (i / (points - 1))
        s = s_min + e_min / b
        out.append((b, b * s, s))
    return out


def _points(sweep: Sweep) -> tuple[list[tuple[float, float, int]], list[tuple[float, float, int]]]:
    """Reached (E tokens, S, batch) and not reached (E, S so far, batch) of the best runs."""
    tpe = sweep.tokens_per_example
    reached: list[tuple[float, float, int]] = []
    missed: list[tuple[float, float, int]] = []
    for r in sweep.best_runs():
        if r.reached and r.steps_to_target is not None:
            reached.append((r.steps_to_target * r.batch_tokens, r.steps_to_target, r.batch_examples))
        elif r.steps_run > 0:
            missed.append((r.steps_run * r.batch_examples * tpe, float(r.steps_run), r.batch_examples))
    return reached, missed


def _curve(sweep: Sweep) -> list[tuple[float, float, float]]:
    f = sweep.fit
    if f is None:
        return []
    b = [x * sweep.tokens_per_example for x in sweep.batches]
    lo = min(min(b), f.b_crit_tokens) / 4
    hi = max(max(b), f.b_crit_tokens) * 4
    return hyperbola(f.s_min, f.e_min_tokens, lo, hi)


def render_text(sweep: Sweep, width: int = 64, height: int = 18) -> str:
    """Log-log character plot: `o` measured runs, `>` runs stopped before the target, `.` the fitted
    frontier, `X` its knee at B_crit, `-` the asymptote S_min and `|` the asymptote E_min."""
    reached, missed = _points(sweep)
    curve = _curve(sweep)
    f = sweep.fit
    xs = [p[0] for p in reached + missed]
    ys = [p[1] for p in reached + missed]
    if f is not None:
        xs += [f.e_min_tokens, 2 * f.e_min_tokens]
        ys += [f.s_min, 2 * f.s_min]
    if not xs:
        return "(no run to plot)\n"
    x_lo, x_hi = math.log10(min(xs) / 1.6), math.log10(max(xs) * 1.6)
    y_lo, y_hi = math.log10(min(ys) / 1.6), math.log10(max(ys) * 1.6)

    def col(x: float) -> int | None:
        c = round((math.log10(x) - x_lo) / (x_hi - x_lo) * (width - 1))
        return c if 0 <= c < width else None

    def row(y: float) -> int | None:
        r = round((y_hi - math.log10(y)) / (y_hi - y_lo) * (height - 1))
        return r if 0 <= r < height else None

    grid = [[" "] * width for _ in range(height)]

    def put(x: float, y: float, ch: str) -> None:
        c, r = col(x), row(y)
        if c is not None and r is not None:
            grid[r][c] = ch

    if f is not None:
        r_s = row(f.s_min)
        if r_s is not None:
            for c in range(width):
                grid[r_s][c] = "-"
        c_e = col(f.e_min_tokens)
        if c_e is not None:
            for r in range(height):
                grid[r][c_e] = "|"
        # the hyperbola, sampled finely so that it is a connected line of dots
        for _b, e, s in curve:
            put(e, s, ".")
        put(2 * f.e_min_tokens, 2 * f.s_min, "X")
    for e, s, _b in missed:
        put(e, s, ">")
    for e, s, _b in reached:
        put(e, s, "o")

    y_top, y_bottom = si(10**y_hi), si(10**y_lo)
    pad = max(len(y_top), len(y_bottom), len("steps"))
    lines = [f"{'steps':>{pad}} ^"]
    for i, cells in enumerate(grid):
        label = y_top if i == 0 else (y_bottom if i == height - 1 else "")
        lines.append(f"{label:>{pad}} |" + "".join(cells).rstrip())
    lines.append(" " * pad + " +" + "-" * width + ">")
    left, right = si(10**x_lo), si(10**x_hi)
    lines.append(" " * (pad + 2) + left + " " * max(1, width - len(left) - len(right)) + right)
    lines.append(" " * (pad + 2) + "tokens to the target (log)".center(width).rstrip())
    legend = "o run (batch, steps to target)   > stopped before the target"
    if f is not None:
        legend += (f"\n. fit S = S_min + E_min/B   X B_crit = {si(f.b_crit_tokens)} tokens "
                   f"({f.b_crit_examples:.3g} sequences)   - S_min = {si(f.s_min)} steps   "
                   f"| E_min = {si(f.e_min_tokens)} tokens")
    return "\n".join(lines) + "\n" + legend + "\n"


def draw(sweep: Sweep, path: str, title: str | None = None) -> None:
    """Write the picture to `path` (.svg or .png)."""
    from budgetdsl.report.figures import new_figure, plain_log_labels, save

    reached, missed = _points(sweep)
    f = sweep.fit
    fig, ax = new_figure()
    if f is not None:
        curve = _curve(sweep)
        ax.plot([c[1] for c in curve], [c[2] for c in curve], color="#9aa5b1", lw=1.5,
                label=f"fit S = S_min + E_min/B (±{f.b_crit_rel_se:.0%} on B_crit)")
        ax.axhline(f.s_min, color="#adb5bd", ls=":", lw=1, label=f"S_min = {si(f.s_min)} steps")
        ax.axvline(f.e_min_tokens, color="#adb5bd", ls="--", lw=1, label=f"E_min = {si(f.e_min_tokens)} tokens")
        ax.plot([2 * f.e_min_tokens], [2 * f.s_min], marker="D", ms=8, color="#5f3dc4", ls="none",
                label=f"B_crit = {si(f.b_crit_tokens)} tokens ({f.b_crit_examples:.3g} sequences)")
    if reached:
        ax.plot([p[0] for p in reached], [p[1] for p in reached], marker="o", ms=7, ls="none",
                color="#1971c2", label="runs: steps and tokens to the target loss")
        for e, s, b in reached:
            ax.annotate(f"B={b}", (e, s), textcoords="offset points", xytext=(6, 4), fontsize=7)
    if missed:
        ax.plot([p[0] for p in missed], [p[1] for p in missed], marker=">", ms=7, ls="none",
                color="#c92a2a", label="stopped before the target")
    cmp = sweep.comparison
    ratio = (f", B_crit / B_simple = {cmp.ratio:.2g}" if cmp is not None and cmp.ratio is not None else "")
    ax.set_xlabel("tokens to the target, E")
    ax.set_ylabel("optimizer steps to the target, S")
    ax.set_title(title or f"frontier sweep to held-out loss {sweep.target_loss:.3f}{ratio}", fontsize=10)
    ax.grid(True, which="major", alpha=0.3)
    plain_log_labels(ax.xaxis, si)  # 20M, 50M tokens, not 2 × 10⁷
    plain_log_labels(ax.yaxis, si)
    ax.legend(loc="upper right", fontsize=8, framealpha=0.9)
    save(fig, path)
