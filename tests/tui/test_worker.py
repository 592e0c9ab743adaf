"""The app stays responsive while it solves: the first solve at launch and the one after save run in
the worker thread, the panels say `solving…` meanwhile, keys are handled at once and none is lost,
and what is drawn at the end is `solve()` of the newest values. The solver is held on a gate so
that each test decides when an answer comes."""

import threading

import pytest
from budgetdsl.tui import app as app_module
from budgetdsl.tui.app import BudgetApp, make_app
from budgetdsl.tui.state import WhatIf
from budgetdsl.tui.widgets.frontier.plot import FrontierPlot
from textual.app import App
from tui_helpers import headless, notifications, ready, shown, type_into

from budgetdsl.cli import main as cli
from budgetdsl.plan.diagnostics import PlanError
from budgetdsl.plan.loader import load_plan
from budgetdsl.quantities.humanize import human
from budgetdsl.solve.solver import solve


@pytest.fixture
def gate(monkeypatch):
    """The app's solver, held until the gate is open; each plan it was given is recorded."""
    gate = threading.Event()
    gate.given = []

    def held(plan, cache=None):
        gate.given.append(plan)
        assert gate.wait(20), "the test never opened the gate"
        return solve(plan, cache)

    monkeypatch.setattr(app_module, "solve", held)
    return gate


def solved_with(path, changes):
    return solve(WhatIf.load(path).with_changes(changes).plan)


@headless
async def test_the_first_solve_runs_in_the_worker_and_a_key_meanwhile_is_not_lost(plans, gate):
    path = plans / "llama2-7b.yaml"
    app = make_app(path)
    assert app.solution is None  # make_app reads the plan; it does not solve it
    async with app.run_test(size=(100, 32)) as pilot:
        await pilot.pause()
        assert app.solving and app.solution is None
        assert "solving…" in shown(app.query_one("#status"))
        for panel in ("#metrics", "#limits", "#plot"):
            assert "solving…" in shown(app.query_one(panel))

        deadline = app.query_one("#deadline")
        deadline.focus()
        await pilot.press("plus")  # handled while the first solve is under way
        assert deadline.value == "22 days" and app.latest.changes == {"budget.deadline": "22 days"}
        await pilot.press("f2")  # the UI thread is free: the plot's axis follows at once
        assert app.query_one(FrontierPlot).x_axis == "wall"
        assert app.solution is None and "solving…" in shown(app.query_one("#status"))

        gate.set()
        await ready(pilot)
        # The plan as loaded (under way when the key came), then only the newest values.
        assert [p.budget.deadline / 86400 for p in gate.given] == [21, 22]
        assert app.state.changes == {"budget.deadline": "22 days"}
        sol = app.solution
        assert sol == solved_with(path, {"budget.deadline": "22 days"})
        status = shown(app.query_one("#status"))
        assert "solving" not in status and "● 1 unsaved: budget.deadline" in status
        metrics = shown(app.query_one("#metrics"))
        assert "solving" not in metrics and human("s", sol.wall_clock_s) in metrics
        assert "solving" not in shown(app.query_one("#plot"))


@headless
async def test_a_step_from_the_solutions_own_figure_waits_for_the_first_solution(plans, gate):
    path = plans / "minimal.yaml"  # the batch is optimized: `+` starts from the solver's batch
    app = make_app(path)
    async with app.run_test(size=(100, 32)) as pilot:
        await pilot.pause()
        batch = app.query_one("#batch")
        batch.focus()
        await pilot.press("plus")
        assert batch.value == "" and app.solving  # not stepped from a guess; kept for later
        gate.set()
        await ready(pilot)
        optimized = solve(load_plan(path)).batch.sequences
        pinned = app.state.changes["run.batch"]
        sequences = int(pinned.removesuffix(" * model.seq_len"))
        # the next power of two above the optimized batch, in sequences
        assert sequences > optimized >= sequences // 2 and sequences & (sequences - 1) == 0
        assert batch.value == pinned and app.solution == solved_with(path, {"run.batch": pinned})


@headless
async def test_a_change_refused_before_the_first_answer_falls_back_to_the_plan_as_loaded(plans, gate):
    path = plans / "llama2-7b.yaml"
    app = make_app(path)
    async with app.run_test(size=(100, 32)) as pilot:
        await pilot.pause()
        await pilot.press("tab", "plus")  # GPUs 1024 -> 2048, where the pinned 1024 sequences do not divide
        assert app.query_one("#gpus").value == "2048"
        gate.set()
        await ready(pilot)
        assert app.is_running and app.launch_error is None
        assert "does not divide over 2048 data-parallel replicas" in notifications(app)[-1]
        assert app.query_one("#gpus").value == "1024"  # the values of the answer drawn
        assert not app.state.dirty and app.solution == solve(load_plan(path))


@headless
async def test_save_re_reads_the_plan_in_the_worker(plans, gate):
    path = plans / "llama2-7b.yaml"
    app = make_app(path)
    async with app.run_test(size=(100, 32)) as pilot:
        gate.set()
        await ready(pilot)
        await type_into(pilot, "gpus", "512")
        gate.clear()
        gate.given.clear()
        await pilot.press("ctrl+s")
        await pilot.pause()
        assert "gpus: 512" in path.read_text()  # written at once; the re-read plan is being solved
        assert app.solving and "solving…" in shown(app.query_one("#status"))
        assert "unsaved" not in shown(app.query_one("#status"))
        await pilot.press("f3")  # keys are handled meanwhile
        assert app.query_one(FrontierPlot).y_axis == "flops"
        gate.set()
        await ready(pilot)
        assert [p.hardware.gpus for p in gate.given] == [512]
        assert not app.state.dirty and app.solution == solve(load_plan(path))
        assert notifications(app)[-1].startswith("saved 1 value to ")
        assert "solving" not in shown(app.query_one("#status"))


def refused_plan(plans):
    """llama2-7b on 2048 GPUs: it loads, but its pinned 1024 sequences do not divide over them."""
    path = plans / "llama2-7b.yaml"
    path.write_text(path.read_text().replace("  gpus: 1024", "  gpus: 2048"))
    with pytest.raises(PlanError, match="does not divide"):
        solve(load_plan(path))
    return path


@headless
async def test_a_plan_the_solver_refuses_at_launch_closes_the_app_with_its_diagnostic(plans):
    app = make_app(refused_plan(plans))  # the files read fine
    async with app.run_test(size=(100, 32)) as pilot:
        await ready(pilot)
    assert isinstance(app.launch_error, PlanError) and app.return_code == 2
    assert "does not divide" in app.launch_error.diagnostics[0].message


def test_the_cli_reports_the_solvers_refusal_at_launch(plans, monkeypatch, capsys):
    monkeypatch.setattr(BudgetApp, "run", lambda self, **kw: App.run(self, headless=True, **kw))
    path = refused_plan(plans)
    assert cli(["tui", str(path)]) == 2
    err = capsys.readouterr().err
    assert "error[" in err and "does not divide over 2048 data-parallel replicas" in err


@headless
async def test_a_picture_drawn_again_is_the_one_for_the_values_shown(plans):
    """The plot keeps its last drawings by their inputs and redraws only the rows that changed, the
    panels only the lines that changed: stepping back shows the first picture again, and what a new
    value shows is what an app opened on it shows."""
    path = plans / "llama2-7b.yaml"
    app = make_app(path)
    async with app.run_test(size=(120, 36)) as pilot:
        await ready(pilot)
        plot = app.query_one(FrontierPlot)
        first = shown(plot)
        app.query_one("#batch").focus()
        await pilot.press("plus")  # 2048 sequences: the run moves along the frontier
        await ready(pilot)
        moved = shown(plot)
        panels = {name: shown(app.query_one(name)) for name in ("#metrics", "#limits", "#layout")}
        await pilot.press("minus")  # 1024 again
        await ready(pilot)
        assert shown(plot) == first != moved and not app.state.dirty
        await pilot.press("f2", "f2")
        await pilot.pause()
        assert shown(plot) == first

    # A new app opened on the plan with 2048 sequences draws what `moved` showed.
    path.write_text(path.read_text().replace("batch: 1024 * model.seq_len", "batch: 2048 * model.seq_len"))
    fresh = make_app(path)
    async with fresh.run_test(size=(120, 36)) as pilot:
        await ready(pilot)
        assert shown(fresh.query_one(FrontierPlot)) == moved
        assert {name: shown(fresh.query_one(name)) for name in panels} == panels
