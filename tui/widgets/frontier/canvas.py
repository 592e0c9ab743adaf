"""Draw `PlotData` on a log-log character canvas: Rich text, no terminal, no clock (snapshot-stable).

Two marker sets: `braille` draws the curve with 2×4 dots per cell; `ascii` with plain characters
(fonts without braille, plain-text bug reports). Colour is never the only difference: with
`no_color` (NO_COLOR=1, where every colour becomes a grey) the feasible arc is a solid band `⣿`
instead of thin dots and the run's `●` is in reverse video, so curve, arc and run still read apart.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from budgetdsl.tui.widgets.frontier.curve import PlotData
from budgetdsl.tui.widgets.frontier.ticks import ticks
from rich.text import Text

MARKERS = ("braille", "ascii")

STYLES = {"curve": "cyan", "arc": "bold green", "run": "bold yellow", "run_bad": "bold red",
          "b_crit": "bold magenta", "front": "bold blue", "deadline": "red", "flops": "dark_orange",
          "measured": "bold bright_white", "forecast": "bold green", "forecast_bad": "bold red",
          "axis": "bright_black", "tick": "", "note": "italic bright_black"}
NO_COLOR_STYLES = {**STYLES, "curve": "", "arc": "bold", "run": "bold reverse", "run_bad": "bold reverse"}
_SOLID = "⣿"  # the feasible arc's braille cell when colour cannot tell it from the curve


@dataclass(frozen=True, slots=True)
class Glyphs:
    sub: tuple[int, int]  # sub-cells per cell (columns, rows)
    curve: str  # for ascii: the character of a curve cell
    arc: str
    run: str
    b_crit: str
    front: str
    measured: str
    forecast: str
    vline: str
    hline: str
    axis_v: str
    axis_h: str
    corner: str
    tick_v: str
    tick_h: str


GLYPHS = {
    "braille": Glyphs((2, 4), "", "", "●", "◆", "○", "•", "◎", "┊", "┄", "│", "─", "└", "┤", "┬"),
    "ascii": Glyphs((1, 1), ".", "o", "@", "X", "*", "+", "F", "|", "-", "|", "-", "+", "+", "+"),
}
_BRAILLE = ((0x01, 0x08), (0x02, 0x10), (0x04, 0x20), (0x40, 0x80))  # [row][col] dot bits


def _log(v: float) -> float:
    return math.log10(v)


def _range(values: list[float]) -> tuple[float, float]:
    lo, hi = _log(min(values)), _log(max(values))
    if hi - lo < 0.3:  # at least a factor of two
        mid = (hi + lo) / 2
        lo, hi = mid - 0.15, mid + 0.15
    pad = (hi - lo) * 0.04
    return lo - pad, hi + pad


def legend(data: PlotData, markers: str, width: int, no_color: bool = False) -> list[Text]:
    """The legend, packed into as few lines of `width` as it takes."""
    g = GLYPHS[markers]
    styles = NO_COLOR_STYLES if no_color else STYLES
    arc = (_SOLID * 2 if no_color else "━") if markers == "braille" else g.arc * 2
    parts = [(g.run, "run" if data.run_feasible else "run (infeasible)",
              styles["run"] if data.run_feasible else styles["run_bad"]),
             (arc, "feasible", styles["arc"]),
             (g.b_crit, "B_crit", STYLES["b_crit"])]
    if data.front:
        parts.append((g.front, "Pareto front", STYLES["front"]))
    if data.measured:
        parts.append((g.measured, "measured", STYLES["measured"]))
    if data.forecast is not None:
        parts.append((g.forecast, "forecast finish",
                      STYLES["forecast_bad"] if data.forecast_breaks else STYLES["forecast"]))
    if data.run is None:
        parts[0] = ("", "no launchable run", STYLES["run_bad"])
    if not any(data.feasible):
        parts[1] = ("", "no feasible batch", STYLES["run_bad"])
    if len(data.vlines) > 1:  # on the steps axis: the two batches where the wall clock reaches it
        parts.append((g.vline * 2, "deadline (met between)", STYLES["deadline"]))
    elif data.vlines:
        parts.append((g.vline, "deadline", STYLES["deadline"]))
    if data.hlines:
        parts.append((g.hline, "FLOP budget", STYLES["flops"]))
    lines = [Text()]
    for glyph, name, style in parts:
        item = Text.assemble((glyph, style), name)
        if lines[-1].cell_len and lines[-1].cell_len + 2 + item.cell_len > width:
            lines.append(Text())
        if lines[-1].cell_len:
            lines[-1].append("  ")
        lines[-1].append_text(item)
    return lines


def _fit_lines(lines, lo: float, hi: float, up: str, down: str) -> tuple[float, float, list, list[str]]:
    """The limit lines near the shown range (which widens to hold them) and a note for each far
    off it: a limit far off the curve is named, not drawn."""
    kept, off = [], []
    for line in lines:
        if lo - 1 <= _log(line.value) <= hi + 1:
            lo, hi = min(lo, _log(line.value) - 0.05), max(hi, _log(line.value) + 0.05)
            kept.append(line)
        else:
            off.append(f"{line.label} off the plot {up if _log(line.value) > hi else down}")
    return lo, hi, kept, off


class _Canvas:
    """The plot area: its log ranges, a grid of sub-cells (2×4 braille dots or whole cells) for the
    curve, and the glyphs drawn beneath it (limit lines) and above it (markers)."""

    def __init__(self, g: Glyphs, x: tuple[float, float], y: tuple[float, float], plot_w: int,
                 plot_h: int) -> None:
        self.g = g
        (self.x0, self.x1), (self.y0, self.y1) = x, y
        self.plot_w, self.plot_h = plot_w, plot_h
        self.sx, self.sy = g.sub
        self.cols, self.rows = plot_w * self.sx, plot_h * self.sy
        self.bits = [[0] * plot_w for _ in range(plot_h)]
        self.layer = [[0] * plot_w for _ in range(plot_h)]  # 1 curve, 2 feasible arc
        self.under: dict[tuple[int, int], tuple[str, str]] = {}  # limit lines, beneath the curve
        self.over: dict[tuple[int, int], tuple[str, str]] = {}  # markers, above it

    def col_of(self, x: float) -> float:
        return (_log(x) - self.x0) / (self.x1 - self.x0) * (self.cols - 1)

    def row_of(self, y: float) -> float:
        return (1.0 - (_log(y) - self.y0) / (self.y1 - self.y0)) * (self.rows - 1)

    def limit_lines(self, vlines, hlines, markers: str) -> None:
        g, under = self.g, self.under
        for line in vlines:
            c = round(self.col_of(line.value)) // self.sx
            if 0 <= c < self.plot_w:
                for r in range(self.plot_h):
                    under[(r, c)] = (g.vline, STYLES["deadline"])
        for line in hlines:
            r = round(self.row_of(line.value)) // self.sy
            if 0 <= r < self.plot_h:
                for c in range(self.plot_w):
                    under[(r, c)] = ("┼" if (r, c) in under and markers == "braille" else g.hline,
                                     STYLES["flops"])

    def dot(self, c: int, r: int, level: int) -> None:
        if 0 <= c < self.cols and 0 <= r < self.rows:
            sx, sy = self.sx, self.sy
            cell_r, cell_c = r // sy, c // sx
            if sx == 2:
                self.bits[cell_r][cell_c] |= _BRAILLE[r % sy][c % sx]
            else:
                self.bits[cell_r][cell_c] = 1
            self.layer[cell_r][cell_c] = max(self.layer[cell_r][cell_c], level)

    def curve(self, points, feasible) -> None:
        """The curve point to point, its feasible stretch at level 2."""
        cols, rows = self.cols, self.rows
        prev = None
        for (x, y), ok in zip(points, feasible):
            c, r = self.col_of(x), self.row_of(y)
            level = 2 if ok else 1
            if prev is not None:
                pc, pr = prev
                n = int(max(abs(c - pc), abs(r - pr))) + 1
                if n < 4 * (cols + rows):  # a segment leaving the canvas far off is not drawn
                    for i in range(1, n + 1):
                        self.dot(round(pc + (c - pc) * i / n), round(pr + (r - pr) * i / n), level)
            else:
                self.dot(round(c), round(r), level)
            prev = (c, r)

    def mark(self, x: float, y: float, glyph: str, style: str) -> None:
        c, r = round(self.col_of(x)) // self.sx, round(self.row_of(y)) // self.sy
        if 0 <= r < self.plot_h and 0 <= c < self.plot_w:
            self.over[(r, c)] = (glyph, style)

    def ylabels(self, ytick: list[tuple[float, str]]) -> dict[int, str]:
        """Y tick labels by row, none on a row next to a labelled one."""
        labels: dict[int, str] = {}
        for v, t in ytick:
            r = round(self.row_of(v)) // self.sy
            if 0 <= r < self.plot_h and r not in labels and r - 1 not in labels and r + 1 not in labels:
                labels[r] = t
        return labels

    def xlabels(self, x_axis: str) -> list[tuple[int, str]]:
        """X tick labels by column, each clear of the one before."""
        labels: list[tuple[int, str]] = []
        last_end = -2
        plot_w = self.plot_w
        for v, t in ticks(10 ** self.x0, 10 ** self.x1, x_axis, room=max(2, plot_w // 9)):
            c = round(self.col_of(v)) // self.sx
            start = max(0, min(plot_w - len(t), c - len(t) // 2))
            if 0 <= c < plot_w and start > last_end + 1:
                labels.append((c, t))
                last_end = start + len(t) - 1
        return labels

    def cell(self, r: int, c: int, styles: dict[str, str], no_color: bool) -> tuple[str, str]:
        """The character and style of one cell: a marker, else the curve, else a limit line."""
        if (r, c) in self.over:
            return self.over[(r, c)]
        level = self.layer[r][c]
        if level:
            g, sx = self.g, self.sx
            style = styles["arc"] if level == 2 else styles["curve"]
            ch = chr(0x2800 + self.bits[r][c]) if sx == 2 else (g.arc if level == 2 else g.curve)
            if no_color and sx == 2 and level == 2:
                ch = _SOLID
            return ch, style
        return self.under.get((r, c), (" ", ""))

    def append_rows(self, out: Text, ylabels: dict[int, str], label_w: int, styles: dict[str, str],
                    no_color: bool) -> None:
        """The plot area's rows, each behind its y label and axis."""
        g = self.g
        for r in range(self.plot_h):
            lab = ylabels.get(r, "")
            out.append(lab.rjust(label_w), STYLES["tick"])
            out.append(g.tick_v if lab else g.axis_v, STYLES["axis"])
            run: list[str] = []
            run_style = ""
            for c in range(self.plot_w):  # runs of one style: one span each, not one per cell
                ch, style = self.cell(r, c, styles, no_color)
                if style != run_style and run:
                    out.append("".join(run), run_style)
                    run = []
                run_style = style
                run.append(ch)
            out.append("".join(run), run_style)
            out.append("\n")


def render_plot(data: PlotData, width: int, height: int, markers: str = "braille",
                no_color: bool = False) -> Text:
    """The plot in `width` × `height` cells: y ticks, plot area, x axis, x labels, legend.
    `no_color`: told apart by glyph and weight alone (see the module's docstring)."""
    g = GLYPHS[markers]
    styles = NO_COLOR_STYLES if no_color else STYLES
    if width < 16 or height < 6:
        return Text("(too small for the plot)", style=STYLES["note"])

    xs = [p[0] for p in data.curve] + [data.b_crit[0]] + ([data.run[0]] if data.run else [])
    ys = [p[1] for p in data.curve] + [data.b_crit[1]] + ([data.run[1]] if data.run else [])
    xs += [p[0] for p in data.front]
    ys += [p[1] for p in data.front]
    if data.measured:  # the measured run's last decade of tokens widens the range; earlier points fall off it
        recent = [p for p in data.measured if p[1] >= data.measured[-1][1] / 10]
        xs += [p[0] for p in recent]
        ys += [p[1] for p in recent]
    if data.forecast is not None:
        xs.append(data.forecast[0])
        ys.append(data.forecast[1])
    x0, x1, vlines, off_x = _fit_lines(data.vlines, *_range(xs), "→", "←")
    y0, y1, hlines, off_y = _fit_lines(data.hlines, *_range(ys), "↑", "↓")

    foot = legend(data, markers, width, no_color)
    notes = [*data.notes, *off_x, *off_y]
    if notes:
        foot.append(Text("; ".join(notes), style=STYLES["note"]))
    foot = foot[: max(1, height - 6)]
    plot_h = height - 2 - len(foot)
    ytick = ticks(10 ** y0, 10 ** y1, data.y_axis, room=max(2, plot_h // 3))
    label_w = max((len(t) for _, t in ytick), default=1)
    plot_w = width - label_w - 1
    canvas = _Canvas(g, (x0, x1), (y0, y1), plot_w, plot_h)
    canvas.limit_lines(vlines, hlines, markers)
    canvas.curve(data.curve, data.feasible)
    for point in data.front:
        canvas.mark(*point, g.front, STYLES["front"])
    for point in data.measured:
        canvas.mark(*point, g.measured, STYLES["measured"])
    if data.forecast is not None:
        canvas.mark(*data.forecast, g.forecast, STYLES["forecast_bad"] if data.forecast_breaks else STYLES["forecast"])
    canvas.mark(*data.b_crit, g.b_crit, STYLES["b_crit"])
    if data.run is not None:
        canvas.mark(*data.run, g.run, styles["run"] if data.run_feasible else styles["run_bad"])
    ylabels = canvas.ylabels(ytick)
    xlabels = canvas.xlabels(data.x_axis)

    out = Text(no_wrap=True, overflow="crop")
    canvas.append_rows(out, ylabels, label_w, styles, no_color)
    tick_cols = {c for c, _ in xlabels}
    out.append(" " * label_w + g.corner, STYLES["axis"])
    out.append("".join(g.tick_h if c in tick_cols else g.axis_h for c in range(plot_w)), STYLES["axis"])
    out.append("\n")
    row = [" "] * plot_w
    for c, t in xlabels:
        start = max(0, min(plot_w - len(t), c - len(t) // 2))
        row[start:start + len(t)] = list(t)
    out.append(" " * (label_w + 1) + "".join(row), STYLES["tick"])
    for line in foot:
        out.append("\n")
        line.truncate(width, overflow="ellipsis")
        out.append_text(line)
    return out
