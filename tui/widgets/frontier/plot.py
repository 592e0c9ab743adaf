"""The frontier plot widget: log-log, tokens or FLOPs against steps or wall clock.

Drawing the plot and turning its text into terminal lines took most of a keypress (about 15 ms of
a 30 ms redraw at 160×48). So the widget redraws only when what it shows changes (`PlotData`, its
size, the markers, NO_COLOR), and keeps the last few drawings by those inputs: toggling an axis
back, or stepping a value back to where it was, reuses the lines drawn then.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from collections import OrderedDict

from rich.text import Text
from textual.binding import Binding
from textual.reactive import reactive
from textual.strip import Strip
from textual.visual import Visual, visualize
from textual.widget import Widget

from budgetdsl.tui.widgets.frontier.canvas import MARKERS, render_plot
from budgetdsl.tui.widgets.frontier.curve import AXIS_TITLES, PlotData, plot_data

if TYPE_CHECKING:
    from budgetdsl.plan_model import Plan
    from budgetdsl.solution import Solution


class FrontierPlot(Widget, can_focus=True):
    """Redraws from the last `show(plan, solution)`; the axes and the markers are reactive."""

    BINDINGS = [
        Binding("x", "app.toggle_x", "Steps/wall clock", show=False, id="plot.x-axis.letter"),
        Binding("y", "app.toggle_y", "Tokens/FLOPs", show=False, id="plot.y-axis.letter"),
        Binding("m", "app.toggle_markers", "Markers", show=False, id="plot.markers.letter"),
    ]

    x_axis: reactive[str] = reactive("steps")
    y_axis: reactive[str] = reactive("tokens")
    markers: reactive[str] = reactive("braille")

    CACHED = 8  # drawings kept, by their inputs

    def __init__(self, markers: str = "braille", **kwargs) -> None:
        super().__init__(**kwargs)
        self._plan: Plan | None = None
        self._solution: Solution | None = None
        self._data: PlotData | None = None
        self._drawn: OrderedDict[tuple, list[Strip]] = OrderedDict()
        self.set_reactive(FrontierPlot.markers, markers if markers in MARKERS else "braille")
        self._title()

    def show(self, plan: "Plan", solution: "Solution | None") -> None:
        """Plot `solution` (None: the first solve is under way, the plot says `solving…`)."""
        self._plan, self._solution = plan, solution
        self._recompute()

    def _recompute(self) -> None:
        data = None
        if self._plan is not None and self._solution is not None:
            data = plot_data(self._plan, self._solution, self.x_axis, self.y_axis)
        self._title()
        if data != self._data or data is None:
            self._data = data
            self.refresh()

    def _title(self) -> None:
        # Each assignment redraws the border, even with the same text: only when it changes.
        title = f"frontier: {AXIS_TITLES[self.y_axis]} vs {AXIS_TITLES[self.x_axis]}"
        subtitle = f"F2 x · F3 y · F4 {self.markers}"
        if self.border_title != title:
            self.border_title = title
        if self.border_subtitle != subtitle:
            self.border_subtitle = subtitle

    def watch_x_axis(self) -> None:
        self._recompute()

    def watch_y_axis(self) -> None:
        self._recompute()

    def watch_markers(self) -> None:
        self._title()
        self.refresh()

    @property
    def data(self) -> PlotData | None:
        return self._data

    def render(self) -> Text:
        if self._data is None:
            return Text("solving…", style="italic bright_black")
        size = self.content_size
        return render_plot(self._data, size.width, size.height, self.markers, self.app.no_color)

    def render_line(self, y: int) -> Strip:
        """Line `y` of the drawing for the current inputs: drawn as `Widget` draws a `render`
        (the same text, made into the same strips), or taken from a drawing kept by its inputs."""
        if self._data is None or self.text_selection is not None:
            return super().render_line(y)
        key = (self._data, self.size, self.markers, self.app.no_color, self.visual_style)
        strips = self._drawn.get(key)
        if strips is None:
            width, height = self.size
            strips = Visual.to_strips(self, visualize(self, self.render(), markup=False), width, height,
                                      self.visual_style)
            self._drawn[key] = strips
            while len(self._drawn) > self.CACHED:
                self._drawn.popitem(last=False)
        else:
            self._drawn.move_to_end(key)
        return strips[y] if y < len(strips) else Strip.blank(self.size.width, self.visual_style.rich_style)
