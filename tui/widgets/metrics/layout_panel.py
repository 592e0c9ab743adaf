"""The launched layout, the runner-up layouts and the Pareto front, read from the Solution.

Nothing here is computed: the chosen layout, each runner-up's costs and objective measure over the
winner's (or `dominated`), the reason the winner won, and the front's points are the solver's own
fields (`Solution.layout`, `.front`, `.batch`, `.throughput`), formatted as `budgetdsl plan` does.
"""

from __future__ import annotations

import textwrap

from budgetdsl.tui.widgets.text_panel import TextPanel
from rich.text import Text

from budgetdsl.quantities.humanize import human, si, significant
from budgetdsl.solve.objectives import OBJECTIVES
from budgetdsl.solve.solution import Solution, recompute_label

# The plan keys the search may own, as the panel names them.
_KEY_NAMES = {"tensor_parallel": "TP", "pipeline_parallel": "PP", "zero": "ZeRO", "recompute": "recompute",
              "micro_batch": "micro-batch", "gpus": "GPUs"}
_CHOSEN, _FRONT = "●", "○"  # the plot's run marker, and the front's


def short_layout(tp: int, pp: int, zero: int | None, recompute: str | None, recompute_layers: int | None = None) -> str:
    """`TP2 PP4 Z1 sel`: a layout in a table cell (`full/4`: block recomputation of 4 layers per stage)."""
    rc = {"none": "", "selective": " sel", "full": " full"}.get(str(recompute), f" {recompute}")
    if recompute == "full" and recompute_layers is not None:
        rc += f"/{recompute_layers}"
    return f"TP{tp} PP{pp}" + ("" if zero is None else f" Z{zero}") + rc


def _table(header: tuple[str, ...], rows: list[tuple[str, ...]], width: int, optional: tuple[int, ...],
           right: set[int], styles: list[str]) -> list[Text] | None:
    """Columns padded to their widest cell; the `optional` ones dropped (in that order) until the
    table fits `width`. None when it does not fit even then (the caller stacks each row on two
    lines)."""
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    show = list(range(len(header)))
    for i in optional:
        if sum(widths[j] for j in show) + len(show) - 1 <= width:
            break
        show.remove(i)
    if sum(widths[j] for j in show) + len(show) - 1 > width:
        return None

    def line(cells: tuple[str, ...], style: str = "") -> Text:
        text = Text(style=style)
        for n, i in enumerate(show):
            if n:
                text.append(" ")
            text.append(cells[i].rjust(widths[i]) if i in right else cells[i].ljust(widths[i]))
        text.rstrip()
        text.truncate(width, overflow="ellipsis")
        return text

    return [line(header, "bright_black"), *(line(r, styles[k]) for k, r in enumerate(rows))]


def _stacked(first: str, second: str, width: int, style: str) -> list[Text]:
    """One row of a table too wide for `width`, on two lines."""
    out = [Text(first, style=style), Text("  " + second)]
    for line in out:
        line.truncate(width, overflow="ellipsis")
    return out


def _wrapped(text: str, width: int, style: str = "") -> list[Text]:
    return [Text(line, style=style) for line in textwrap.wrap(text, max(10, width))]


def _packed(parts: list[str], width: int, style: str = "") -> list[Text]:
    """`a · b · c` packed into lines of `width`, breaking only between parts."""
    lines: list[str] = []
    for part in parts:
        if lines and len(lines[-1]) + 3 + len(part) <= width:
            lines[-1] += " · " + part
        else:
            lines.append(part)
    out = [Text(line, style=style) for line in lines]
    for line in out:
        line.truncate(width, overflow="ellipsis")
    return out


def objectives_text(objectives: list[str]) -> str:
    """The objectives landing on a point: `balanced min_time`, `every objective`, or `—`."""
    if objectives and set(objectives) >= set(OBJECTIVES):
        return "every objective"
    return " ".join(objectives) or "—"


def chosen_lines(sol: Solution, width: int) -> list[Text]:
    """The launched layout: TP · PP · ZeRO · recompute, micro-batch, GPUs, step time; searched or pinned."""
    b, ls = sol.batch, sol.layout
    if b.tokens is None or b.micro_batch is None:
        return _wrapped("no feasible layout" if ls is not None else "no feasible configuration", width, "bold red")
    step = sol.throughput.step_time_s if sol.throughput is not None else (
        ls.chosen.step_time_s if ls is not None and ls.chosen is not None else None)
    out = _packed([f"TP {b.tensor_parallel}", f"PP {b.pipeline_parallel}", f"ZeRO {b.zero}",
                   f"recompute {recompute_label(b.recompute, b.recompute_layers, b.virtual_pipeline_stages)}"],
                  width, "bold")
    out += _packed([f"{sol.gpus or 0:,} GPUs", f"micro-batch {b.micro_batch}"]
                   + ([f"step {human('s', step)}"] if step is not None else []), width)
    if ls is not None:
        searched = ", ".join(_KEY_NAMES.get(k, k) for k in ls.searched)
        out += _wrapped(f"searched: {searched} ({ls.feasible} feasible layouts of {ls.considered} "
                        f"layout × GPU-count pairs)", width, "bright_black")
    else:
        out += _wrapped("layout from the plan: no key searched", width, "bright_black")
    return out


def runner_up_lines(sol: Solution, width: int) -> list[Text]:
    """The chosen layout and its runners-up: wall clock, GPU-hours, FLOPs, vs the winner; the reason."""
    ls = sol.layout
    if ls is None:
        return []
    options = ([(ls.chosen, "chosen")] if ls.chosen is not None else []) + [(r, "") for r in ls.runners_up]
    rows, styles, out = [], [], []
    for o, tag in options:
        vs = tag or ("dominated" if o.dominated else
                     "—" if o.objective_ratio is None else f"{significant(o.objective_ratio)}× the winner's")
        rows.append((short_layout(o.tensor_parallel, o.pipeline_parallel, o.zero, o.recompute, o.recompute_layers),
                     human("s", o.wall_clock_s), si(o.gpu_hours), human("FLOP", o.flops).removesuffix(" FLOP"),
                     vs.removesuffix(" the winner's"), str(o.micro_batch), f"{o.gpus:,}"))
        styles.append("bold" if tag else "")
    table = _table(("layout", "wall", "GPU-h", "FLOPs", "vs winner", "micro", "GPUs"), rows, width,
                   optional=(6, 5), right={1, 2, 3, 5, 6}, styles=styles) if rows else []
    if table is None:  # narrow: each layout on two lines
        table = []
        for (o, tag), style in zip(options, styles):
            vs = tag or ("dominated" if o.dominated else
                         "—" if o.objective_ratio is None else f"{significant(o.objective_ratio)}× the winner's")
            shown = short_layout(o.tensor_parallel, o.pipeline_parallel, o.zero, o.recompute, o.recompute_layers)
            table += _stacked(f"{shown}"
                              f" · {vs}",
                              f"{human('s', o.wall_clock_s)} · {human('GPU-h', o.gpu_hours)} · "
                              f"{human('FLOP', o.flops)} · mb {o.micro_batch} · {o.gpus:,} GPUs", width, style)
    out += table
    out += _wrapped(ls.reason, width, "bright_black")
    return out


def front_lines(sol: Solution, width: int) -> list[Text]:
    """The Pareto front over (wall clock, cost, FLOPs): each point and the objectives landing on it."""
    if not sol.front:
        return []
    usd = any(p.usd is not None for p in sol.front)
    rows, styles = [], []
    for p in sol.front:
        rows.append((_CHOSEN if p.chosen else _FRONT, human("tokens", p.batch_tokens).removesuffix(" tokens"),
                     significant(p.x), f"{p.gpus:,}", human("s", p.wall_clock_s),
                     si(p.gpu_hours) + (f" {human('USD', p.usd)}" if p.usd is not None else ""),
                     human("FLOP", p.flops).removesuffix(" FLOP"), objectives_text(p.objectives),
                     short_layout(p.tensor_parallel, p.pipeline_parallel, p.zero, p.recompute, p.recompute_layers)))
        styles.append("bold" if p.chosen else "")
    title = Text.assemble(("Pareto front", "bold"), (" over wall clock, cost, FLOPs", "bright_black"))
    title.truncate(width, overflow="ellipsis")
    header = ("", "batch", "x", "GPUs", "wall", "GPU-h $" if usd else "GPU-h", "FLOPs", "objectives", "layout")
    table = _table(header, rows, width, optional=(8, 2), right={1, 2, 3, 4, 5, 6}, styles=styles)
    if table is None:  # narrow: each point on two lines
        table = []
        for p, r, style in zip(sol.front, rows, styles):
            table += _stacked(f"{r[0]} {human('tokens', p.batch_tokens)} · x {r[2]} · {r[3]} GPUs · {r[7]}",
                              f"{r[4]} · {human('GPU-h', p.gpu_hours)}"
                              + (f" · {human('USD', p.usd)}" if p.usd is not None else "")
                              + f" · {human('FLOP', p.flops)} · {r[8]}", width, style)
    return [title, *table]


class LayoutPanel(TextPanel):
    PLACEHOLDER = "solving…"

    def lines(self, sol: Solution, width: int) -> list[Text]:
        out = chosen_lines(sol, width)
        out += runner_up_lines(sol, width)
        out += front_lines(sol, width)
        return out
