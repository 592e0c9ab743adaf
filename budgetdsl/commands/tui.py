"""`budgetdsl tui PLAN`: the terminal UI (the `tui` package, Textual) on one plan file.

Textual is an extra (`tui`) and is imported only here, inside the handler,
so the other commands never pay for it. A plan that cannot be read is reported like `budgetdsl
check` does (located diagnostics on stderr, exit 2) before the terminal is taken over; the plan is
solved in the app's worker thread (a full layout search can take a second), and when the solver
refuses it the app exits at once and the same report follows, once the terminal is given back.
"""

from __future__ import annotations

import argparse

from budgetdsl.commands._common import extra_hint
from budgetdsl.io.exit_codes import ExitCode
from budgetdsl.io.terminal_text import tell


def run(args: argparse.Namespace) -> int:
    try:
        import textual  # noqa: F401
    except ImportError:
        tell(f"budgetdsl tui: the terminal UI needs Textual; {extra_hint('tui')}")
        return ExitCode.INVALID
    from budgetdsl.plan.diagnostics import PlanError
    from budgetdsl.tui.app import make_app

    trace = None
    if args.run:
        trace = _trace(args)
        if isinstance(trace, int):
            return trace
    try:
        app = make_app(args.plan, markers="ascii" if args.ascii else "braille", run=trace)
    except PlanError as exc:
        exc.report()
        return ExitCode.INVALID
    except OSError as exc:
        tell(f"{args.plan}: error[io]: {exc.strerror or exc}")
        return ExitCode.INVALID
    app.run()
    if getattr(app, "not_interactive", False):
        tell("budgetdsl tui: needs an interactive terminal: it reads keys from stdin and draws on "
              "stderr, and one of them is not a terminal")
        return ExitCode.INVALID
    refused = getattr(app, "launch_error", None)  # the solver refused the plan as loaded
    if refused is not None:
        refused.report()
        return ExitCode.INVALID
    if app.return_code:  # Textual caught an exception, left the terminal and drew its traceback
        error = getattr(app, "_exception", None)
        if isinstance(error, Exception):
            from budgetdsl.io.crash_report import report_internal_error

            return report_internal_error(error)
        return ExitCode.INTERNAL
    return ExitCode.OK


def _trace(args: argparse.Namespace):
    """The measured run of --run as the plot draws it (budgetdsl.track.trace), or an exit code
    after a located message: the logs are read once, before the terminal is taken over."""
    from budgetdsl.commands._common import load_or_report
    from budgetdsl.commands.track import report_log_error
    from budgetdsl.solve.solver import solve
    from budgetdsl.track.forecast import analyse
    from budgetdsl.track.metrics import MetricMap
    from budgetdsl.track.record import LogError
    from budgetdsl.track.run import merge
    from budgetdsl.track.sources import expand, timeline
    from budgetdsl.track.trace import trace_of

    plan = load_or_report(args.plan)
    if plan is None:
        return ExitCode.INVALID
    solution = solve(plan)
    metrics = MetricMap()
    try:
        files = expand(args.run)
        line = merge([timeline(f, metrics) for f in files])
        track = analyse(line, solution, [f.path for f in files], plan.model.seq_len)
    except (LogError, ImportError, OSError) as exc:
        return report_log_error(exc, "budgetdsl tui --run")
    return trace_of(line, track, solution, plan.model.seq_len)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("tui", help="explore a plan on the frontier in the terminal, and edit it",
                       description="Open a terminal UI on PLAN: change GPUs, deadline, FLOP budget, "
                       "batch, objective and B_crit and see the run re-placed on the critical-batch "
                       "frontier at once; save writes the changed values back into the plan file as a "
                       "minimal diff. Needs the tui extra (see the README: Install).")
    p.add_argument("plan", metavar="PLAN", help="a plan file (YAML)")
    p.add_argument("--run", action="append", metavar="LOG",
                   help="draw a running job's measured trajectory and forecast finish beside the plan: "
                   "a log file or folder, as `budgetdsl track` reads them (docs/track.md; repeatable)")
    p.add_argument("--ascii", action="store_true",
                   help="plot with plain ASCII markers instead of braille (fonts without braille)")
    p.set_defaults(handler=run)
