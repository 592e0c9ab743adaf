"""The top line: plan, file, feasibility, unsaved changes."""

from __future__ import annotations

from pathlib import Path

from rich.text import Text
from textual.widgets import Static

from budgetdsl.solution import Solution


class StatusBar(Static):
    def show(self, plan_name: str, path: str, sol: Solution | None, changed: list[str]) -> None:
        text = Text.assemble(("budgetdsl ", "bold"), (plan_name, "bold cyan"), f"  {Path(path).name}")
        if sol is not None:
            text.append("  ")
            text.append("feasible" if sol.feasible else "INFEASIBLE",
                        "bold green" if sol.feasible else "bold red")
        if changed:
            text.append(f"  ● {len(changed)} unsaved: " + ", ".join(changed), "bold yellow")
        text.truncate(max(10, self.size.width or 80), overflow="ellipsis")
        self.update(text)
