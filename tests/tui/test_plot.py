"""The frontier plot: the curve is budgetdsl's frontier, the marks are the solution's, the ticks
read as decades, and the ASCII fallback has no braille."""

import math

import pytest
from budgetdsl.tui.state import WhatIf
from budgetdsl.tui.widgets.frontier.canvas import render_plot
from budgetdsl.tui.widgets.frontier.curve import feasible_batches, plot_data
from budgetdsl.tui.widgets.frontier.ticks import ticks
from tui_helpers import PLAN

from budgetdsl.solve.solver import solve
from budgetdsl.theory.frontier import Frontier


@pytest.fixture(scope="module")
def state():
    return WhatIf.load(PLAN)


@pytest.fixture(scope="module")
def solution(state):
    return solve(state.plan)


def test_the_curve_lies_on_the_frontier(state, solution):
    data = plot_data(state.plan, solution, "steps", "tokens")
    f = solution.frontier
    for s, e in data.curve:
        assert (s / f.s_min - 1) * (e / f.e_min_tokens - 1) == pytest.approx(1.0, rel=1e-9)
    assert data.b_crit == pytest.approx((2 * f.s_min, 2 * f.e_min_tokens))
    assert data.run == (solution.steps, solution.tokens)


def test_flops_and_wall_clock_axes_use_the_cost_model(state, solution):
    data = plot_data(state.plan, solution, "wall", "flops")
    fpt = solution.assumptions["flops_per_token"].value
    fr = Frontier(solution.frontier.b_crit_tokens, solution.frontier.e_min_tokens)
    # The run's point is the solution's; the curve through its batch gives the same wall clock.
    assert data.run == (solution.wall_clock_s, solution.flops)
    step_time = solution.assumptions["step_time"].value
    assert fr.steps(solution.batch.tokens) * step_time == pytest.approx(solution.wall_clock_s, rel=1e-5)
    rate, fixed = solution.assumptions["achieved_flops"].value, solution.assumptions["fixed_time"].value
    for (w, c), (s, e) in zip(data.curve, plot_data(state.plan, solution, "steps", "tokens").curve):
        assert c == pytest.approx(e * fpt)
        b = fr.b_crit / (s / fr.s_min - 1)  # invert S(B); T(B) = f·B/rate + c (a declared MFU: c = 0)
        assert w == pytest.approx(s * (fpt * b / rate + fixed), rel=1e-6)
    assert [line.value for line in data.vlines] == [state.plan.budget.deadline]
    assert [line.value for line in data.hlines] == [state.plan.budget.flops]


def test_the_feasible_arc_is_inside_every_limit(state, solution):
    lo, hi = feasible_batches(solution)
    assert lo == solution.batch.tokens  # the min_batch floor binds: dp × seq_len
    highs = [c.allowed_batch[1] for c in solution.constraints if c.allowed_batch and c.allowed_batch[1]]
    assert hi == min(highs) == solution.constraint("flops").allowed_batch[1]
    data = plot_data(state.plan, solution, "steps", "tokens")
    assert any(data.feasible) and not all(data.feasible)
    fr = Frontier(solution.frontier.b_crit_tokens, solution.frontier.e_min_tokens)
    for (s, _), ok in zip(data.curve, data.feasible):
        b = fr.b_crit / (s / fr.s_min - 1)  # invert S(B)
        assert ok == (lo * (1 - 1e-6) <= b <= hi * (1 + 1e-6))


def test_an_infeasible_plan_has_no_arc(state):
    sol = solve(state.with_changes({"budget.flops": "1e22", "run.batch": None}).plan)
    assert not sol.feasible
    data = plot_data(state.plan, sol, "steps", "tokens")
    assert not any(data.feasible)
    text = render_plot(data, 60, 16).plain
    assert "no feasible batch" in text


def test_the_deadline_on_the_steps_axis_is_where_the_wall_clock_reaches_it(state, solution):
    data = plot_data(state.plan, solution, "steps", "tokens")
    fr = Frontier(solution.frontier.b_crit_tokens, solution.frontier.e_min_tokens)
    lo, hi = solution.constraint("deadline").allowed_batch
    ends = [fr.steps(b) for b in (lo, hi) if b is not None and 0 < b < math.inf]  # lo = 0: no fixed time
    assert ends and sorted(line.value for line in data.vlines) == pytest.approx(sorted(ends))


@pytest.mark.parametrize("lo,hi,kind,expected", [
    (2e5, 3e7, "steps", ["1M", "10M"]),
    (3e11, 2e13, "tokens", ["1T", "10T"]),
    (5e21, 4e23, "flops", ["1e22", "1e23"]),
    (2e4, 5e7, "wall", ["6h", "1d", "1w", "30d", "1y"]),  # human units, whatever the room
])
def test_ticks_are_decades_for_people(lo, hi, kind, expected):
    assert [t for _, t in ticks(lo, hi, kind, room=3)] == expected


def test_ticks_fill_a_short_range():
    assert [t for _, t in ticks(2e5, 3e7, "steps", room=5)] == ["300k", "1M", "3M", "10M", "30M"]
    assert [t for _, t in ticks(1.5e6, 9e6, "steps", room=6)] == ["1.5M", "2M", "3M", "5M", "7M"]
    assert len(ticks(1.1e6, 1.3e6, "tokens")) <= 2


def test_braille_and_ascii_markers(state, solution):
    data = plot_data(state.plan, solution, "steps", "tokens")
    braille = render_plot(data, 70, 20, "braille").plain
    ascii_ = render_plot(data, 70, 20, "ascii").plain
    assert any(0x2800 <= ord(c) <= 0x28FF for c in braille)
    assert all(ord(c) < 128 for c in ascii_), "the fallback is plain ASCII"
    for text in (braille, ascii_):
        lines = text.split("\n")
        assert len(lines) == 20 and all(len(line) <= 70 for line in lines)
        assert "1M" in text and "1T" in text  # decade labels on both axes
        assert "deadline" in text and "FLOP budget" in text and "B_crit" in text
    assert "@" in ascii_ and "X" in ascii_ and "●" in braille and "◆" in braille


def test_tiny_sizes_do_not_crash(state, solution):
    data = plot_data(state.plan, solution, "wall", "flops")
    for w, h in ((1, 1), (16, 6), (17, 7), (30, 9), (200, 60)):
        render_plot(data, w, h)
    assert math.isfinite(data.curve[0][0])
