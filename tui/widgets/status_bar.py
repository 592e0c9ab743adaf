"""The top line: plan, file, feasibility, unsaved changes."""

from __future__ import annotations

from pathlib import Path

from budgetdsl.tui.widgets.text_panel import TextPanel
from rich.text import Text

from budgetdsl.io.terminal_text import inert


class StatusBar(TextPanel):
    """Shown a (plan name, path, solution, changed keys[, solving]) tuple."""

    def lines(self, value, width: int) -> list[Text]:
        plan_name, path, sol, changed, *rest = value
        # Separating spaces end a run, never start one: an SVG export writes each run as a <text>
        # at its cell, and renderers (rsvg) drop a run's leading spaces, which ran the plan name
        # into the file name (`llama2-7bllama2-7b.yaml`).
        # Plan text, and the file's name, are shown escaped: Rich drops BEL and CR but writes ESC.
        text = Text.assemble(("budgetdsl ", "bold"), (f"{inert(plan_name, keep_lines=False)}  ", "bold cyan"),
                             inert(Path(path).name, keep_lines=False))
        if sol is not None:
            text.append("  ")
            text.append("feasible" if sol.feasible else "INFEASIBLE", "bold green" if sol.feasible else "bold red")
        if rest and rest[0]:
            text.append("  ")
            text.append("solving…", "italic")
        if changed:
            text.append("  ")
            text.append(f"● {len(changed)} unsaved: " + ", ".join(changed), "bold yellow")
        text.truncate(width, overflow="ellipsis")
        return [text]
