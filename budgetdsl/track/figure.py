"""The picture of a tracked run (`budgetdsl track --plot`): tokens over the hours since the start,
as logged, as planned, and as forecast with its interval, against the deadline.

Drawn with the report's matplotlib setup (budgetdsl.report.figures: Agg, no date, fixed hash), so
the same logs give the same bytes. At most MAX_POINTS logged points are drawn (evenly thinned), so
a 10⁶-step run makes a picture of ordinary size.
"""

from __future__ import annotations

import numpy as np

from budgetdsl.report.figures import new_figure, save
from budgetdsl.track.forecast import Track
from budgetdsl.track.run import Timeline

MAX_POINTS = 2000


def draw(track: Track, line: Timeline, path: str) -> None:
    """Write the picture of `track` (whose run is `line`) to `path` (.svg or .png)."""
    fig, ax = new_figure()
    ax.set_xscale("linear")
    ax.set_yscale("linear")
    start = track.start or 0.0
    tokens = line.columns.get("tokens")
    if tokens is None and track.batch_planned:
        values = np.frombuffer(line.steps, dtype=np.int64) * track.batch_planned
    else:
        values = np.frombuffer(tokens, dtype=np.float64) if tokens is not None else np.empty(0)
    times = np.frombuffer(line.times, dtype=np.float64)
    if len(values) and track.start is not None:
        keep = np.unique(np.linspace(0, len(values) - 1, min(MAX_POINTS, len(values))).astype(int))
        ax.plot((times[keep] - start) / 3600, values[keep], color="C0", label="logged")
    if track.tokens_per_s_planned and track.tokens_planned:
        hours = track.tokens_planned / track.tokens_per_s_planned / 3600
        ax.plot([0, hours], [0, track.tokens_planned], color="C2", linestyle="--", label="plan")
    if track.finish and track.last is not None and track.tokens_planned:
        last = (track.last - start) / 3600
        ends = [(f - start) / 3600 for f in (track.finish.low, track.finish.value, track.finish.high)]
        ax.plot([last, ends[1]], [track.tokens_done, track.tokens_planned], color="C1", label="forecast")
        ax.fill([last, ends[0], ends[2]], [track.tokens_done, track.tokens_planned, track.tokens_planned],
                color="C1", alpha=0.2, linewidth=0, label="forecast interval")
    for limit in track.limits:
        if limit.name == "deadline":
            ax.axvline(limit.limit / 3600, color="C3", linestyle=":", label="deadline")
    ax.set_xlabel("hours since the start")
    ax.set_ylabel("tokens")
    ax.set_title(f"{track.plan}: {track.reason}", fontsize=9)
    ax.legend(loc="upper left", fontsize=8)
    save(fig, path)
