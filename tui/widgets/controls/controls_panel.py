"""The controls: GPU count, deadline, FLOP budget, batch, objective and B_crit, one row each."""

from __future__ import annotations

from budgetdsl.tui.fields import FIELDS
from budgetdsl.tui.widgets.controls.objective_select import ObjectiveSelect
from budgetdsl.tui.widgets.controls.quantity_input import QuantityInput
from textual.app import ComposeResult
from textual.containers import Grid
from textual.widgets import Label

ORDER = ("gpus", "deadline", "flops", "batch", "objective", "b_crit")


class ControlsPanel(Grid):
    """Label and control per row; the app fills in the values (`show`)."""

    def compose(self) -> ComposeResult:
        for key in ORDER:
            if key == "objective":
                yield Label("objective", classes="control-label")
                yield ObjectiveSelect()
            else:
                field = FIELDS[key]
                yield Label(field.label, classes="control-label", id=f"{key}-label")
                yield QuantityInput(field)

    def show(self, texts: dict[str, str], objective: str, notes: dict[str, str]) -> None:
        """Set each control's committed text; `notes` amend a label (e.g. where B_crit came from)."""
        for key, text in texts.items():
            self.query_one(f"#{key}", QuantityInput).set_committed(text)
        select = self.query_one(ObjectiveSelect)
        if select.value != objective:
            with select.prevent(ObjectiveSelect.Changed):
                select.value = objective
        for key in FIELDS:
            label = self.query_one(f"#{key}-label", Label)
            text = FIELDS[key].label + notes.get(key, "")
            if str(label.content) != text:  # an update relayouts the screen: only when it changes
                label.update(text)
