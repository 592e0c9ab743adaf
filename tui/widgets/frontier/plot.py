"""The frontier plot widget: log-log, tokens or FLOPs against steps or wall clock."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.text import Text
from textual.binding import Binding
from textual.reactive import reactive
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

    def __init__(self, markers: str = "braille", **kwargs) -> None:
        super().__init__(**kwargs)
        self._plan: Plan | None = None
        self._solution: Solution | None = None
        self._data: PlotData | None = None
        self.set_reactive(FrontierPlot.markers, markers if markers in MARKERS else "braille")
        self._title()

    def show(self, plan: "Plan", solution: "Solution") -> None:
        self._plan, self._solution = plan, solution
        self._recompute()

    def _recompute(self) -> None:
        if self._plan is not None and self._solution is not None:
            self._data = plot_data(self._plan, self._solution, self.x_axis, self.y_axis)
        self._title()
        self.refresh()

    def _title(self) -> None:
        self.border_title = f"frontier: {AXIS_TITLES[self.y_axis]} vs {AXIS_TITLES[self.x_axis]}"
        self.border_subtitle = f"F2 x · F3 y · F4 {self.markers}"

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
            return Text("")
        size = self.content_size
        return render_plot(self._data, size.width, size.height, self.markers, self.app.no_color)
