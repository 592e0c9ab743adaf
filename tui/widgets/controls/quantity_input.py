"""One numeric control: an Input that takes plan-language text and steps with `+`/`-`."""

from __future__ import annotations

from budgetdsl.tui.fields import Field
from budgetdsl.tui.messages import StepRequested, ValueCommitted
from textual import on
from textual.actions import SkipAction
from textual.binding import Binding
from textual.widgets import Input


class QuantityInput(Input):
    """Shows the value as written in the plan; Enter (or leaving it) commits the typed text.

    Focusing it selects the whole value, so typing replaces it (`256`, not `1024256`); so does
    each new committed value while it has focus. `+` and `-` step the value while the input shows
    its committed text; once the person types something else they are characters again
    (`1d + 12h`), until Enter or Escape. Escape drops the typed text and leaves the input for the
    plot, where single letters are commands again (`q` quits, `x` `y` `m` change the plot)."""

    BINDINGS = [
        Binding("plus", "step(1)", "Step up", show=False, priority=True, id="field.step-up"),
        Binding("minus", "step(-1)", "Step down", show=False, priority=True, id="field.step-down"),
        Binding("escape", "leave", "Leave field", id="field.leave"),
        Binding("up", "app.focus_previous", show=False, id="field.previous"),
        Binding("down", "app.focus_next", show=False, id="field.next"),
    ]

    def __init__(self, field: Field, **kwargs) -> None:
        super().__init__(id=field.id, placeholder=field.empty, select_on_focus=True, **kwargs)
        self.field = field
        self.committed = ""

    def set_committed(self, text: str) -> None:
        """Show `text` as the current value (no commit message), clearing any error."""
        changed = text != self.committed or text != self.value
        self.committed = text
        if self.value != text:
            self.value = text
            self.cursor_position = len(text)
        if changed and self.has_focus:  # the next keystroke replaces the new value, as on focus
            self.select_all()
        self.remove_class("error")

    @property
    def editing(self) -> bool:
        return self.value != self.committed

    def action_step(self, direction: int) -> None:
        if self.editing:
            raise SkipAction()  # the key types its character
        self.post_message(StepRequested(self, self.field.id, direction))

    def action_leave(self) -> None:
        """Drop the typed text (and an error), then give the focus to the plot."""
        self.set_committed(self.committed)
        self.screen.focus_next("FrontierPlot")

    @on(Input.Submitted)
    def _submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.post_message(ValueCommitted(self, self.field.id, self.value))

    def _on_blur(self, event) -> None:
        super()._on_blur(event)
        if self.editing:
            self.post_message(ValueCommitted(self, self.field.id, self.value))
