"""matplotlib set up for pictures that are committed next to plans and diffed in pull requests.

Both pictures (`frontier_plot`, `sweep_plot`) start and end here: the Agg backend (no display),
a fixed SVG hash salt and no date in the metadata, so the same input writes the same bytes.
matplotlib is the optional `plot` extra; it is imported only when a picture is drawn.
"""

from __future__ import annotations

from typing import Any


def new_figure() -> tuple[Any, Any]:
    """A figure and log-log axes of the size every report picture has."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams["svg.hashsalt"] = "budgetdsl"
    fig, ax = plt.subplots(figsize=(7.5, 5.0), dpi=110)
    ax.set_xscale("log")
    ax.set_yscale("log")
    return fig, ax


def save(fig: Any, path: str) -> None:
    """Write `fig` to `path` (.svg or .png) reproducibly, and free it."""
    import io

    import matplotlib.pyplot as plt

    from budgetdsl.atomic_write import write_file

    fig.tight_layout()
    svg = str(path).endswith(".svg")
    buffer = io.BytesIO()
    fig.savefig(buffer, format="svg" if svg else "png", metadata={"Date": None} if svg else {"Software": None})
    plt.close(fig)
    write_file(path, buffer.getvalue())  # whole or not at all
