"""`budgetdsl plan PLAN...`: place each plan on the critical-batch frontier and say what to launch.

Results go to stdout (a table, `--format json` for machines, `--format markdown` for pull-request
comments), diagnostics to stderr. With several plans, text and Markdown print one after another
and JSON prints an array (one plan: one object). Exit 0 when every plan is feasible, 1 when one is
infeasible (the answer is "no"), 2 when one is invalid (it is still reported; the others are
solved).
"""

from __future__ import annotations

import argparse
import sys

from budgetdsl.commands._common import extra_hint
from budgetdsl.io.exit_codes import ExitCode
from budgetdsl.io.terminal_text import tell
from budgetdsl.plan.diagnostics import Diagnostic, Location, PlanError


def gpu_table() -> str:
    """The GPU presets, for `--list-gpus`."""
    from budgetdsl.hardware.gpus import PRESETS
    from budgetdsl.quantities.humanize import data, human

    rows = [("name", "peak bf16 (dense)", "fp8 (dense)", "memory", "network/GPU", "in-node/GPU", "source")]
    rows += [(p.name, human("FLOP/s", p.peak_flops), human("FLOP/s", p.fp8_peak_flops) if p.fp8_peak_flops else "—",
              data(p.memory), human("B/s", p.network), human("B/s", p.intra_node), p.source)
             for p in PRESETS.values()]
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows) + "\n"


def run(args: argparse.Namespace) -> int:
    if args.list_gpus:
        sys.stdout.write(gpu_table())
        if not args.plans:
            return ExitCode.OK
    if not args.plans:
        tell("budgetdsl plan: error: give one or more plan files (or --list-gpus)")
        return ExitCode.INVALID

    from budgetdsl.plan.loader import load_plan
    from budgetdsl.report.text import RENDERERS
    from budgetdsl.solve.solver import solve

    if args.plot and len(args.plans) > 1 and "{name}" not in args.plot:
        tell("budgetdsl plan: error: with several plans, --plot needs '{name}' in the path, "
              "e.g. --plot 'docs/{name}.svg'")
        return ExitCode.INVALID
    if args.plot and not args.plot.endswith((".svg", ".png")):
        tell("budgetdsl plan: error: --plot writes .svg or .png")
        return ExitCode.INVALID
    if args.plot:
        try:
            import matplotlib  # noqa: F401 - only to say which extra is missing
        except ImportError:
            tell(f"budgetdsl plan: --plot needs matplotlib; {extra_hint('plot')}")
            return ExitCode.INVALID

    code = ExitCode.OK
    texts: list[str] = []
    dumps: list[dict] = []
    drawn: dict[str, str] = {}  # picture path -> the plan file drawn there, in this run
    for path in args.plans:
        try:
            solution = solve(load_plan(path))
        except PlanError as exc:
            exc.report()
            code = ExitCode.INVALID
            continue
        except OSError as exc:
            tell(f"{path}: error[io]: {exc.strerror or exc}")
            code = ExitCode.INVALID
            continue
        for w in solution.warnings:  # located, like errors; they do not change the exit code
            tell(*Diagnostic(Location(w.file, w.line, w.col), w.code, w.message, w.hint, "warning").lines())
        if not solution.feasible and code == ExitCode.OK:
            code = ExitCode.NO
        picture = None
        if args.plot:
            try:
                picture = _picture(args, solution, path, drawn)
            except ValueError as exc:  # two plans of one name: one picture would replace the other
                from budgetdsl.io.terminal_text import inert

                tell(inert(f"{path}: error[plot]: {exc}", keep_lines=False))
                code = ExitCode.INVALID
            except OSError as exc:  # a read-only disk, a missing folder (not made: check_folder)
                where = exc.filename or args.plot
                tell(f"{where}: error[io]: cannot write the picture: {exc.strerror or exc}")
                code = ExitCode.INVALID
        if args.format == "json":
            dumps.append(solution.model_dump(mode="json"))
        else:
            text = RENDERERS[args.format](solution)
            if picture and args.format == "markdown":
                from budgetdsl.io.markdown_text import (
                    inline,  # the name is plan text: inert
                )

                text += f"\n![frontier of {inline(solution.plan)}]({picture})\n"
            texts.append(text)
    if args.format == "json":
        if dumps:
            from budgetdsl.report.text import json_document

            sys.stdout.write(json_document(dumps[0] if len(args.plans) == 1 else dumps))
    else:
        from budgetdsl.io.terminal_text import (
            inert,  # plan text in a report for a terminal
        )

        sys.stdout.write(inert("\n".join(texts)))
    return code


def file_name(name: str) -> str:
    """A plan's name as a file name: the name itself when every character is safe in a path, else
    its safe characters and 8 hex digits of its SHA-256 (`minimal/1b` -> `minimal-1b-<hash>`), so
    that two names never share one picture (`minimal-1b` keeps its own)."""
    import hashlib
    import re

    safe = re.sub(r"[^A-Za-z0-9._-]+", "-", name).lstrip(".-") or "plan"  # a name is untrusted
    if safe == name:
        return safe
    return f"{safe}-{hashlib.sha256(name.encode('utf-8', 'surrogatepass')).hexdigest()[:8]}"


def _picture(args: argparse.Namespace, solution, plan_path: str, drawn: dict[str, str]) -> str:
    """Draw the frontier picture of `solution` where --plot says; return the path written.
    ValueError when another plan of this run was drawn to the same path."""
    import os

    from budgetdsl.io.atomic_write import check_folder
    from budgetdsl.report.frontier_plot import draw

    path = args.plot.replace("{name}", file_name(solution.plan))
    key = os.path.normcase(os.path.abspath(path))
    if key in drawn:
        raise ValueError(f"not drawn: {path} holds the picture of {drawn[key]}, which has the same "
                         f"plan name; give the plans different names")
    drawn[key] = plan_path
    check_folder(path)  # before drawing; the one rule of every output path: no folder is made
    draw(solution, path, axes=args.plot_axes)
    return path


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("plan", help="place plans on the frontier and pick a launchable configuration",
                       description="Place each plan on the critical-batch frontier: global batch, "
                       "micro-batch, accumulation, data-parallel degree, steps, FLOPs, wall clock, and "
                       "each limit's slack. Exit 0 if all are feasible, 1 if one is infeasible, 2 if one "
                       "is invalid.")
    p.add_argument("plans", nargs="*", metavar="PLAN", help="plan files (YAML)")
    p.add_argument("--format", choices=("text", "json", "markdown"), default="text",
                   help="text for people, json for machines, markdown for pull-request comments")
    p.add_argument("--list-gpus", action="store_true", help="print the GPU presets and their sources")
    p.add_argument("--plot", metavar="PATH", help="draw the frontier picture to PATH (.svg or .png; "
                   "'{name}' stands for the plan's name); Markdown output links it")
    p.add_argument("--plot-axes", choices=("flops-wallclock", "tokens-steps"), default="tokens-steps",
                   help="the frontier panel's axes (default: tokens against steps)")
    p.set_defaults(handler=run)
