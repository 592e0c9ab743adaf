"""`budgetdsl track PLAN RUN...`: read what a running job logs and say whether its plan still holds.

RUN is a log file or a folder of them (TensorBoard events, trainer_state.json, a Megatron-LM log,
a gns calibration file, CSV/JSONL: docs/track.md). Results go to stdout (text, `--format json`,
`--format markdown` for a pull-request comment), diagnostics to stderr. Exit 0 while the plan
holds, 1 when a limit is forecast to break (or the plan is infeasible), 2 for bad input.
"""

from __future__ import annotations

import argparse
import sys

from budgetdsl.commands._common import extra_hint
from budgetdsl.io.exit_codes import ExitCode
from budgetdsl.io.terminal_text import inert, tell


def _track_once(args: argparse.Namespace, solution, metrics, seq_len):
    """The Track of the logs as they are now, and the merged run; raises LogError for bad input."""
    from budgetdsl.track.forecast import analyse
    from budgetdsl.track.run import merge
    from budgetdsl.track.sources import expand, timeline

    files = expand(args.runs)
    line = merge([timeline(f, metrics, args.until_step) for f in files], args.until_step)
    if args.since_step is not None:
        line = line.since(args.since_step)
    return analyse(line, solution, [f.path for f in files], seq_len), line


def report_log_error(exc: Exception, command: str) -> int:
    """Say why the logs could not be read — a located LogError, the missing `track` extra, or an
    I/O error — and give the bad-input exit code."""
    from budgetdsl.track.record import LogError

    if isinstance(exc, LogError):
        tell(inert(exc.format()))
    elif isinstance(exc, ImportError):
        tell(f"{command}: {exc}; {extra_hint('track')}")
    else:
        where = getattr(exc, "filename", None) or command
        tell(inert(f"{where}: error[io]: {getattr(exc, 'strerror', None) or exc}"))
    return ExitCode.INVALID


def run(args: argparse.Namespace) -> int:
    from budgetdsl.commands._common import load_or_report
    from budgetdsl.solve.solver import solve
    from budgetdsl.track.metrics import MetricMap, parse_overrides
    from budgetdsl.track.record import LogError

    try:
        metrics = MetricMap(parse_overrides(args.metric or []))
    except ValueError as exc:
        tell(inert(f"budgetdsl track: error: {exc}"))
        return ExitCode.INVALID
    if args.plot and (args.follow or not args.plot.endswith((".svg", ".png"))):
        tell("budgetdsl track: error: --plot writes one .svg or .png picture (not with --follow)")
        return ExitCode.INVALID
    if args.plot:
        try:
            import matplotlib  # noqa: F401 - only to say which extra is missing
        except ImportError:
            tell(f"budgetdsl track: --plot needs matplotlib; {extra_hint('plot')}")
            return ExitCode.INVALID
    plan = load_or_report(args.plan)
    if plan is None:
        return ExitCode.INVALID
    solution = solve(plan)
    for warning in solution.warnings:
        tell(warning.format())
    try:
        if args.follow:
            return _follow(args, solution, metrics, plan.model.seq_len)
        track, line = _track_once(args, solution, metrics, plan.model.seq_len)
    except (LogError, ImportError, OSError) as exc:  # OSError: a log removed or unreadable while read
        return report_log_error(exc, "budgetdsl track")
    if args.plot:
        from budgetdsl.track.figure import draw

        try:
            draw(track, line, args.plot)
        except OSError as exc:
            tell(inert(f"{exc.filename or args.plot}: error[io]: cannot write the picture: {exc.strerror or exc}"))
            return ExitCode.INVALID
    _write(args, track)
    if args.replan:
        return _replan(args, track, line, plan, solution)
    return _code(track, solution)


def _replan(args: argparse.Namespace, track, line, plan, solution) -> int:
    """Write the plan update (budgetdsl.track.replan) into the plan's files, with a batch ramp for
    the rest of the run when the measured B_noise carries one (budgetdsl.track.ramp); say what changed."""
    from budgetdsl.plan.diagnostics import PlanError
    from budgetdsl.plan.edit import EditError, render_flow, save_changes
    from budgetdsl.track.ramp import NoRamp, ramp_changes
    from budgetdsl.track.replan import changes, progress

    if track.tokens_per_s is None:
        tell(inert(f"{args.plan}: nothing to replan: {track.reason}"))
        return _code(track, solution)
    update = changes(track, plan, solution)
    if progress(track) is not None:
        try:
            ramp, growth = ramp_changes(track, line, plan, solution, args.since_step)
        except NoRamp as exc:
            tell(inert(f"replan: no batch ramp: {exc}"))
            if update.get("noise.b_crit") and plan.run is not None and plan.run.batch_schedule == "auto":
                update["run.batch_schedule"] = None  # `auto` follows the calibration the measurement replaces
        else:
            update |= ramp
            tell(inert(f"replan: batch ramp: B_noise ∝ L^-k, k = {growth.k:.3g} ({growth.k_low:.3g}–"
                       f"{growth.k_high:.3g}, {growth.points} points); L ∝ E^-α_D, α_D = {growth.alpha_d:.3g} "
                       f"over the last doubling: B_noise grows ×{growth.growth():.3g} (×"
                       f"{growth.growth(growth.exponent_low):.3g}–×{growth.growth(growth.exponent_high):.3g}) "
                       "by the end of the run"))
    try:
        written = save_changes(args.plan, update)
    except PlanError as exc:
        exc.report()
        return ExitCode.INVALID
    except (EditError, OSError) as exc:
        tell(inert(f"{args.plan}: error[replan]: {exc}"))
        return ExitCode.INVALID
    for key, value in update.items():
        tell(inert(f"replan: {key} = {'(removed)' if value is None else render_flow(value)}"))
    tell(inert(f"replan: wrote {', '.join(written)}; `budgetdsl diff` shows what it changes"))
    if progress(track) is not None:
        since = track.steps_done + (args.since_step or 0)
        tell(inert(f"replan: the plan now covers the rest of the run, from step {since:,}: track it with "
                   f"`budgetdsl track {args.plan} RUN --since-step {since}`"))
    return ExitCode.OK


def _code(track, solution) -> int:
    return ExitCode.NO if track.breaks or not solution.feasible else ExitCode.OK


def _write(args: argparse.Namespace, track) -> None:
    from budgetdsl.track.report import RENDERERS

    if args.format == "json":
        text = RENDERERS["json"](track)
        sys.stdout.write(text if not args.follow else " ".join(text.split()) + "\n")  # one line per report
    else:
        sys.stdout.write(inert(RENDERERS[args.format](track)))


def _follow(args: argparse.Namespace, solution, metrics, seq_len) -> int:
    """Poll the logs every --interval seconds; report when they gained records. Ends when the run
    has done its planned tokens, or after --idle seconds without a new record (exit as the last
    report says)."""
    import time

    from budgetdsl.track.follow import Follower
    from budgetdsl.track.forecast import analyse
    from budgetdsl.track.run import Timeline

    follower = Follower(args.runs, metrics)
    code, quiet_since, reported = int(ExitCode.OK), time.monotonic(), False
    while True:
        if follower.poll() or not reported:
            quiet_since = time.monotonic()
            line = follower.timeline()
            if args.since_step is not None:  # the rest of a replanned run: nothing until it logs
                line = line.since(args.since_step) if len(line) and line.steps[-1] >= args.since_step else Timeline()
            if len(line):
                track = analyse(line, solution, follower.files, seq_len)
                if reported and args.format == "text":
                    sys.stdout.write("\n")
                _write(args, track)
                reported, code = True, _code(track, solution)
                if track.status == "finished":
                    return code
        if args.idle is not None and time.monotonic() - quiet_since >= args.idle:
            return code if reported else ExitCode.INVALID
        time.sleep(args.interval)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("track", help="compare a running job's logs with its plan and forecast the finish",
                       description="Read what a training job logs and compare it with its plan: progress, "
                       "throughput and MFU, B_noise against B_crit, the position on the frontier, and a "
                       "forecast of the finish, GPU-hours and cost with an interval. Exit 0 while the plan "
                       "holds, 1 when a limit is forecast to break, 2 for bad input.")
    p.add_argument("plan", metavar="PLAN", help="the plan file (YAML) that launched the run")
    p.add_argument("runs", nargs="+", metavar="RUN", help="log files or folders (docs/track.md)")
    p.add_argument("--format", choices=("text", "json", "markdown"), default="text",
                   help="text for people, json for machines, markdown for pull-request comments")
    p.add_argument("--metric", action="append", metavar="FIELD=NAME",
                   help="read FIELD (tokens, samples, loss, lr, tokens_per_s, tflops_per_gpu, b_noise, ...) "
                   "from the logged NAME; an empty NAME ignores the field (repeatable)")
    p.add_argument("--until-step", type=int, metavar="N",
                   help="read the logs only up to the first step past N: what track said then")
    p.add_argument("--since-step", type=int, metavar="N",
                   help="the plan covers the run from step N on (what --replan wrote): count steps, "
                   "tokens and time from there")
    p.add_argument("--plot", metavar="PATH", help="draw tokens over time (logged, planned, forecast with its "
                   "interval, the deadline) to PATH (.svg or .png)")
    p.add_argument("--replan", action="store_true",
                   help="write the update the measurements call for into the plan (measured MFU, B_noise "
                   "as B_crit, the rest of the run, a batch ramp for it when the measured B_noise carries "
                   "one) as a minimal diff; exit 0 once written")
    p.add_argument("--follow", action="store_true",
                   help="keep reading the growing logs and report whenever they gain records (JSON: one "
                   "object per line); ends when the planned tokens are done, or after --idle seconds")
    p.add_argument("--interval", type=float, default=30.0, metavar="S",
                   help="--follow: seconds between reads (default 30)")
    p.add_argument("--idle", type=float, metavar="S",
                   help="--follow: stop after S seconds without a new record (default: never)")
    p.set_defaults(handler=run)
