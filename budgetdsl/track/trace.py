"""The measured run as a picture draws it beside its plan (`budgetdsl tui PLAN --run LOGS`): the
steps, tokens and wall clock it had reached at each logged step, and the forecast finish.

Points are thinned to at most MAX_POINTS, evenly in log steps (the frontier plot is log-log), the
last logged step always kept. The wall clock of a point is its time since the run's start, downtime
included, as the deadline counts it (budgetdsl.track.forecast: the start is the first record's time
less its steps at the median pace).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from budgetdsl.quantities.humanize import duration
from budgetdsl.solve.solution import Solution
from budgetdsl.track.forecast import Track, tokens_of
from budgetdsl.track.run import Timeline

MAX_POINTS = 256


@dataclass(frozen=True, slots=True)
class RunTrace:
    """What a plot shows of a measured run; `points` are (steps, tokens, wall clock s), the wall
    clock None where the logs carry no time."""

    points: tuple[tuple[float, float, float | None], ...]
    forecast_wall_s: float | None  # the forecast wall clock of the whole run, when there is one
    tokens_planned: float | None
    breaks: bool  # a limit is forecast to break
    summary: str  # one line: how far the run is and what the forecast says


def trace_of(line: Timeline, track: Track, solution: Solution, seq_len: int | None) -> RunTrace:
    steps = np.frombuffer(line.steps, dtype=np.int64).astype(float)
    tokens, _ = tokens_of(line, solution, seq_len)
    times = np.frombuffer(line.times, dtype=np.float64)
    keep = np.flatnonzero((steps > 0) & ~np.isnan(tokens) & (tokens > 0))
    if len(keep) > MAX_POINTS:  # evenly in log steps, the last step always
        marks = np.unique(np.searchsorted(np.log(steps[keep]), np.linspace(
            math.log(steps[keep[0]]), math.log(steps[keep[-1]]), MAX_POINTS)))
        keep = np.unique(np.append(keep[np.minimum(marks, len(keep) - 1)], keep[-1]))
    start = track.start
    points = tuple((float(steps[i]), float(tokens[i]),
                    float(times[i] - start) if start is not None and not math.isnan(times[i]) else None)
                   for i in keep)
    planned = f" of {track.steps_planned:,}" if track.steps_planned else ""
    if track.wall_clock_s is not None:
        w = track.wall_clock_s
        forecast = f"forecast {duration(w.value)} ({duration(w.low)}–{duration(w.high)})"
        if track.breaks:
            forecast += ", breaks " + ", ".join(limit.name for limit in track.limits if limit.breaks)
    else:
        forecast = track.reason or track.status
    summary = f"measured: step {track.steps_done:,}{planned}; {forecast}"
    return RunTrace(points, track.wall_clock_s.value if track.wall_clock_s else None, track.tokens_planned,
                    track.breaks, summary)
