"""matplotlib set up for pictures that are committed next to plans and diffed in pull requests.

Both pictures (`frontier_plot`, `sweep_plot`) start and end here: the Agg backend (no display),
a fixed SVG hash salt and no date in the metadata, so the same input writes the same bytes.
matplotlib is the optional `plot` extra; it is imported only when a picture is drawn.
"""

from __future__ import annotations

import math
from typing import Any, Callable

# Tick mantissas tried in turn on a log axis, sparsest first: the densest set that gives at most
# `room` ticks in the shown range wins (a decade alone would leave a 3-day to 30-day axis bare).
_MANTISSAS = ((1.0,), (1.0, 3.0), (1.0, 2.0, 5.0), (1.0, 2.0, 3.0, 5.0, 7.0))


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
    from budgetdsl.humanize import significant

    return significant(v)


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


# The pictures under docs/ and what draws each; `python -m budgetdsl.figures` redraws them all
# (run from the repository root; the TUI screenshot needs the `tui` extra).
DOCS_PICTURES = {
    "docs/frontier-7b-h100.svg": "budgetdsl plan plans/7b-h100-choose-gpus.yaml --plot docs/frontier-7b-h100.svg",
    "docs/sweep-gpt-micro.svg": "the sweep of tests/fixtures/calibration/sweep-gpt-micro-stdlib.json "
                                "(budgetdsl calibrate sweep --plot draws the same from a new sweep)",
    "docs/tui.svg": "budgetdsl tui plans/llama2-7b.yaml at 120×36, exported by Textual, cell-aligned",
}
TUI_SIZE = (120, 36)
_PIECE = 16  # cells per <text> at most: a font whose advance is 1.5 % off the cell drifts < 0.25 cell
# Braille (the plot's curve) is missing from common monospace fonts (DejaVu Sans Mono): cairosvg
# takes only the first family and has no fallback, so braille cells name a font that has it, one
# cell per <text> since that font is proportional.
_BRAILLE_FONTS = "DejaVu Sans, Segoe UI Symbol, monospace"


def _braille(ch: str) -> bool:
    return 0x2800 <= ord(ch) <= 0x28FF


def cell_aligned_svg(svg: str) -> str:
    """A terminal screenshot (Rich/Textual's SVG export) that every renderer lays out on the grid.

    The export writes each run of one style as one <text> of many cells, stretched to its width by
    `textLength`, in Fira Code. Renderers that ignore `textLength` (cairosvg) or lack the font
    (rsvg, cairosvg without Fira Code installed: a proportional fallback) drift along a run, so axis
    labels slid off their ticks; and rsvg drops a run's leading spaces, which ran words together.
    Here each run is cut at its spaces and into pieces of at most `_PIECE` cells, each its own
    <text> at its own cell's x, and the font is the generic `monospace` first (cairosvg uses only
    the first family it is given), so the error stays within a piece; braille cells get a font
    that has braille (`_BRAILLE_FONTS`)."""
    import html
    import re

    from rich.cells import cell_len

    text_re = re.compile(r'<text class="([^"]+)" x="([\d.]+)" y="([\d.]+)" textLength="([\d.]+)" '
                         r'clip-path="([^"]+)">([^<]*)</text>')
    from collections import Counter

    widths = Counter(round(float(m.group(4)) / cell_len(html.unescape(m.group(6))), 4)
                     for m in text_re.finditer(svg) if cell_len(html.unescape(m.group(6))))
    if not widths:
        return svg
    cell = widths.most_common(1)[0][0]  # 12.2 for the export's 20px font

    def split(m: re.Match) -> str:
        cls, x, y, _length, clip, body = m.groups()
        chars = html.unescape(body)
        out, col, piece, start = [], 0, "", 0

        def flush() -> None:
            if piece:
                font = f' font-family="{_BRAILLE_FONTS}"' if _braille(piece[0]) else ""
                out.append(f'<text class="{cls}" x="{float(x) + start * cell:.4g}" y="{y}" '
                           f'textLength="{cell_len(piece) * cell:.4g}" clip-path="{clip}"{font}>'
                           f'{html.escape(piece, quote=False)}</text>')

        for ch in chars:
            if ch.isspace():
                flush()
                piece = ""
            else:
                if not piece or cell_len(piece) >= _PIECE or _braille(ch) or _braille(piece[0]):
                    flush()
                    piece, start = "", col
                piece += ch
            col += cell_len(ch)
        flush()
        return "".join(out)

    svg = text_re.sub(split, svg)
    return svg.replace("font-family: Fira Code, monospace;", 'font-family: monospace, "Fira Code";')


def tui_screenshot(plan: str, path: str, size: tuple[int, int] = TUI_SIZE) -> None:
    """Write the TUI on `plan` as it first appears, `size` (columns, rows), as a cell-aligned SVG."""
    import asyncio
    import os

    from budgetdsl.atomic_write import write_file
    from budgetdsl.tui.app import make_app

    async def shoot() -> str:
        app = make_app(plan, keymap={})
        async with app.run_test(size=size) as pilot:
            await app.wait_solved()  # the first solve runs in the app's worker
            await pilot.pause()
            return app.export_screenshot(title=f"budgetdsl tui {os.path.relpath(plan)}")

    write_file(path, cell_aligned_svg(asyncio.run(shoot())).encode())


def redraw_docs(root: str = ".") -> list[str]:
    """Redraw every picture of DOCS_PICTURES from the committed inputs; the paths written."""
    import os

    from budgetdsl import frontier_plot, sweep_plot
    from budgetdsl.calibration_file import load_calibration
    from budgetdsl.plan_loader import load_plan
    from budgetdsl.solver import solve

    def at(rel: str) -> str:
        return os.path.join(root, rel)

    frontier_plot.draw(solve(load_plan(at("plans/7b-h100-choose-gpus.yaml"))), at("docs/frontier-7b-h100.svg"))
    cal = load_calibration(at("tests/fixtures/calibration/sweep-gpt-micro-stdlib.json"))
    sweep_plot.draw(cal.sweep, at("docs/sweep-gpt-micro.svg"))
    tui_screenshot(at("plans/llama2-7b.yaml"), at("docs/tui.svg"))
    return list(DOCS_PICTURES)


if __name__ == "__main__":
    for written in redraw_docs():
        print(f"drew {written}")
