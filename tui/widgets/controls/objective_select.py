"""The objective control: a Select over the four objectives; `+`/`-` cycle through them."""

from __future__ import annotations

from budgetdsl.tui.messages import StepRequested
from textual.binding import Binding
from textual.widgets import Select

from budgetdsl.solve.objectives import OBJECTIVES


class ObjectiveSelect(Select[str]):
    BINDINGS = [
        Binding("plus", "step(1)", "Next objective", show=False, id="objective.next"),
        Binding("minus", "step(-1)", "Previous objective", show=False, id="objective.previous"),
    ]

    def __init__(self, **kwargs) -> None:
        super().__init__([(o, o) for o in OBJECTIVES], allow_blank=False, value=OBJECTIVES[0],
                         id="objective", compact=True, **kwargs)

    def action_step(self, direction: int) -> None:
        self.post_message(StepRequested(self, "objective", direction))
