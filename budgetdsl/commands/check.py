"""`budgetdsl check FILES...`: validate plan files, reporting every problem of every file.

One process checks any number of files (a pre-commit hook passes them all at once). Exit 0 when
every plan is valid, 2 when any is not (invalid input), 1 with `--solve` when a valid plan is
infeasible. Without `--solve` no solver (and no sympy) is imported.
"""

from __future__ import annotations

import argparse
import json
import sys

from budgetdsl.diagnostics import Diagnostic, PlanError


def check_files(paths: list[str]) -> dict[str, list[Diagnostic]]:
    """Every file's diagnostics (empty when valid), in the order given."""
    from budgetdsl.plan_loader import load_plan

    results: dict[str, list[Diagnostic]] = {}
    for path in paths:
        try:
            plan = load_plan(path)
            if plan.noise.calibration is not None:  # the file it names must exist and cover at_loss
                from budgetdsl.noise_source import noise_estimate

                noise_estimate(plan)
            results[path] = []
        except PlanError as exc:
            results[path] = exc.diagnostics
    return results


def _infeasible(paths: list[str]) -> dict[str, list[str]]:
    """For `--solve`: each valid plan that is infeasible, with the limits that conflict."""
    from budgetdsl.plan_loader import load_plan
    from budgetdsl.solver import solve

    out: dict[str, list[str]] = {}
    for path in paths:
        try:
            solution = solve(load_plan(path))
        except PlanError as exc:  # e.g. a calibration that cannot be read; reported as invalid
            out[path] = [d.format() for d in exc.diagnostics]
            continue
        if not solution.feasible:
            out[path] = solution.conflicts or ["no launchable configuration meets every limit"]
    return out


def run(args: argparse.Namespace) -> int:
    results = check_files(args.files)
    invalid = [p for p, d in results.items() if d]
    infeasible = _infeasible([p for p, d in results.items() if not d]) if args.solve else {}
    if args.format == "json":
        payload = {"valid": not invalid, "feasible": None if not args.solve else not infeasible,
                   "files": [{"file": p, "valid": not d, "diagnostics": [x.to_json() for x in d],
                              **({"feasible": p not in infeasible, "conflicts": infeasible.get(p, [])}
                                 if args.solve and not d else {})}
                             for p, d in results.items()]}
        print(json.dumps(payload, indent=2))
    else:
        for diagnostics in results.values():
            for d in diagnostics:
                print(d.format(), file=sys.stderr)
        for path, reasons in infeasible.items():
            print(f"{path}: infeasible: " + "; ".join(reasons), file=sys.stderr)
        if not args.quiet:
            n = len(results)
            if invalid:
                count = sum(len(d) for d in results.values())
                print(f"{len(invalid)} of {n} plan{'s' if n != 1 else ''} invalid "
                      f"({count} problem{'s' if count != 1 else ''})", file=sys.stderr)
            elif infeasible:
                print(f"{len(infeasible)} of {n} plan{'s' if n != 1 else ''} infeasible", file=sys.stderr)
            else:
                print(f"{n} plan{'s' if n != 1 else ''} valid" + (" and feasible" if args.solve else ""),
                      file=sys.stderr)
    return 2 if invalid else 1 if infeasible else 0


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
    p.set_defaults(handler=run)
