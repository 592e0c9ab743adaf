"""Each limit's use and slack; when infeasible, the conflicts and the smallest relaxations."""

from __future__ import annotations

import textwrap

from budgetdsl.tui.widgets.text_panel import TextPanel
from rich.text import Text

from budgetdsl.quantities.humanize import data, human
from budgetdsl.report.text import limit_state, limit_use
from budgetdsl.solve.solution import Constraint, Solution

_STATE_STYLE = {"over": "bold red", "under": "bold red", "binds": "yellow", "caps batch": "yellow",
                "caps micro-batch": "yellow", "ok": "green"}


def state_of(c: Constraint) -> str:
    """binds (on the limit), caps batch / caps micro-batch (decided the run with slack left), ok,
    over (a ≤ limit exceeded) or under (a ≥ limit not reached); — without a run. The words are
    budgetdsl.report.text's, shared with `budgetdsl plan`."""
    return limit_state(c, violated=("over", "under"))


def used(c: Constraint) -> str:
    """The run against the limit: a share of a ≤ limit, 'at min' / '4× min' for a ≥ limit."""
    return limit_use(c)


def limit_table(sol: Solution, width: int) -> list[Text]:
    """limit | (value / bound, when there is room) | used | slack | state."""
    rows = []
    for c in sol.constraints:
        bound = ("≥ " if c.sense == ">=" else "≤ ") + human(c.unit, c.limit)
        rows.append((c.name, f"{human(c.unit, c.value)} {bound}", used(c), human(c.unit, c.slack), state_of(c)))
    header = ("limit", "value / bound", "use", "slack", "")
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(5)]
    show = [0, 1, 2, 3, 4] if sum(widths) + 4 <= width else [0, 2, 3, 4]
    right = {2, 3}

    def line(cells: tuple[str, ...], style: str = "") -> Text:
        text = Text(style=style)
        for n, i in enumerate(show):
            if n:
                text.append(" ")
            cell = cells[i].rjust(widths[i]) if i in right else cells[i].ljust(widths[i])
            text.append(cell, _STATE_STYLE.get(cells[i], "") if i == 4 else "")
        text.rstrip()
        text.truncate(width, overflow="ellipsis")
        return text

    return [line(header, "bright_black"), *(line(r) for r in rows)]


def _wrapped(text: str, width: int, style: str = "", bullet: str = "") -> list[Text]:
    indent = " " * len(bullet)
    return [Text(line, style=style) for line in
            textwrap.wrap(text, max(10, width), initial_indent=bullet, subsequent_indent=indent)]


class LimitsPanel(TextPanel):
    PLACEHOLDER = "solving…"

    def lines(self, sol: Solution, width: int) -> list[Text]:
        out = limit_table(sol, width)
        if sol.conflicts:
            out.append(Text("Conflicts", style="bold red"))
            for c in sol.conflicts:
                out += _wrapped(c, width, bullet="• ")
        if sol.relaxations:
            out += _wrapped("Smallest change of each limit that makes the plan feasible", width, "bold")
            for r in sol.relaxations:
                out += _wrapped(r.message, width, bullet="• ")
        if sol.memory_remedies:
            out.append(Text("Memory remedies (micro-batch 1)", style="bold"))
            for m in sol.memory_remedies:
                out += _wrapped(f"{m.change}: {data(m.memory_per_device)}, micro-batch ≤ {m.micro_batch_max}"
                                f" ({'fits' if m.fits else 'does not fit'})", width, bullet="• ")
        if sol.pinned is not None:
            out += _wrapped(sol.pinned.summary, width, "bright_black")
        if sol.gpu_choice is not None:
            out += _wrapped(sol.gpu_choice.reason, width, "bright_black")
        for note in sol.notes:
            out += _wrapped(note, width, "bright_black", bullet="• ")
        return out
