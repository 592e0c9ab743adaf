"""The top line: plan, file, feasibility, unsaved changes."""

from __future__ import annotations

from pathlib import Path

from rich.text import Text

from budgetdsl.tui.widgets.text_panel import TextPanel


class StatusBar(TextPanel):
    """Shown a (plan name, path, solution, changed keys) tuple."""

    def lines(self, value, width: int) -> list[Text]:
        plan_name, path, sol, changed = value
        text = Text.assemble(("budgetdsl ", "bold"), (plan_name, "bold cyan"), f"  {Path(path).name}")
        if sol is not None:
            text.append("  ")
            text.append("feasible" if sol.feasible else "INFEASIBLE", "bold green" if sol.feasible else "bold red")
        if changed:
            text.append(f"  ● {len(changed)} unsaved: " + ", ".join(changed), "bold yellow")
        text.truncate(width, overflow="ellipsis")
        return [text]
