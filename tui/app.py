"""`budgetdsl tui PLAN`: move a run along the critical-batch frontier and see the price at once.

The app holds a `WhatIf` (the plan files plus unsaved changes) and its `Solution`; every accepted
change re-solves and redraws the panels whose text changed. A slow solve (a layout search; the first,
and those after save or reset) runs in a worker thread so the controls follow the keys; only the
newest request is solved and drawn. A rejected change is not applied: the control is marked and a
notification gives the loader's or solver's message. `make_app(path)` is the one factory.
"""

from __future__ import annotations

import asyncio
import gc
import os
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, NamedTuple

from budgetdsl.tui.fields import (
    FIELDS,
    FieldError,
    changes_for,
    next_objective,
    parse,
    shown_text,
    stepped,
)
from budgetdsl.tui.messages import StepRequested, ValueCommitted
from budgetdsl.tui.state import WhatIf
from budgetdsl.tui.widgets.controls.controls_panel import ControlsPanel
from budgetdsl.tui.widgets.controls.objective_select import ObjectiveSelect
from budgetdsl.tui.widgets.controls.quantity_input import QuantityInput
from budgetdsl.tui.widgets.frontier.canvas import MARKERS
from budgetdsl.tui.widgets.frontier.curve import X_AXES, Y_AXES
from budgetdsl.tui.widgets.frontier.plot import FrontierPlot
from budgetdsl.tui.widgets.metrics.layout_panel import LayoutPanel
from budgetdsl.tui.widgets.metrics.limits_panel import LimitsPanel
from budgetdsl.tui.widgets.metrics.metrics_panel import MetricsPanel
from budgetdsl.tui.widgets.screens.conflict_screen import ConflictScreen
from budgetdsl.tui.widgets.screens.help_screen import HelpScreen
from budgetdsl.tui.widgets.screens.quit_screen import QuitScreen
from budgetdsl.tui.widgets.status_bar import StatusBar
from textual import events, on, work
from textual.app import App, ComposeResult, SystemCommand
from textual.binding import Binding
from textual.containers import Grid, Vertical, VerticalScroll
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import Footer, Select

from budgetdsl.plan.diagnostics import PlanError
from budgetdsl.plan.edit import ChangedOnDisk, EditError
from budgetdsl.solve.solution import Solution
from budgetdsl.solve.solver import SolveCache, solve

if TYPE_CHECKING:
    from budgetdsl.track.trace import RunTrace


def _first_problem(exc: PlanError) -> tuple[str, str | None]:
    """The message (all problems, first three) and the first hint of a PlanError."""
    ds = exc.diagnostics
    message = "; ".join(d.message for d in ds[:3]) + (f" (+{len(ds) - 3} more)" if len(ds) > 3 else "")
    return message, next((d.hint for d in ds if d.hint), None)


def _freeze_startup_objects() -> None:
    """Take the objects alive now out of the cycle collector's sight, once per process.

    After the imports, Textual's widgets and the first solution, tens of thousands of objects are
    alive, and every full collection walks them all, a visible pause on a keypress. They live as
    long as the app, so `gc.freeze()` (the standard library's remedy for exactly this) moves them to
    the permanent generation; what the app makes afterwards is collected as before."""
    global _FROZEN
    if not _FROZEN:
        _FROZEN = True
        gc.freeze()


_FROZEN = False


class _Request(NamedTuple):
    """A solve for the worker: the state, the control that asked (marked when refused), the
    notification title of a refusal, its generation (only the newest is drawn), and for a re-read
    (save, reset) what to notify once it is drawn."""

    state: WhatIf
    widget: Widget | None
    title: str
    generation: int
    done: str | None = None


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
        Binding("f5", "toggle_lower", "Layout", show=False, id="layout"),
        Binding("l", "toggle_lower", "Layout", show=False, id="layout.letter"),
        Binding("ctrl+q", "quit", "Quit", priority=True, id="quit"),
        Binding("q", "quit", "Quit", show=False, id="quit.letter"),
    ]

    # A re-solve runs inline (the simplest, and the redraw is exact) while the last one took less
    # than this; past it, in a worker thread (bench/bench_tui.py measures both, docs/tui.md).
    SOLVE_INLINE_S = 0.05

    not_interactive = False  # run() found no terminal to draw on or to read keys from

    def run(self, *args, headless: bool = False, **kwargs):  # type: ignore[override]
        """Textual reads keys on stdin and draws on stderr: without a terminal on both (CI, a pipe,
        stdin from /dev/null) the app would draw escape codes and wait forever for keys; it does
        not start, and `budgetdsl tui` says why (exit 2)."""
        import sys

        streams = (sys.__stdin__, sys.__stderr__)
        if not headless and not all(s is not None and s.isatty() for s in streams):
            self.not_interactive = True
            return None
        return super().run(*args, headless=headless, **kwargs)

    def __init__(self, state: WhatIf, solution: Solution | None = None, markers: str = "braille",
                 keymap: dict[str, str] | None = None, solve_s: float = 0.0, run: RunTrace | None = None) -> None:
        super().__init__()
        self.run_trace = run  # a measured run drawn beside the plan (`budgetdsl tui PLAN --run LOGS`)
        self.state = state  # the state the shown solution belongs to
        # None until the first solve (in the worker, from on_mount) has come back
        self.solution: Solution | None = solution
        self._solve_s = solve_s  # how long the last solve took
        # what successive solves share (cost models, the search to replay): one solve at a time
        # uses it, inline or in the worker (`_pending` holds inline solves back while it runs)
        self._cache = SolveCache()
        self._pending: _Request | None = None  # the newest request, waiting for (or in) the worker
        self._generation = 0
        self._worker_busy = False
        # Steps that start from the solution's own figures, pressed before the first solution came
        self._deferred: list[Callable[[], None]] = []
        # The solver's refusal of the plan as loaded: the app exits and `budgetdsl tui` reports it
        self.launch_error: PlanError | None = None
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
            yield FrontierPlot(self._markers, run=self.run_trace, id="plot")
            # Under the plot (narrow: one at a time, F5 switches) or in the third column (wide: both)
            with Vertical(id="lower", classes="-show-limits"):
                with VerticalScroll(id="limits-box"):
                    yield LimitsPanel(id="limits")
                with VerticalScroll(id="layout-box"):
                    yield LayoutPanel(id="layout")
        yield Footer(compact=True)

    def on_mount(self) -> None:
        self.query_one("#controls").border_title = "what if"
        self.query_one("#metrics-box").border_title = "run"
        self.query_one("#limits-box").border_title = "limits"
        self.query_one("#layout-box").border_title = "layout & Pareto front"
        self._lower_titles()
        if self.solution is None:  # the first solve: in the worker, the panels say `solving…`
            self._request(_Request(self.state, None, "cannot solve the plan", 0))
        self._show()
        self.query_one(FrontierPlot).focus()  # letters are commands at once; Tab enters the controls
        for problem in self._keymap_problems:
            self.notify(problem, title="keymap entry ignored", severity="warning", timeout=10, markup=False)

    @property
    def latest(self) -> WhatIf:
        """The newest values: those being solved, else the shown state."""
        return self._pending.state if self._pending is not None else self.state

    @property
    def solving(self) -> bool:
        """A re-solve is under way in the worker; the panels still show the previous solution."""
        return self._pending is not None

    async def wait_solved(self) -> None:
        """Return once no solve is under way and the newest answer is drawn (or refused)."""
        while self.solving:
            await self.workers.wait_for_complete()
            await asyncio.sleep(0)

    def _show(self) -> None:
        """Show the controls from the newest values and the rest from the solution (None: each
        panel says `solving…`); a panel whose text is unchanged is not redrawn."""
        self._show_controls()
        sol = self.solution
        self.query_one(MetricsPanel).show(sol)
        self.query_one(LimitsPanel).show(sol)
        self.query_one(LayoutPanel).show(sol)
        self.query_one(FrontierPlot).show(self.state.plan, sol)

    def _show_controls(self) -> None:
        state, sol = self.latest, self.solution
        texts = {key: shown_text(field, state, sol) for key, field in FIELDS.items()}
        notes = {}
        if state.raw("noise.b_crit") is None:
            notes["b_crit"] = " (from plan)"
        if isinstance(state.raw("hardware.gpus"), dict) and sol is not None and texts["gpus"] == str(sol.gpus):
            notes["gpus"] = " (range)"
        self.query_one(ControlsPanel).show(texts, str(state.plan.objective), notes)
        self.query_one(StatusBar).show((state.plan.name, state.path, sol, state.changed_keys(), self.solving))

    # -- applying changes -------------------------------------------------------------------------

    def _reject(self, widget: Widget | None, title: str, message: str, hint: str | None) -> None:
        if widget is not None:
            widget.add_class("error")
        self.notify(message + (f"\nhint: {hint}" if hint else ""), title=title, severity="error",
                    timeout=8, markup=False)

    def _solve(self, state: WhatIf) -> Solution:
        start = time.perf_counter()
        solution = solve(state.plan, self._cache)
        self._solve_s = time.perf_counter() - start
        return solution

    def _apply(self, changes: dict, widget: Widget | None, title: str) -> bool:
        """Re-solve with `changes`; keep the old state and say why when they are rejected.

        Inline while solves are quick (True: applied); else the request goes to the worker (True:
        accepted by the plan language; the solver's verdict is drawn, or notified, when it comes)."""
        try:
            state = self.latest.with_changes(changes)
            if self._pending is not None or self._solve_s >= self.SOLVE_INLINE_S:
                self._request(_Request(state, widget, title, 0))
                return True
            solution = self._solve(state)
        except PlanError as exc:
            self._reject(widget, title, *_first_problem(exc))
            return False
        self._commit(state, solution, widget)
        return True

    def _commit(self, state: WhatIf, solution: Solution, widget: Widget | None) -> None:
        self.state, self.solution = state, solution
        if widget is not None:
            widget.remove_class("error")
        self._show()

    def _request(self, request: _Request) -> None:
        """Solve `request.state` in the worker: at once when it is idle, else after the solve
        under way (whose answer is then dropped: only the newest request is drawn)."""
        self._generation += 1
        self._pending = request._replace(generation=self._generation)
        self._show_controls()
        if not self._worker_busy:
            self._start_worker()

    def _start_worker(self) -> None:
        assert self._pending is not None
        self._worker_busy = True
        self._solve_in_thread(self._pending.state, self._pending.generation)

    @work(thread=True, group="solve")
    def _solve_in_thread(self, state: WhatIf, generation: int) -> None:
        start = time.perf_counter()
        try:
            solution, error = solve(state.plan, self._cache), None
        except PlanError as exc:
            solution, error = None, exc
        self.call_from_thread(self._solved, generation, solution, error, time.perf_counter() - start)

    def _solved(self, generation: int, solution: Solution | None, error: PlanError | None,
                seconds: float) -> None:
        self._worker_busy = False
        if self.solution is not None:  # the first solve pays for the solver's imports: not timed
            self._solve_s = seconds
        if self._pending is None:
            return
        state, widget, title, newest, done = self._pending
        if generation != newest:  # a newer request came while this one was solved
            self._start_worker()
            return
        self._pending = None
        if error is not None:
            if self.solution is None and state is self.state:  # the plan as loaded: nothing to show
                self._deferred.clear()
                self.launch_error = error
                self.exit(return_code=2)
                return
            if self.solution is None:  # a change made before the first answer: the plan as loaded
                self._request(_Request(self.state, None, "cannot solve the plan", 0))
            else:
                self._show_controls()  # back to the values the shown solution belongs to
            self._reject(widget, title, *_first_problem(error))
            return
        assert solution is not None
        first = self.solution is None
        if done is not None:  # a re-read: every refusal shown before is moot
            for marked in self.query(".error"):
                marked.remove_class("error")
        self._commit(state, solution, widget)
        if done is not None:
            self.notify(done, timeout=4, markup=False)
        if first:
            _freeze_startup_objects()
        deferred, self._deferred = self._deferred, []
        for step in deferred:
            step()

    def apply_text(self, key: str, text: str) -> bool:
        """Set control `key` to the typed `text` (plan language); True when it was applied."""
        field = FIELDS[key]
        widget = self.query_one(f"#{key}", QuantityInput)
        title = f"{field.label} not changed"
        try:
            parse(field, text, self.latest.plan)
        except FieldError as exc:
            self._reject(widget, title, exc.message, exc.hint)
            return False
        if text.strip() == shown_text(field, self.latest, self.solution).strip():
            widget.set_committed(widget.committed)  # unchanged: just clear an error
            return True
        if key == "b_crit" and self.latest.file_raw("noise.b_crit") is None:
            self.notify("B_crit is now declared; saving replaces the plan's noise source", timeout=4)
        return self._apply(changes_for(field, text, self.latest), widget, title)

    @on(ValueCommitted)
    def _committed(self, event: ValueCommitted) -> None:
        self.apply_text(event.field, event.text)

    @on(StepRequested)
    def _step(self, event: StepRequested) -> None:
        if event.field == "objective":
            select = self.query_one(ObjectiveSelect)
            select.value = next_objective(str(select.value), event.direction)  # posts Changed
            return
        field = FIELDS[event.field]
        if self.solution is None and not shown_text(field, self.latest, None).strip():
            # It steps from the solution's own figure (the optimized batch, the chosen GPU count):
            # taken once the first solution is here, not lost.
            self._deferred.append(lambda: self._step(event))
            return
        try:
            text = stepped(field, self.latest, self.solution, event.direction)
        except FieldError as exc:
            self._reject(event.widget, f"{FIELDS[event.field].label} not stepped", exc.message, exc.hint)
            return
        self.apply_text(event.field, text)

    @on(Select.Changed, "#objective")
    def _objective(self, event: Select.Changed) -> None:
        # A Changed for a value the select no longer holds is stale: the select's first value
        # (balanced) announces itself after `show` has set the plan's own objective, and must not
        # change it (a plan with objective min_cost opened as `1 unsaved: objective`).
        if event.value != event.select.value:
            return
        if event.value != str(self.latest.plan.objective):
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

    def _lower_titles(self, width: int | None = None) -> None:
        """Name F5 in the border of the box under the plot (narrow: it shows one of the two)."""
        both = (self.size.width if width is None else width) >= self.HORIZONTAL_BREAKPOINTS[-1][0]
        showing_layout = self.query_one("#lower").has_class("-show-layout")
        self.query_one("#limits-box").border_subtitle = "" if both or showing_layout else "F5 layout"
        self.query_one("#layout-box").border_subtitle = "F5 limits" if showing_layout and not both else ""

    def on_resize(self, event: events.Resize) -> None:
        self._lower_titles(event.size.width)

    def action_toggle_lower(self) -> None:
        """Under the plot, switch between the limits and the layout & front (narrow terminals; from
        140 columns both are shown, one above the other)."""
        lower = self.query_one("#lower")
        lower.toggle_class("-show-limits", "-show-layout")
        self._lower_titles()

    def action_toggle_batch(self) -> None:
        run = self.latest.plan.run
        if run is not None and run.batch is not None:
            self.apply_text("batch", "")
        elif self.solution is None:  # pinned at the optimized batch once it is known
            self._deferred.append(self.action_toggle_batch)
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
        state = self.latest  # the newest values, even while they are being solved
        if not state.dirty:
            self.notify("nothing to save", timeout=3)
            return True
        count = len(state.changes)
        try:
            files = state.save(overwrite=overwrite)
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
        """Re-read the files; the plan is solved in the worker (a solve under way is dropped when
        it comes back), and `done` is notified once its answer is drawn."""
        try:
            state = self.state.reset()
        except (PlanError, OSError) as exc:
            message = _first_problem(exc)[0] if isinstance(exc, PlanError) else str(exc)
            self.notify(message, title="cannot re-read the plan", severity="error", timeout=10,
                        markup=False)
            return
        self._request(_Request(state, None, "cannot re-read the plan", 0, done))

    def _resolve_conflict(self, choice: str | None) -> None:
        if choice == "overwrite":
            self.save(overwrite=True)
        elif choice == "reload":
            self.action_reset()

    def action_save(self) -> None:
        self.save()

    def action_reset(self) -> None:
        n = len(self.latest.changes)
        self._reload(f"reset from {os.path.basename(self.state.path)}"
                     + (f": {n} unsaved change{'s' * (n != 1)} dropped" if n else ""))

    async def action_quit(self) -> None:
        if not self.latest.dirty:
            self.exit()
            return

        def chosen(choice: str | None) -> None:
            if choice == "discard" or (choice == "save" and self.save()):
                self.exit()

        if not isinstance(self.screen, QuitScreen):
            self.push_screen(QuitScreen(self.latest.changed_keys()), chosen)

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
        yield SystemCommand("Limits / layout", "Under the plot: the limits, or the layout search and "
                            "the Pareto front", self.action_toggle_lower)
        yield SystemCommand("Help", "Keys and how to type values", self.action_help)


def make_app(path: str | os.PathLike[str], markers: str = "braille",
             keymap: dict[str, str] | None = None, run: RunTrace | None = None) -> BudgetApp:
    """The app on plan file `path`. Raises PlanError (located) or OSError when it cannot be read,
    before any terminal is touched; the plan is solved in the app's worker once it runs (when the
    solver refuses it, the app exits with `launch_error` set). `keymap` maps binding ids to keys;
    without it the keymap file is read (budgetdsl.tui.keymap). `run`: a measured run the plot draws
    beside the plan (budgetdsl.track.trace)."""
    return BudgetApp(WhatIf.load(path), None, markers, keymap, run=run)


def binding_ids() -> dict[str, str]:
    """Every binding id of the app and its widgets, with what the binding does (docs/tui.md)."""
    out = {}
    for cls in (BudgetApp, QuantityInput, ObjectiveSelect, FrontierPlot, HelpScreen, QuitScreen):
        for b in cls.BINDINGS:
            if isinstance(b, Binding) and b.id:
                out[b.id] = b.description or b.action
    return out
