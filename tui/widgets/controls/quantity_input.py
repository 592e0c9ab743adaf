"""One numeric control: an Input that takes plan-language text and steps with `+`/`-`."""

from __future__ import annotations

from textual import on
from textual.actions import SkipAction
from textual.binding import Binding
from textual.widgets import Input

from budgetdsl.tui.fields import Field
from budgetdsl.tui.messages import StepRequested, ValueCommitted


class QuantityInput(Input):
    """Shows the value as written in the plan; Enter (or leaving it) commits the typed text.

    `+` and `-` step the value while the input shows its committed text; once the person types
    something else they are characters again (`1d + 12h`), until Enter or Escape."""

    BINDINGS = [
        Binding("plus", "step(1)", "Step up", show=False, priority=True),
        Binding("minus", "step(-1)", "Step down", show=False, priority=True),
        Binding("escape", "revert", "Revert the typed text", show=False),
        Binding("up", "app.focus_previous", show=False),
        Binding("down", "app.focus_next", show=False),
    ]

    def __init__(self, field: Field, **kwargs) -> None:
        super().__init__(id=field.id, placeholder=field.empty, select_on_focus=False, **kwargs)
        self.field = field
        self.committed = ""

    def set_committed(self, text: str) -> None:
        """Show `text` as the current value (no commit message), clearing any error."""
        self.committed = text
        if self.value != text:
            self.value = text
            self.cursor_position = len(text)
        self.remove_class("error")

    @property
    def editing(self) -> bool:
        return self.value != self.committed

    def action_step(self, direction: int) -> None:
        if self.editing:
            raise SkipAction()  # the key types its character
        self.post_message(StepRequested(self, self.field.id, direction))

    def action_revert(self) -> None:
        if not self.editing and not self.has_class("error"):
            raise SkipAction()
        self.set_committed(self.committed)

    @on(Input.Submitted)
    def _submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.post_message(ValueCommitted(self, self.field.id, self.value))

    def _on_blur(self, event) -> None:
        super()._on_blur(event)
        if self.editing:
            self.post_message(ValueCommitted(self, self.field.id, self.value))
