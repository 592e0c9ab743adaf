"""What the frontier plot shows, in plot units: sampled with budgetdsl's own frontier and cost model.

The curve is the critical-batch frontier S(B), E(B) of `budgetdsl.theory.frontier.Frontier` (built from
the solution's B_crit and E_min), against wall clock W(B) = S(B)·T(B) with the step time T(B) of
`budgetdsl.cost.cost_model` on the solution's GPU count, and against FLOPs f·E(B). The feasible arc is
the global batches every limit allows (each constraint's `allowed_batch`), the run's point is the
solution's launched configuration (integer steps), and B_crit is the point x = 1. A measured run
(`budgetdsl tui PLAN --run LOGS`, budgetdsl.track.trace) adds the steps or wall clock and the tokens
or FLOPs it had reached at each logged step, and on the wall-clock axis its forecast finish at the
planned tokens.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from budgetdsl.report.frontier_plot import feasible_batches  # the report's picture shades the same interval

if TYPE_CHECKING:
    from budgetdsl.plan.model import Plan
    from budgetdsl.solve.solution import Solution
    from budgetdsl.track.trace import RunTrace

X_AXES = ("steps", "wall")
Y_AXES = ("tokens", "flops")
AXIS_TITLES = {"steps": "steps", "wall": "wall clock", "tokens": "tokens", "flops": "FLOPs"}
_X_MIN, _X_MAX = 2.0 ** -6, 2.0 ** 6  # x = B/B_crit shown at least over this range
_X_LIMIT = 2.0 ** 14  # ... and at most over [1/_X_LIMIT, _X_LIMIT]


@dataclass(frozen=True, slots=True)
class Line:
    value: float
    label: str


@dataclass(frozen=True, slots=True)
class PlotData:
    x_axis: str
    y_axis: str
    curve: tuple[tuple[float, float], ...]  # (x, y) along increasing B
    feasible: tuple[bool, ...]  # per sample: inside every limit's interval of B
    run: tuple[float, float] | None
    run_feasible: bool
    b_crit: tuple[float, float]
    vlines: tuple[Line, ...]  # deadline
    hlines: tuple[Line, ...]  # FLOP budget
    notes: tuple[str, ...] = ()
    front: tuple[tuple[float, float], ...] = ()  # the Pareto front's other points (Solution.front)
    measured: tuple[tuple[float, float], ...] = ()  # a measured run's logged steps (RunTrace)
    forecast: tuple[float, float] | None = None  # its forecast finish (wall-clock axis)
    forecast_breaks: bool = False


def plot_data(plan: Plan, solution: Solution, x_axis: str = "steps", y_axis: str = "tokens",
              samples: int = 480, run: RunTrace | None = None) -> PlotData:
    from budgetdsl.theory.frontier import Frontier

    fr = Frontier(b_crit=solution.frontier.b_crit_tokens, e_min=solution.frontier.e_min_tokens)
    f_coef = solution.assumptions.get("flops_per_token")
    fpt = f_coef.value if f_coef is not None else 6.0 * plan.model.params
    notes: list[str] = []
    step_time = None
    if x_axis == "wall":
        from budgetdsl.cost.cost_model import build_cost_model

        try:
            from budgetdsl.cost.cost_model import Split

            b = solution.batch  # the launched layout (the plan's may be `auto`)
            split = Split(int(b.zero), int(b.tensor_parallel), int(b.pipeline_parallel), str(b.recompute),
                          plan.hardware.flash_attention) if b.zero is not None else None
            step_time = build_cost_model(plan, int(solution.gpus or 1), split).step_time
        except ValueError as exc:  # ShapeUnknown: the solver would have said so already
            notes.append(f"no step time: {exc}")
            x_axis = "steps"

    def xy(batch: float) -> tuple[float, float]:
        steps = fr.steps(batch)
        x = steps * step_time(batch) if step_time is not None else steps
        y = fr.examples(batch) * (fpt if y_axis == "flops" else 1.0)
        return x, y

    arc = feasible_batches(solution)
    lo_x, hi_x = _X_MIN, _X_MAX
    marks = [solution.frontier.x] if solution.frontier.x else []
    if arc is not None:
        marks += [fr.x(b) for b in arc if 0 < b < math.inf]
    for m in marks:
        lo_x, hi_x = min(lo_x, m / 2), max(hi_x, m * 2)
    lo_x, hi_x = max(lo_x, 1 / _X_LIMIT), min(hi_x, _X_LIMIT)
    batches = [fr.b_crit * lo_x * (hi_x / lo_x) ** (i / (samples - 1)) for i in range(samples)]
    curve = tuple(xy(b) for b in batches)
    feasible = tuple(arc is not None and arc[0] * (1 - 1e-9) <= b <= arc[1] * (1 + 1e-9) for b in batches)

    point = None
    if solution.steps is not None and solution.tokens is not None:
        rx = float(solution.wall_clock_s if x_axis == "wall" else solution.steps)
        ry = float(solution.flops if y_axis == "flops" else solution.tokens)
        point = (rx, ry)

    # The front's points besides the launched one, from their own wall clock and FLOPs (tokens =
    # FLOPs / flops_per_token, steps = tokens / batch: the units the curve is drawn in). On the wall
    # clock axis a point on another GPU count lies off this count's curve.
    front = []
    for p in solution.front:
        if not p.chosen:
            tokens = p.flops / fpt
            front.append((p.wall_clock_s if x_axis == "wall" else tokens / p.batch_tokens,
                          p.flops if y_axis == "flops" else tokens))

    vlines: list[Line] = []
    hlines: list[Line] = []
    deadline = plan.budget.deadline
    if deadline is not None:
        if x_axis == "wall":
            vlines.append(Line(deadline, "deadline"))
        else:  # the frontier's own steps where the wall clock reaches the deadline
            c = solution.constraint("deadline")
            if c is not None and c.allowed_batch is not None:
                for b in c.allowed_batch:
                    if b is not None and 0 < b < math.inf:
                        vlines.append(Line(fr.steps(b), "deadline"))
            elif c is not None:
                notes.append(f"the deadline is out of reach on {solution.gpus} GPUs")
    if plan.budget.flops is not None:
        hlines.append(Line(plan.budget.flops / (1.0 if y_axis == "flops" else fpt), "FLOP budget"))
    measured: tuple[tuple[float, float], ...] = ()
    forecast = None
    if run is not None:
        scale = fpt if y_axis == "flops" else 1.0
        measured = tuple((w if x_axis == "wall" else s, e * scale) for s, e, w in run.points
                         if x_axis != "wall" or w is not None and w > 0)
        if x_axis == "wall" and run.forecast_wall_s and run.tokens_planned:
            forecast = (run.forecast_wall_s, run.tokens_planned * scale)
        notes.append(run.summary)
    return PlotData(x_axis, y_axis, curve, feasible, point, solution.feasible, xy(fr.b_crit),
                    tuple(vlines), tuple(hlines), tuple(notes), tuple(front), measured, forecast,
                    run is not None and run.breaks)
