"""The frontier plot widget: log-log, tokens or FLOPs against steps or wall clock.

Drawing is most of a keypress's redraw, so the widget redraws only when what it shows changes
(`PlotData`, its size, the markers, NO_COLOR), then only the rows that differ (a run moving along
the curve changes two or three), and it keeps the last few drawings by those inputs: toggling an
axis back, or stepping a value back, reuses the lines drawn then.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import TYPE_CHECKING

from budgetdsl.tui.widgets.frontier.canvas import MARKERS, render_plot
from budgetdsl.tui.widgets.frontier.curve import AXIS_TITLES, PlotData, plot_data
from rich.text import Text
from textual.binding import Binding
from textual.geometry import Region
from textual.reactive import reactive
from textual.strip import Strip
from textual.visual import Visual, visualize
from textual.widget import Widget

if TYPE_CHECKING:
    from budgetdsl.plan.model import Plan
    from budgetdsl.solve.solution import Solution
    from budgetdsl.track.trace import RunTrace


class FrontierPlot(Widget, can_focus=True):
    """Redraws from the last `show(plan, solution)`; the axes and the markers are reactive."""

    BINDINGS = [
        Binding("x", "app.toggle_x", "Steps/wall clock", show=False, id="plot.x-axis.letter"),
        Binding("y", "app.toggle_y", "Tokens/FLOPs", show=False, id="plot.y-axis.letter"),
        Binding("m", "app.toggle_markers", "Markers", show=False, id="plot.markers.letter"),
        Binding("tab", "app.focus('gpus')", "Controls", show=False, id="plot.controls"),
    ]

    x_axis: reactive[str] = reactive("steps")
    y_axis: reactive[str] = reactive("tokens")
    markers: reactive[str] = reactive("braille")

    CACHED = 8  # drawings kept, by their inputs

    def __init__(self, markers: str = "braille", run: RunTrace | None = None, **kwargs) -> None:
        super().__init__(**kwargs)
        self._run = run  # a measured run drawn beside the plan
        self._plan: Plan | None = None
        self._solution: Solution | None = None
        self._data: PlotData | None = None
        self._drawn: OrderedDict[tuple, list[Strip]] = OrderedDict()
        self._last: tuple[tuple, list[Strip]] | None = None  # the drawing asked for last, by its inputs
        self.set_reactive(FrontierPlot.markers, markers if markers in MARKERS else "braille")
        self._title()

    def show(self, plan: Plan, solution: Solution | None) -> None:
        """Plot `solution` (None: the first solve is under way, the plot says `solving…`)."""
        self._plan, self._solution = plan, solution
        self._recompute()

    def _recompute(self) -> None:
        data = None
        if self._plan is not None and self._solution is not None:
            data = plot_data(self._plan, self._solution, self.x_axis, self.y_axis, run=self._run)
        self._title()
        if data is not None and data == self._data:
            return
        before = self._drawing() if self.size.area else None
        self._data = data
        after = self._drawing() if before is not None else None
        if before is None or after is None or len(before) != len(after):
            self.refresh()
            return
        width = self.size.width  # only the rows that changed are drawn again
        rows = [Region(0, y, width, 1) for y, (a, b) in enumerate(zip(before, after)) if a != b]
        if rows:
            self.refresh(*rows)

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
        """Line `y` of the drawing for the current inputs."""
        strips = self._drawing() if self.text_selection is None else None
        if strips is None:
            return super().render_line(y)
        return strips[y] if y < len(strips) else Strip.blank(self.size.width, self.visual_style.rich_style)

    def _drawing(self) -> list[Strip] | None:
        """The drawing for the current inputs, as strips: made as `Widget` makes them from
        `render` (the same text, the same strips), or one kept by its inputs. None while there
        is nothing to plot."""
        if self._data is None:
            return None
        key = (self._data, self.size, self.markers, self.app.no_color, self.visual_style)
        last = self._last  # each of the widget's lines asks: no hash of the 480 points per line
        if last is not None and last[0][0] is key[0] and last[0][1:] == key[1:]:
            return last[1]
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
        self._last = (key, strips)
        return strips
