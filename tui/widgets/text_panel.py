"""A panel of text that redraws only when its text changes, and relayouts only when its line count
changes: `Static.update` relayouts the whole screen on every call, and re-solving on every keypress
updates three panels. A TextPanel builds its lines once per value and width; `show` does nothing
when they equal the lines on screen, redraws only the lines that differ when their count is the
same, and `render` and `get_content_height` reuse them. Before its first value it shows
`PLACEHOLDER` (`solving…`).
"""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.geometry import Region
from textual.widget import Widget


def _same(x: Text, y: Text) -> bool:
    """The same text, spans and base style (Rich's `==` ignores the base style)."""
    return x.plain == y.plain and x.style == y.style and x.spans == y.spans


class TextPanel(Widget):
    """Subclasses implement `lines(value, width) -> list[Text]`."""

    PLACEHOLDER = ""  # shown while the value is None (the first solve under way)

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._value: Any = None
        self._lines: list[Text] | None = None  # the lines of _value at _width
        self._width = -1
        self._count = -1

    def lines(self, value: Any, width: int) -> list[Text]:  # pragma: no cover - abstract
        raise NotImplementedError

    def _lines_at(self, width: int) -> list[Text]:
        if self._lines is None or width != self._width:
            self._lines = (self.lines(self._value, width) if self._value is not None
                           else [Text(self.PLACEHOLDER, style="italic bright_black")])
            self._width = width
        return self._lines

    def show(self, value: Any) -> None:
        width = max(self.content_size.width, 1)
        before = self._lines if width == self._width else None
        self._value, self._lines = value, None
        lines = self._lines_at(width)
        if (before is not None and len(before) == len(lines) == self._count
                and all(line.cell_len <= width for line in lines)):  # one row per line
            rows = [Region(0, y, width, 1) for y, (a, b) in enumerate(zip(before, lines)) if not _same(a, b)]
            if rows:  # none: nothing on screen changes, no redraw
                self.refresh(*rows)
            return
        self.refresh(layout=len(lines) != self._count)
        self._count = len(lines)

    def render(self) -> Text:
        return Text("\n").join(self._lines_at(max(self.content_size.width, 1)))

    def get_content_height(self, container, viewport, width: int) -> int:
        return len(self._lines_at(width))
