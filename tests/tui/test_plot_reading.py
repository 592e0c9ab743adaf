"""The plot reads without a second look: every line drawn is named in the legend, the wall-clock
axis has enough labels to read a position off it, and without colour (NO_COLOR=1, where Textual
turns every colour into a grey) the curve, the feasible arc and the run differ by glyph and weight."""

import pytest
from budgetdsl.tui.app import make_app
from budgetdsl.tui.state import WhatIf
from budgetdsl.tui.widgets.frontier.canvas import render_plot
from budgetdsl.tui.widgets.frontier.curve import plot_data
from budgetdsl.tui.widgets.frontier.plot import FrontierPlot
from budgetdsl.tui.widgets.frontier.ticks import ticks
from tui_helpers import PLAN, REPO, headless, ready

from budgetdsl.solve.solver import solve


@pytest.fixture(scope="module")
def state():
    return WhatIf.load(PLAN)


@pytest.fixture(scope="module")
def two_deadline_ends():
    """GPT-3 with the layout's own step time (no declared MFU): a fixed time per step, so the
    deadline holds between two batches, and on the steps axis it is two lines."""
    st = WhatIf.load(REPO / "plans" / "gpt3-175b.yaml").with_changes({"hardware.mfu": None})
    return st, solve(st.plan)


def test_two_deadline_lines_are_named_as_two(two_deadline_ends, state):
    st, sol = two_deadline_ends
    data = plot_data(st.plan, sol, "steps", "tokens")
    assert len(data.vlines) == 2
    text = render_plot(data, 90, 24).plain
    assert sum(line.count("┊") for line in text.split("\n")[:-2]) >= 2 * 10  # both drawn, full height
    legend = text.split("\n")[-1]
    assert "┊┊deadline (met between)" in legend
    one = render_plot(plot_data(state.plan, solve(state.plan), "wall", "flops"), 90, 24).plain
    assert "┊deadline" in one and "met between" not in one  # one line: named once, as before


@pytest.mark.parametrize("days_lo,days_hi", [(4, 60), (3, 40), (5, 25), (1.5, 20)])
def test_a_wall_clock_axis_of_days_to_weeks_gets_at_least_three_labels(days_lo, days_hi):
    """1w and 30d alone left a 4-60 day axis with two labels."""
    out = ticks(days_lo * 86400, days_hi * 86400, "wall", room=6)
    assert len(out) >= 3, out
    values = [v for v, _ in out]
    assert values == sorted(values) and all(days_lo * 86400 <= v <= days_hi * 86400 for v in values)
    assert all(t[-1] in "dwy" or t.endswith("mo") for _, t in out)


def test_the_flops_wall_clock_view_has_more_than_two_x_labels(state):
    sol = solve(state.plan)
    text = render_plot(plot_data(state.plan, sol, "wall", "flops"), 70, 20).plain
    labels = text.split("\n")[-2].split()  # the row under the x axis
    assert len(labels) >= 4 and {"1w", "30d"} <= set(labels), labels


def test_without_colour_the_arc_and_the_run_differ_by_glyph_and_weight(state):
    sol = solve(state.plan)
    data = plot_data(state.plan, sol, "steps", "tokens")
    plain = render_plot(data, 70, 20, no_color=False)
    mono = render_plot(data, 70, 20, no_color=True)

    def cells(text):
        """(character, style) of every cell; a cell without a span has style ''."""
        styles = [""] * len(text.plain)
        for span in text.spans:
            styles[span.start:span.end] = [str(span.style)] * (span.end - span.start)
        return list(zip(text.plain, styles))

    arc = {c for c, s in cells(mono) if s == "bold"}
    curve = {c for c, s in cells(mono) if s == "" and 0x2800 < ord(c) <= 0x28FF}
    assert arc == {"⣿"}, "the feasible arc is a solid band without colour"
    assert "⣿" not in curve and curve  # the curve keeps its thin dots
    assert ("●", "bold reverse") in cells(mono)  # the run stands out in reverse video
    assert "⣿⣿feasible" in mono.plain.split("\n")[-1]
    assert "⣿" not in plain.plain  # with colour: the picture as before


@headless
async def test_the_app_under_no_color_draws_them_apart(monkeypatch):
    monkeypatch.setenv("NO_COLOR", "1")
    app = make_app(PLAN, keymap={})
    async with app.run_test(size=(100, 30)) as pilot:
        await ready(pilot)
        await pilot.pause()
        assert app.no_color
        text = app.query_one(FrontierPlot).render().plain  # what the widget draws, legend included
        assert "⣿" in text and "●" in text and "⣿⣿feasible" in text
