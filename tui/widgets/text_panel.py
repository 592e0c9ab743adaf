"""A panel of text that redraws without a relayout unless its line count changes.

`Static.update` asks for a relayout of the whole screen on every call (its size may change);
re-solving on every keypress updates three such panels, and the relayout was most of the
keypress-to-redraw time. A TextPanel builds its text in `render` from the last value it was
shown (so it can use its width) and relayouts only when the number of lines changes.
"""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.widget import Widget


class TextPanel(Widget):
    """Subclasses implement `lines(value, width) -> list[Text]`."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._value: Any = None
        self._count = -1

    def lines(self, value: Any, width: int) -> list[Text]:  # pragma: no cover - abstract
        raise NotImplementedError

    def show(self, value: Any) -> None:
        self._value = value
        count = len(self.lines(value, max(self.content_size.width, 1)))
        self.refresh(layout=count != self._count)
        self._count = count

    def render(self) -> Text:
        if self._value is None:
            return Text("")
        return Text("\n").join(self.lines(self._value, max(self.content_size.width, 1)))

    def get_content_height(self, container, viewport, width: int) -> int:
        return len(self.lines(self._value, width)) if self._value is not None else 1
