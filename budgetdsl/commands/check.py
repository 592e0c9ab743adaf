"""`budgetdsl check FILES...`: validate plan files, reporting every problem of every file.

Exit 0 when every plan is valid, 2 when any is not, 1 with `--solve` when a valid plan is
infeasible; without `--solve` no solver is imported. A base fragment (`fragment: true`) is checked
for its own keys and values only. With `--dependents` (the pre-commit hook) every plan of the
repository that extends a given file, directly or through other bases, is checked too: a change
to a base is a change to each plan built on it.
"""

from __future__ import annotations

import argparse
import json
import os

from budgetdsl.io.exit_codes import ExitCode
from budgetdsl.io.terminal_text import tell
from budgetdsl.plan.diagnostics import Diagnostic, PlanError


def check_files(paths: list[str], fragments: set[str] | None = None,
                crashes: list[BaseException] | None = None) -> dict[str, list[Diagnostic]]:
    """Every file's diagnostics (empty when valid), in the order given. The base fragments among
    them are checked as fragments and, when `fragments` is given, added to it. A crash on one
    file is that file's `internal-error` diagnostic (added to `crashes`), and the batch goes on."""
    from budgetdsl.plan.loader import (
        check_fragment,
        is_fragment,
        load_merged,
        read_merged,
    )

    results: dict[str, list[Diagnostic]] = {}
    for path in paths:
        try:
            source = read_merged(path)
            if is_fragment(source.data):
                if fragments is not None:
                    fragments.add(path)
                check_fragment(source)
                results[path] = []
                continue
            plan = load_merged(source)
            if plan.noise.calibration is not None:  # the file it names must exist and cover at_loss
                from budgetdsl.plan.noise import noise_estimate

                noise_estimate(plan)
            results[path] = []
        except PlanError as exc:
            results[path] = exc.diagnostics
        except Exception as exc:  # noqa: BLE001 - a bug on one file must not hide the others' answers
            results[path] = [_internal(path, exc)]
            if crashes is not None:
                crashes.append(exc)
    return results


INTERNAL_CODE = "internal-error"


def _internal(path: str, exc: BaseException) -> Diagnostic:
    """A crash on one file, as that file's diagnostic (the batch goes on; the exit code is 3, and
    the last line of stderr is the crash report's, with the traceback's file)."""
    from budgetdsl.io.crash_report import short_message
    from budgetdsl.plan.diagnostics import Location

    return Diagnostic(Location(path), INTERNAL_CODE, f"internal error: {type(exc).__name__}: "
                      f"{short_message(exc)}", "a bug in budgetdsl, not in the plan")


def _infeasible(paths: list[str], crashes: list[BaseException] | None = None) -> dict[str, list[str]]:
    """For `--solve`: each valid plan that is infeasible, with the limits that conflict."""
    from budgetdsl.plan.loader import load_plan
    from budgetdsl.solve.solver import solve

    out: dict[str, list[str]] = {}
    for path in paths:
        try:
            solution = solve(load_plan(path))
        except PlanError as exc:  # e.g. a calibration that cannot be read; reported as invalid
            out[path] = [d.format() for d in exc.diagnostics]
            continue
        except Exception as exc:  # noqa: BLE001 - as in check_files: the other plans still solve
            out[path] = [_internal(path, exc).format()]
            if crashes is not None:
                crashes.append(exc)
            continue
        if not solution.feasible:
            out[path] = solution.conflicts or ["no launchable configuration meets every limit"]
    return out


def run(args: argparse.Namespace) -> int:
    reached: dict[str, str] = {}  # a plan checked because it extends a given file -> that file
    if args.dependents:
        from budgetdsl.plan.dependents import dependents

        given = {os.path.realpath(p) for p in args.files}
        reached = {p: base for p, base in dependents(args.files).items() if os.path.realpath(p) not in given}
    fragments: set[str] = set()
    crashes: list[BaseException] = []
    results = check_files([*args.files, *reached], fragments, crashes)
    invalid = [p for p, d in results.items() if d]
    plans = [p for p, d in results.items() if not d and p not in fragments]
    infeasible = _infeasible(plans, crashes) if args.solve else {}
    if args.format == "json":
        payload = {"valid": not invalid, "feasible": None if not args.solve else not infeasible,
                   "files": [{"file": p, "valid": not d, "fragment": p in fragments,
                              **({"extends_changed": reached[p]} if p in reached else {}),
                              "diagnostics": [x.to_json() for x in d],
                              **({"feasible": p not in infeasible, "conflicts": infeasible.get(p, [])}
                                 if args.solve and not d and p not in fragments else {})}
                             for p, d in results.items()]}
        print(json.dumps(payload, indent=2))
    else:
        for path, diagnostics in results.items():
            if diagnostics and path in reached:
                tell(f"{path}: extends {reached[path]}, which changed:")
            for d in diagnostics:
                tell(*d.lines())
            if path in reached.values() and any(d.code == "missing-key" for d in diagnostics):
                tell(f"  note: plans extend {path}; if it is a base fragment, mark it with "
                      "'fragment: true' (docs/pr-workflow.md)")
        for path, reasons in infeasible.items():
            tell(f"{path}: infeasible: " + "; ".join(reasons))
        if not args.quiet:
            n = len(results)
            if invalid:
                count = sum(len(d) for d in results.values())
                tell(f"{len(invalid)} of {n} plan{'s' if n != 1 else ''} invalid "
                      f"({count} problem{'s' if count != 1 else ''})")
            elif infeasible:
                tell(f"{len(infeasible)} of {n} plan{'s' if n != 1 else ''} infeasible")
            else:
                notes = [f"{len(fragments)} base fragment{'s' if len(fragments) != 1 else ''}"] if fragments else []
                if reached:
                    extends = "it extends" if len(reached) == 1 else "they extend"
                    notes.append(f"{len(reached)} checked because {extends} a given file")
                tell(f"{n} plan{'s' if n != 1 else ''} valid" + (" and feasible" if args.solve else "")
                      + (f" ({'; '.join(notes)})" if notes else ""))
    if crashes:  # every file was checked; the first crash gets the one-line report, last
        from budgetdsl.io.crash_report import report_internal_error

        return report_internal_error(crashes[0])
    return ExitCode.INVALID if invalid else ExitCode.NO if infeasible else ExitCode.OK


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("check", help="validate plan files",
                       description="Validate plan files and report every problem as file:line:col. "
                       "Exit 0 if all are valid, 2 if any is invalid.")
    p.add_argument("files", nargs="+", metavar="FILE", help="plan files (YAML)")
    p.add_argument("--format", choices=("text", "json"), default="text",
                   help="json prints a machine-readable report on stdout")
    p.add_argument("-q", "--quiet", action="store_true", help="print only the problems")
    p.add_argument("--solve", action="store_true",
                   help="also solve each valid plan; exit 1 when any is infeasible")
    p.add_argument("--dependents", action="store_true",
                   help="also check every plan of the repository (git work tree) that extends a "
                   "given file, directly or through other bases (the pre-commit hook's mode)")
    p.set_defaults(handler=run)
