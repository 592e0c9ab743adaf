"""Snapshots of the screen at fixed terminal sizes, grouped by feature (pytest-textual-snapshot).

They pin the picture: layout at 80×24 and at a wide size, the ASCII plot, an infeasible plan with
its relaxations, the help screen. After a deliberate change of the picture, look at the report
and update with `pytest tests/tui --snapshot-update`. Textual is pinned exactly in pyproject.toml
because rendering differs between its versions.
"""

import pytest
from budgetdsl.tui.app import make_app
from run_trace import RUN_PLAN, run_trace
from textual.widgets import Input
from tui_helpers import PLAN, ready, type_into

pytest.importorskip("pytest_textual_snapshot")


async def steady_cursor(pilot):
    """The focused input's cursor blinks every 0.5 s, so on a busy machine (a slow start, a loaded
    CPU) the picture could catch it off. A steady cursor is shown, as at the blink's start. And
    the first solve (in the app's worker) has drawn its answer."""
    for field in pilot.app.query(Input):
        field.cursor_blink = False
    await ready(pilot)


class TestLayout:
    def test_80x24(self, snap_compare):
        assert snap_compare(make_app(PLAN), terminal_size=(80, 24), run_before=steady_cursor)

    def test_wide_160x48(self, snap_compare):
        assert snap_compare(make_app(PLAN), terminal_size=(160, 48), run_before=steady_cursor)


class TestPlot:
    def test_ascii_markers_wall_clock_and_flops(self, snap_compare):
        assert snap_compare(make_app(PLAN, markers="ascii"), terminal_size=(100, 32), press=["f2", "f3"],
                            run_before=steady_cursor)


class TestInfeasible:
    def test_relaxations_and_error_on_input(self, snap_compare):
        async def five_days_then_a_bad_value(pilot):
            await steady_cursor(pilot)
            await type_into(pilot, "deadline", "5 days")
            pilot.app.clear_notifications()
            await type_into(pilot, "flops", "1e23 GiB")
            pilot.app.clear_notifications()  # notification timers are not part of the picture
            await pilot.pause()

        assert snap_compare(make_app(PLAN), terminal_size=(120, 36), run_before=five_days_then_a_bad_value)


class TestRun:
    def test_measured_run_and_forecast_on_the_wall_clock(self, snap_compare):
        """`budgetdsl tui PLAN --run LOGS`: the run's logged steps and its forecast finish past the
        deadline, beside the planned run."""
        assert snap_compare(make_app(RUN_PLAN, run=run_trace()), terminal_size=(120, 36), press=["f2"],
                            run_before=steady_cursor)


class TestScreens:
    def test_help(self, snap_compare):
        assert snap_compare(make_app(PLAN), terminal_size=(100, 32), press=["f1"], run_before=steady_cursor)


def test_every_snapshot_file_belongs_to_a_test_here():
    """syrupy fails a run that leaves a snapshot file unused (a test renamed or removed, its picture
    left behind), but not under pytest-xdist, as `make test` runs: a worker cannot see which snapshots
    the other workers used. This keeps that check: each file is `Class.test_name.svg` of a test here."""
    import pathlib

    here = pathlib.Path(__file__)
    files = sorted((here.parent / "__snapshots__" / here.stem).iterdir())
    tests = {f"{cls.__name__}.{name}" for cls in globals().values() if isinstance(cls, type)
             and cls.__name__.startswith("Test") for name in vars(cls) if name.startswith("test_")}
    assert files and tests
    assert [f.name for f in files if f.suffix != ".svg" or f.stem.split("[")[0] not in tests] == []
