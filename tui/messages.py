"""The app's own messages: small dataclasses, posted by the controls and handled by the app."""

from __future__ import annotations

from dataclasses import dataclass

from textual.message import Message
from textual.widget import Widget


@dataclass
class ValueCommitted(Message):
    """A control's text was submitted (Enter, or focus left it with the text changed)."""

    widget: Widget
    field: str  # a key of tui.fields.FIELDS, or "objective"
    text: str

    @property
    def control(self) -> Widget:
        return self.widget


@dataclass
class StepRequested(Message):
    """`+` (direction 1) or `-` (direction -1) on a control showing its committed value."""

    widget: Widget
    field: str
    direction: int

    @property
    def control(self) -> Widget:
        return self.widget
