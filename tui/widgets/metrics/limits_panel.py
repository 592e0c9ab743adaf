"""Each limit's use and slack; when infeasible, the conflicts and the smallest relaxations."""

from __future__ import annotations

from rich.console import Console, ConsoleOptions, Group, RenderResult
from rich.table import Table
from rich.text import Text
from textual.widgets import Static

from budgetdsl.report import data, human
from budgetdsl.solution import Constraint, Solution

_STATE_STYLE = {"VIOLATED": "bold red", "binds": "yellow", "ok": "green"}


def state_of(c: Constraint) -> str:
    if c.satisfied is None:
        return "—"
    if not c.satisfied:
        return "VIOLATED"
    return "binds" if c.binding else "ok"


def used(c: Constraint) -> str:
    """How much of the limit the run uses (for ≤ limits), or how far above the floor (≥)."""
    if c.value is None or not c.limit:
        return "—"
    return f"{c.value / c.limit:.0%}"


class LimitsTable:
    """The constraints as a table that drops the value/bound column when the panel is narrow."""

    def __init__(self, sol: Solution):
        self.sol = sol

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        wide = options.max_width >= 60
        table = Table(box=None, padding=(0, 1), show_edge=False, header_style="bright_black", pad_edge=False)
        table.add_column("limit", no_wrap=True)
        if wide:
            table.add_column("value / bound", no_wrap=True)
        table.add_column("used", no_wrap=True, justify="right")
        table.add_column("slack", no_wrap=True, justify="right")
        table.add_column("", no_wrap=True)
        for c in self.sol.constraints:
            state = state_of(c)
            bound = ("≥ " if c.sense == ">=" else "≤ ") + human(c.unit, c.limit)
            cells = [c.name, *([f"{human(c.unit, c.value)} {bound}"] if wide else []), used(c),
                     human(c.unit, c.slack), Text(state, style=_STATE_STYLE.get(state, ""))]
            table.add_row(*cells)
        yield table


class LimitsPanel(Static):
    def show(self, sol: Solution) -> None:
        parts: list = [LimitsTable(sol)]
        if sol.conflicts:
            parts.append(Text("Conflicts", style="bold red"))
            parts += [Text(f"• {c}") for c in sol.conflicts]
        if sol.relaxations:
            parts.append(Text("Smallest change of each limit that makes the plan feasible", style="bold"))
            parts += [Text(f"• {r.message}") for r in sol.relaxations]
        if sol.memory_remedies:
            parts.append(Text("Memory remedies (micro-batch 1)", style="bold"))
            parts += [Text(f"• {m.change}: {data(m.memory_per_device)}, micro-batch ≤ {m.micro_batch_max}"
                           f" ({'fits' if m.fits else 'does not fit'})") for m in sol.memory_remedies]
        if sol.pinned is not None:
            parts.append(Text(sol.pinned.summary, style="bright_black"))
        if sol.gpu_choice is not None:
            parts.append(Text(sol.gpu_choice.reason, style="bright_black"))
        parts += [Text(f"• {n}", style="bright_black") for n in sol.notes]
        self.update(Group(*parts))
