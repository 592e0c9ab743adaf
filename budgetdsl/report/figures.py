"""matplotlib set up for pictures that are committed next to plans and diffed in pull requests.

Both pictures (`frontier_plot`, `sweep_plot`) start and end here: the Agg backend (no display),
a fixed SVG hash salt and no date in the metadata, so the same input writes the same bytes.
matplotlib is the optional `plot` extra; it is imported only when a picture is drawn.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

# Tick mantissas tried in turn on a log axis, sparsest first: the densest set that gives at most
# `room` ticks in the shown range wins (a decade alone would leave a 3-day to 30-day axis bare).
_MANTISSAS = ((1.0,), (1.0, 3.0), (1.0, 2.0, 5.0), (1.0, 2.0, 3.0, 5.0, 7.0))


def new_figure() -> tuple[Any, Any]:
    """A figure and log-log axes of the size every report picture has."""
    fig, axes = new_panels(1)
    return fig, axes[0]


def new_panels(panels: int) -> tuple[Any, list[Any]]:
    """A figure of `panels` log-log axes side by side, each the size of one report picture."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams["svg.hashsalt"] = "budgetdsl"
    fig, axes = plt.subplots(1, panels, figsize=(7.5 * panels, 5.0), dpi=110, squeeze=False)
    for ax in axes[0]:
        ax.set_xscale("log")
        ax.set_yscale("log")
    return fig, list(axes[0])


def log_ticks(lo: float, hi: float, room: int = 8) -> list[float]:
    """Tick values within [lo, hi] on a log axis: decades, or 1-3, 1-2-5, 1-2-3-5-7 in each decade,
    the densest that stays within `room` ticks (at least two where the range allows)."""
    best: list[float] = []
    for mantissas in _MANTISSAS:
        out = [m * 10.0**k for k in range(math.floor(math.log10(lo)) - 1, math.ceil(math.log10(hi)) + 1)
               for m in mantissas if lo <= m * 10.0**k <= hi]
        if len(out) > room and len(best) >= 2:
            break
        best = out
    return best


def plain_log_labels(axis: Any, label: Callable[[float], str], room: int = 8) -> None:
    """Label a log `axis` (ax.xaxis or ax.yaxis) with plain numbers at `log_ticks` of its current
    range: `20`, `30` days or `500k`, `2M` tokens instead of matplotlib's `2 × 10¹`. Call it after
    everything is plotted (the range is read from the axis)."""
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullFormatter

    lo, hi = sorted(axis.get_view_interval())
    axis.set_major_locator(FixedLocator(log_ticks(lo, hi, room)))
    axis.set_major_formatter(FuncFormatter(lambda v, _pos: label(v)))
    axis.set_minor_formatter(NullFormatter())  # minor ticks stay, unlabelled


def plain_number(v: float) -> str:
    """0.5, 2, 30, 150 (a day count), 1e23 past six digits."""
    from budgetdsl.quantities.humanize import significant

    return significant(v)


def save(fig: Any, path: str) -> None:
    """Write `fig` to `path` (.svg or .png) reproducibly, and free it."""
    import io

    import matplotlib.pyplot as plt

    from budgetdsl.io.atomic_write import write_file

    fig.tight_layout()
    svg = str(path).endswith(".svg")
    buffer = io.BytesIO()
    fig.savefig(buffer, format="svg" if svg else "png", metadata={"Date": None} if svg else {"Software": None})
    plt.close(fig)
    write_file(path, buffer.getvalue())  # whole or not at all
