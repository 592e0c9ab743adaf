"""`budgetdsl tui PLAN`: move a run along the critical-batch frontier and see the price at once.

The app holds a `WhatIf` (the plan files plus unsaved changes) and the `Solution` of its plan;
every accepted change re-solves with `budgetdsl.solver.solve` and redraws every panel. A change
the plan language or the solver rejects is not applied: the control gets the `error` class and a
notification says why (the loader's or the solver's own message and hint). Save writes the changes
with `budgetdsl.plan_edit` as a minimal in-place diff and re-reads the files.

`make_app(path)` is the one factory, shared by the CLI and the tests.
"""

from __future__ import annotations

import os
from typing import Iterable

from textual import on
from textual.app import App, ComposeResult, SystemCommand
from textual.binding import Binding
from textual.containers import Grid, Vertical, VerticalScroll
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import Footer, Select

from budgetdsl.diagnostics import PlanError
from budgetdsl.plan_edit import ChangedOnDisk, EditError
from budgetdsl.solution import Solution
from budgetdsl.solver import solve
from budgetdsl.tui.fields import FIELDS, FieldError, changes_for, next_objective, parse, shown_text, stepped
from budgetdsl.tui.messages import StepRequested, ValueCommitted
from budgetdsl.tui.state import WhatIf
from budgetdsl.tui.widgets.controls.controls_panel import ControlsPanel
from budgetdsl.tui.widgets.controls.objective_select import ObjectiveSelect
from budgetdsl.tui.widgets.controls.quantity_input import QuantityInput
from budgetdsl.tui.widgets.frontier.canvas import MARKERS
from budgetdsl.tui.widgets.frontier.curve import X_AXES, Y_AXES
from budgetdsl.tui.widgets.frontier.plot import FrontierPlot
from budgetdsl.tui.widgets.metrics.limits_panel import LimitsPanel
from budgetdsl.tui.widgets.metrics.metrics_panel import MetricsPanel
from budgetdsl.tui.widgets.screens.conflict_screen import ConflictScreen
from budgetdsl.tui.widgets.screens.help_screen import HelpScreen
from budgetdsl.tui.widgets.screens.quit_screen import QuitScreen
from budgetdsl.tui.widgets.status_bar import StatusBar


def _first_problem(exc: PlanError) -> tuple[str, str | None]:
    """The message (all problems, first three) and the first hint of a PlanError."""
    ds = exc.diagnostics
    message = "; ".join(d.message for d in ds[:3]) + (f" (+{len(ds) - 3} more)" if len(ds) > 3 else "")
    return message, next((d.hint for d in ds if d.hint), None)


def _display(path: str) -> str:
    """A path relative to the working directory when it lies below it."""
    rel = os.path.relpath(path)
    return path if rel.startswith("..") else rel


class BudgetApp(App[None]):
    CSS_PATH = "app.tcss"
    TITLE = "budgetdsl"
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (140, "-wide")]
    # Every binding has an id, so a keymap can move it to other keys (budgetdsl.tui.keymap; the
    # ids are listed in docs/tui.md). Single letters act only where no field has focus: a focused
    # Input types them, and Esc leaves it (as in k9s, lazygit, htop).
    BINDINGS = [
        Binding("ctrl+s", "save", "Save", id="save"),
        Binding("ctrl+r", "reset", "Reset", id="reset"),
        Binding("ctrl+b", "toggle_batch", "Pin", id="pin-batch"),
        Binding("f1", "help", "Help", id="help"),
        Binding("question_mark", "help", "Help", show=False, id="help.letter"),
        # F2-F4 are named in the plot's border (its subtitle), which leaves the footer room for
        # `esc Leave field` at 80 columns
        Binding("f2", "toggle_x", "x-axis", show=False, id="plot.x-axis"),
        Binding("f3", "toggle_y", "y-axis", show=False, id="plot.y-axis"),
        Binding("f4", "toggle_markers", "Marks", show=False, id="plot.markers"),
        Binding("ctrl+q", "quit", "Quit", priority=True, id="quit"),
        Binding("q", "quit", "Quit", show=False, id="quit.letter"),
    ]

    def __init__(self, state: WhatIf, solution: Solution, markers: str = "braille",
                 keymap: dict[str, str] | None = None) -> None:
        super().__init__()
        self.state = state
        self.solution = solution
        self._markers = markers if markers in MARKERS else "braille"
        self._keymap_problems: list[str] = []
        if keymap is None:
            from budgetdsl.tui.keymap import load_keymap

            keymap, self._keymap_problems = load_keymap()
        else:
            from budgetdsl.tui.keymap import check_keymap

            keymap, self._keymap_problems = check_keymap(keymap)
        if keymap:
            self.set_keymap(keymap)

    # -- layout -----------------------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        yield StatusBar(id="status")
        with Grid(id="main"):
            with Vertical(id="side"):
                yield ControlsPanel(id="controls")
                with VerticalScroll(id="metrics-box"):
                    yield MetricsPanel(id="metrics")
            yield FrontierPlot(self._markers, id="plot")
            with VerticalScroll(id="limits-box"):
                yield LimitsPanel(id="limits")
        yield Footer(compact=True)

    def on_mount(self) -> None:
        self.query_one("#controls").border_title = "what if"
        self.query_one("#metrics-box").border_title = "run"
        self.query_one("#limits-box").border_title = "limits"
        self._show()
        self.query_one("#gpus", QuantityInput).focus()
        for problem in self._keymap_problems:
            self.notify(problem, title="keymap entry ignored", severity="warning", timeout=10, markup=False)

    def _show(self) -> None:
        """Redraw every panel from the state and its solution."""
        state, sol = self.state, self.solution
        texts = {key: shown_text(field, state, sol) for key, field in FIELDS.items()}
        notes = {}
        if state.raw("noise.b_crit") is None:
            notes["b_crit"] = " (from plan)"
        if isinstance(state.raw("hardware.gpus"), dict) and texts["gpus"] == str(sol.gpus):
            notes["gpus"] = " (range)"
        self.query_one(ControlsPanel).show(texts, str(state.plan.objective), notes)
        self.query_one(MetricsPanel).show(sol)
        self.query_one(LimitsPanel).show(sol)
        self.query_one(FrontierPlot).show(state.plan, sol)
        self.query_one(StatusBar).show((state.plan.name, state.path, sol, state.changed_keys()))

    # -- applying changes -------------------------------------------------------------------------

    def _reject(self, widget: Widget | None, title: str, message: str, hint: str | None) -> None:
        if widget is not None:
            widget.add_class("error")
        self.notify(message + (f"\nhint: {hint}" if hint else ""), title=title, severity="error",
                    timeout=8, markup=False)

    def _apply(self, changes: dict, widget: Widget | None, title: str) -> bool:
        """Re-solve with `changes`; keep the old state and say why when they are rejected."""
        try:
            state = self.state.with_changes(changes)
            solution = solve(state.plan)
        except PlanError as exc:
            self._reject(widget, title, *_first_problem(exc))
            return False
        self.state, self.solution = state, solution
        if widget is not None:
            widget.remove_class("error")
        self._show()
        return True

    def apply_text(self, key: str, text: str) -> bool:
        """Set control `key` to the typed `text` (plan language); True when it was applied."""
        field = FIELDS[key]
        widget = self.query_one(f"#{key}", QuantityInput)
        title = f"{field.label} not changed"
        try:
            parse(field, text, self.state.plan)
        except FieldError as exc:
            self._reject(widget, title, exc.message, exc.hint)
            return False
        if text.strip() == shown_text(field, self.state, self.solution).strip():
            widget.set_committed(widget.committed)  # unchanged: just clear an error
            return True
        if key == "b_crit" and self.state.file_raw("noise.b_crit") is None:
            self.notify("B_crit is now declared; saving replaces the plan's noise source", timeout=4)
        return self._apply(changes_for(field, text, self.state), widget, title)

    @on(ValueCommitted)
    def _committed(self, event: ValueCommitted) -> None:
        self.apply_text(event.field, event.text)

    @on(StepRequested)
    def _step(self, event: StepRequested) -> None:
        if event.field == "objective":
            select = self.query_one(ObjectiveSelect)
            select.value = next_objective(str(select.value), event.direction)  # posts Changed
            return
        try:
            text = stepped(FIELDS[event.field], self.state, self.solution, event.direction)
        except FieldError as exc:
            self._reject(event.widget, f"{FIELDS[event.field].label} not stepped", exc.message, exc.hint)
            return
        self.apply_text(event.field, text)

    @on(Select.Changed, "#objective")
    def _objective(self, event: Select.Changed) -> None:
        if event.value != str(self.state.plan.objective):
            self._apply({"objective": str(event.value)}, event.select, "objective not changed")

    # -- actions ----------------------------------------------------------------------------------

    def action_toggle_x(self) -> None:
        plot = self.query_one(FrontierPlot)
        plot.x_axis = X_AXES[(X_AXES.index(plot.x_axis) + 1) % len(X_AXES)]

    def action_toggle_y(self) -> None:
        plot = self.query_one(FrontierPlot)
        plot.y_axis = Y_AXES[(Y_AXES.index(plot.y_axis) + 1) % len(Y_AXES)]

    def action_toggle_markers(self) -> None:
        plot = self.query_one(FrontierPlot)
        plot.markers = MARKERS[(MARKERS.index(plot.markers) + 1) % len(MARKERS)]

    def action_toggle_batch(self) -> None:
        run = self.state.plan.run
        if run is not None and run.batch is not None:
            self.apply_text("batch", "")
        elif self.solution.batch.sequences:
            self.apply_text("batch", f"{self.solution.batch.sequences} * model.seq_len")
        else:
            self.notify("no optimized batch to pin: the plan is infeasible", severity="warning")

    def action_help(self) -> None:
        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen())

    def save(self, overwrite: bool = False) -> bool:
        """Write the changes; re-read the files. True when saved (or nothing to save).

        When a file changed on disk since it was loaded, nothing is written: a dialog offers to
        reload it (dropping the unsaved changes) or to overwrite it (`overwrite=True`)."""
        if not self.state.dirty:
            self.notify("nothing to save", timeout=3)
            return True
        count = len(self.state.changes)
        try:
            files = self.state.save(overwrite=overwrite)
        except ChangedOnDisk as exc:
            self.notify(str(exc), title="not saved: changed on disk", severity="warning", timeout=10,
                        markup=False)
            if not isinstance(self.screen, ConflictScreen):
                self.push_screen(ConflictScreen([_display(f) for f in exc.files]), self._resolve_conflict)
            return False
        except (EditError, PlanError, OSError) as exc:
            message = _first_problem(exc)[0] if isinstance(exc, PlanError) else str(exc)
            self.notify(message, title="not saved", severity="error", timeout=10, markup=False)
            return False
        self._reload(f"saved {count} value{'s' * (count != 1)} to "
                     + ", ".join(_display(f) for f in files))
        return True

    def _reload(self, done: str) -> None:
        try:
            state = self.state.reset()
            solution = solve(state.plan)
        except (PlanError, OSError) as exc:
            message = _first_problem(exc)[0] if isinstance(exc, PlanError) else str(exc)
            self.notify(message, title="cannot re-read the plan", severity="error", timeout=10,
                        markup=False)
            return
        self.state, self.solution = state, solution
        for widget in self.query(".error"):
            widget.remove_class("error")
        self._show()
        self.notify(done, timeout=4, markup=False)

    def _resolve_conflict(self, choice: str | None) -> None:
        if choice == "overwrite":
            self.save(overwrite=True)
        elif choice == "reload":
            self.action_reset()

    def action_save(self) -> None:
        self.save()

    def action_reset(self) -> None:
        n = len(self.state.changes)
        self._reload(f"reset from {os.path.basename(self.state.path)}"
                     + (f": {n} unsaved change{'s' * (n != 1)} dropped" if n else ""))

    async def action_quit(self) -> None:
        if not self.state.dirty:
            self.exit()
            return

        def chosen(choice: str | None) -> None:
            if choice == "discard" or (choice == "save" and self.save()):
                self.exit()

        if not isinstance(self.screen, QuitScreen):
            self.push_screen(QuitScreen(self.state.changed_keys()), chosen)

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        yield SystemCommand("Save plan", "Write the changes into the plan file(s) as a minimal diff",
                            self.action_save)
        yield SystemCommand("Reset from file", "Re-read the plan, dropping unsaved changes", self.action_reset)
        yield SystemCommand("Pin / optimize batch", "Pin the batch at the optimized value, or unpin it",
                            self.action_toggle_batch)
        yield SystemCommand("Plot: steps / wall clock", "Toggle the plot's x axis", self.action_toggle_x)
        yield SystemCommand("Plot: tokens / FLOPs", "Toggle the plot's y axis", self.action_toggle_y)
        yield SystemCommand("Plot: braille / ASCII markers", "For fonts without braille",
                            self.action_toggle_markers)
        yield SystemCommand("Help", "Keys and how to type values", self.action_help)


def make_app(path: str | os.PathLike[str], markers: str = "braille",
             keymap: dict[str, str] | None = None) -> BudgetApp:
    """The app on plan file `path`. Raises PlanError (located) or OSError when it cannot be read
    or solved, before any terminal is touched. `keymap` maps binding ids to keys; without it the
    keymap file is read (budgetdsl.tui.keymap)."""
    state = WhatIf.load(path)
    return BudgetApp(state, solve(state.plan), markers, keymap)


def binding_ids() -> dict[str, str]:
    """Every binding id of the app and its widgets, with what the binding does (docs/tui.md)."""
    out = {}
    for cls in (BudgetApp, QuantityInput, ObjectiveSelect, FrontierPlot, HelpScreen, QuitScreen):
        for b in cls.BINDINGS:
            if isinstance(b, Binding) and b.id:
                out[b.id] = b.description or b.action
    return out
