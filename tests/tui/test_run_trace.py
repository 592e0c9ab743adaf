"""`budgetdsl tui PLAN --run LOGS`: the measured run on the frontier plot beside the plan."""

import pytest
from budgetdsl.tui.widgets.frontier.canvas import render_plot
from budgetdsl.tui.widgets.frontier.curve import plot_data
from run_trace import RUN_LOG, RUN_PLAN, run_trace

from budgetdsl.cli import main
from budgetdsl.plan.loader import load_plan
from budgetdsl.solve.solver import solve


def _data(x_axis, y_axis="tokens"):
    plan = load_plan(str(RUN_PLAN))
    return plot_data(plan, solve(plan), x_axis, y_axis, run=run_trace())


def test_the_trace_holds_the_logged_steps_and_the_forecast():
    trace = run_trace()
    assert trace.points[-1][:2] == (60, 60 * 256)  # the last logged step, its tokens
    assert [p[0] for p in trace.points] == list(range(1, 61))
    walls = [p[2] for p in trace.points]
    assert walls == sorted(walls) and walls[0] > 0
    assert trace.tokens_planned == 200 * 256 and trace.breaks  # 30 % optimistic: the 7 s deadline breaks
    assert 7.0 < trace.forecast_wall_s < 9.0
    assert "step 60 of 200" in trace.summary and "breaks deadline" in trace.summary


def test_steps_axis_draws_the_progress_and_the_wall_axis_the_forecast():
    steps = _data("steps")
    assert steps.measured[-1] == (60, 60 * 256) and steps.forecast is None
    wall = _data("wall", "flops")
    trace = run_trace()
    assert wall.measured[-1] == pytest.approx((trace.points[-1][2], 60 * 256 * 6e5))
    assert wall.forecast == pytest.approx((trace.forecast_wall_s, 200 * 256 * 6e5)) and wall.forecast_breaks
    assert wall.forecast[0] > wall.vlines[0].value  # beyond the deadline line
    for markers, dot, finish in (("braille", "•", "◎"), ("ascii", "+", "F")):
        text = render_plot(wall, 100, 28, markers).plain
        assert f"{dot}measured" in text and f"{finish}forecast finish" in text
        assert text.count(dot) > 10 and "breaks deadline" in text


def test_a_bad_run_log_exits_2_before_the_terminal(tmp_path, capsys):
    bad = tmp_path / "run.csv"
    bad.write_text(RUN_LOG.read_text().replace("\n30,", "\n30x,", 1))
    assert main(["tui", str(RUN_PLAN), "--run", str(bad)]) == 2
    err = capsys.readouterr().err
    assert f"{bad}:31" in err and "Traceback" not in err
    assert main(["tui", str(RUN_PLAN), "--run", str(tmp_path / "missing")]) == 2
    assert "no such file" in capsys.readouterr().err
