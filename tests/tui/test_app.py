"""The app driven headless as a person would: change GPUs, deadline and batch, compare what it
shows with `budgetdsl plan` on the same values, save (only the changed lines differ), reload."""

import difflib
import io
import json
from contextlib import redirect_stdout

from budgetdsl.tui.app import make_app
from budgetdsl.tui.widgets.controls.quantity_input import QuantityInput
from budgetdsl.tui.widgets.frontier.plot import FrontierPlot
from budgetdsl.tui.widgets.screens.help_screen import HelpScreen
from budgetdsl.tui.widgets.screens.quit_screen import QuitScreen
from tui_helpers import PLAN, headless, notifications, ready, shown, type_into

from budgetdsl.cli import main as cli
from budgetdsl.plan.loader import load_plan
from budgetdsl.quantities.humanize import human
from budgetdsl.solve.solver import solve


def changed_lines(before: str, after: str) -> list[str]:
    return [line for line in difflib.unified_diff(before.splitlines(), after.splitlines(), lineterm="", n=0)
            if line[:1] in "+-" and not line.startswith(("+++", "---"))]


def budgetdsl_plan_json(path) -> dict:
    out = io.StringIO()
    with redirect_stdout(out):
        assert cli(["plan", str(path), "--format", "json"]) in (0, 1)
    return json.loads(out.getvalue())


@headless
async def test_change_gpus_deadline_and_batch_then_save_and_reload(plans):
    path = plans / "llama2-7b.yaml"
    before, base_before = path.read_text(), (plans / "base" / "a100-cluster.yaml").read_text()
    app = make_app(path)
    async with app.run_test(size=(100, 30)) as pilot:
        await ready(pilot)
        await pilot.pause()
        await pilot.press("tab")  # from the plot, where the app opens, into the GPU count
        await pilot.pause()
        assert app.focused.id == "gpus"
        await pilot.press("minus")  # 1024 -> 512 GPUs
        await pilot.pause()
        await type_into(pilot, "deadline", "25 days")
        app.query_one("#batch").focus()
        await pilot.press("minus")  # 1024 -> 512 sequences
        await pilot.pause()
        assert dict(app.state.changes) == {"hardware.gpus": 512, "budget.deadline": "25 days",
                                           "run.batch": "512 * model.seq_len"}
        assert app.query_one("#gpus", QuantityInput).value == "512"
        assert app.query_one("#batch", QuantityInput).value == "512 * model.seq_len"
        sol = app.solution
        assert sol.gpus == 512 and sol.batch.sequences == 512 and sol.feasible

        # What the metrics panel shows is what `budgetdsl plan` says for the same values.
        metrics = shown(app.query_one("#metrics"))
        assert f"{sol.steps:,}" in metrics and human("s", sol.wall_clock_s) in metrics
        assert human("FLOP", sol.flops) in metrics and human("USD", sol.usd) in metrics
        assert "● 3 unsaved" in shown(app.query_one("#status"))

        await pilot.press("ctrl+s")
        await pilot.pause()
        assert not app.state.dirty
        assert "saved 3 values" in notifications(app)[-1]
        assert "unsaved" not in shown(app.query_one("#status"))
        shown_after_reload = app.solution

    assert changed_lines(before, path.read_text()) == [
        "-  gpus: 1024", "+  gpus: 512",
        "-  deadline: 21 days", "+  deadline: 25 days",
        "-  batch: 1024 * model.seq_len   # the published configuration, evaluated rather than optimized",
        "+  batch: 512 * model.seq_len    # the published configuration, evaluated rather than optimized",
    ]
    assert (plans / "base" / "a100-cluster.yaml").read_text() == base_before
    cli_json = budgetdsl_plan_json(path)
    assert cli_json == sol.model_dump(mode="json")
    assert shown_after_reload == solve(load_plan(path))


@headless
async def test_a_value_from_the_base_is_saved_in_the_base(plans):
    path, base = plans / "llama2-7b.yaml", plans / "base" / "a100-cluster.yaml"
    before, base_before = path.read_text(), base.read_text()
    app = make_app(path)
    async with app.run_test(size=(100, 30)) as pilot:
        await ready(pilot)
        app.query_one("#objective").focus()
        await pilot.press("plus")  # balanced -> min_time
        await pilot.pause()
        assert dict(app.state.changes) == {"objective": "min_time"}
        assert app.solution.objective == "min_time"
        await pilot.press("ctrl+s")
        await pilot.pause()
    assert path.read_text() == before
    assert changed_lines(base_before, base.read_text()) == ["-objective: balanced", "+objective: min_time"]


@headless
async def test_invalid_input_is_refused_with_a_reason_never_a_crash(plans):
    app = make_app(plans / "llama2-7b.yaml")
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        solution = app.solution
        await type_into(pilot, "deadline", "14 GiB")
        deadline = app.query_one("#deadline", QuantityInput)
        assert deadline.has_class("error")
        assert notifications(app)[-1] == "deadline: expected a duration, got a data size\nhint: e.g. 21 days"
        assert app.solution is solution and not app.state.dirty
        await pilot.press("escape")  # back to the committed value
        assert deadline.value == "21 days" and not deadline.has_class("error")

        # The solver's own refusal: 2048 GPUs do not divide the pinned 1024 sequences.
        app.query_one("#gpus").focus()
        await pilot.press("plus")
        await pilot.pause()
        assert app.query_one("#gpus").has_class("error")
        assert notifications(app)[-1].startswith(
            "run.batch (1024 sequences) does not divide over 2048 data-parallel replicas")
        assert app.solution is solution

        await type_into(pilot, "gpus", "1001")
        assert "do not fill whole nodes of 8" in notifications(app)[-1]
        await type_into(pilot, "batch", "2 * model.nonsense")
        assert app.query_one("#batch").has_class("error")
        await type_into(pilot, "gpus", "1024")  # the file's value again: the error clears
        assert not app.query_one("#gpus").has_class("error") and not app.state.dirty
        assert app.is_running


@headless
async def test_plus_types_a_character_while_editing(plans):
    app = make_app(plans / "llama2-7b.yaml")
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        app.query_one("#deadline").focus()
        await pilot.press("end", "space", "plus", "space", "1", "2", "h", "enter")
        await pilot.pause()
        assert app.state.changes == {"budget.deadline": "21 days + 12h"}
        assert app.state.plan.budget.deadline == 21.5 * 86400


@headless
async def test_infeasible_shows_the_relaxations(plans):
    app = make_app(plans / "llama2-7b.yaml")
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        await type_into(pilot, "deadline", "5 days")
        assert not app.solution.feasible
        assert "INFEASIBLE" in shown(app.query_one("#status"))
        limits = shown(app.query_one("#limits"))
        assert " over" in limits and "deadline ≥ 7.55 days (now 5 days)" in limits


@headless
async def test_pin_and_unpin_the_batch(plans):
    app = make_app(plans / "llama2-7b.yaml")
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        await pilot.press("ctrl+b")
        await pilot.pause()
        assert app.state.changes == {"run.batch": None}
        assert app.query_one("#batch", QuantityInput).value == ""
        assert app.solution.status == "optimal"
        optimized = app.solution.batch.sequences
        await pilot.press("ctrl+b")
        await pilot.pause()
        assert app.state.plan.run.batch == optimized * 4096


@headless
async def test_reset_drops_the_changes(plans):
    app = make_app(plans / "llama2-7b.yaml")
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        await type_into(pilot, "flops", "1.5e23")
        assert app.state.dirty
        await pilot.press("ctrl+r")
        await pilot.pause()
        assert not app.state.dirty and app.query_one("#flops", QuantityInput).value == "1.2e23"
        assert "1 unsaved change dropped" in notifications(app)[-1]


@headless
async def test_quit_asks_about_unsaved_changes(plans):
    path = plans / "llama2-7b.yaml"
    before = path.read_text()
    app = make_app(path)
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        await type_into(pilot, "b_crit", "4M")
        await pilot.press("ctrl+q")
        await pilot.pause()
        assert isinstance(app.screen, QuitScreen) and app.is_running
        await pilot.press("escape")
        await pilot.pause()
        assert not isinstance(app.screen, QuitScreen) and app.state.dirty
        await pilot.press("ctrl+q")
        await pilot.pause()
        await pilot.press("s")
        await pilot.pause()
    assert not app.is_running
    assert changed_lines(before, path.read_text()) == [
        "-  b_crit: 3M                    # tokens; Kaplan et al. 2020 give ~2-4M near Llama 2's final loss",
        "+  b_crit: 4M                    # tokens; Kaplan et al. 2020 give ~2-4M near Llama 2's final loss"]


@headless
async def test_quit_discarding(plans):
    path = plans / "llama2-7b.yaml"
    before = path.read_text()
    app = make_app(path)
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        await type_into(pilot, "gpus", "512")
        await pilot.press("ctrl+q")
        await pilot.pause()
        await pilot.press("d")
        await pilot.pause()
    assert not app.is_running and path.read_text() == before


@headless
async def test_help_and_plot_toggles():
    app = make_app(PLAN)
    async with app.run_test(size=(100, 30)) as pilot:
        await ready(pilot)
        await pilot.press("f1")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        await pilot.press("escape")
        await pilot.pause()
        plot = app.query_one(FrontierPlot)
        assert plot.border_title == "frontier: tokens vs steps"
        await pilot.press("f2", "f3", "f4")
        await pilot.pause()
        assert (plot.x_axis, plot.y_axis, plot.markers) == ("wall", "flops", "ascii")
        assert plot.border_title == "frontier: FLOPs vs wall clock"
        text = shown(plot)
        assert "@" in text and not any(0x2800 <= ord(c) <= 0x28FF for c in text)
        plot.focus()
        await pilot.press("x", "y", "m")  # letter keys when no input has focus
        await pilot.pause()
        assert (plot.x_axis, plot.y_axis, plot.markers) == ("steps", "tokens", "braille")


@headless
async def test_command_palette_offers_the_app_commands():
    app = make_app(PLAN)
    async with app.run_test(size=(100, 30)) as pilot:
        await ready(pilot)
        titles = [c.title for c in app.get_system_commands(app.screen)]
        for title in ("Save plan", "Reset from file", "Pin / optimize batch", "Plot: steps / wall clock",
                      "Plot: tokens / FLOPs", "Plot: braille / ASCII markers", "Help"):
            assert title in titles


def test_the_cli_reports_a_broken_plan_before_taking_the_terminal(tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\nhardware: {gpus: 8}\n")
    assert cli(["tui", str(bad)]) == 2
    assert "error[" in capsys.readouterr().err
    assert cli(["tui", str(tmp_path / "missing.yaml")]) == 2


def test_budgetdsl_does_not_import_textual():
    import subprocess
    import sys

    code = ("import sys, budgetdsl.cli as c; c.build_parser(); "
            "import budgetdsl.commands.tui; print('textual' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
