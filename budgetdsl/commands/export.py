"""`budgetdsl export PLAN --to FORMAT [-o FILE]`: the launch config of a solved plan.

The config goes to stdout (or FILE); what was defaulted, and warnings such as a learning rate
scaled past B_crit, go to stderr as diagnostics, so `budgetdsl export p.yaml --to hf > args.json`
writes only the config. Exit 0 when exported, 1 when the plan is infeasible (nothing is written
and the solver's reasons are printed), 2 when the plan is invalid or the format cannot carry it.
"""

from __future__ import annotations

import argparse
import sys

from budgetdsl.io.exit_codes import ExitCode
from budgetdsl.io.terminal_text import tell


def run(args: argparse.Namespace) -> int:
    from budgetdsl.commands._common import load_or_report
    from budgetdsl.exports import FORMATS, export, schedule_warning
    from budgetdsl.exports.spec import ExportError, launch_spec

    plan = load_or_report(args.plan)
    if plan is None:
        return ExitCode.INVALID

    from budgetdsl.plan.diagnostics import PlanError
    from budgetdsl.solve.solver import solve

    try:
        solution = solve(plan)
    except PlanError as exc:  # what only solving reads: the calibration a plan names
        exc.report()
        return ExitCode.INVALID
    if not solution.feasible:
        from budgetdsl.exports.spec import infeasible_reason

        tell(f"{args.plan}: error[infeasible]: plan {plan.name!r} is infeasible; nothing exported")
        tell(f"  hint: {infeasible_reason(solution)}")
        return ExitCode.NO
    fmt = FORMATS[args.to]
    try:
        spec = launch_spec(plan, solution)
        text = export(spec, args.to)
    except ExportError as exc:
        tell(f"{args.plan}: error[export]: {exc}")
        return ExitCode.INVALID
    if not args.quiet:
        for d in spec.defaults_for(fmt.uses):
            tell(f"{args.plan}: note[defaulted]: {d}")
        for w in spec.warnings:
            tell(f"{args.plan}: warning[export]: {w}")
        schedule = schedule_warning(spec, args.to)
        if schedule:
            tell(f"{args.plan}: warning[batch-schedule]: {schedule}")
    if args.output and args.output != "-":
        reads = _files_read(plan, args.plan)
        if any(_same_file(args.output, f) for f in reads):
            tell(f"{args.output}: error[io]: is a file of the plan ({', '.join(sorted(reads))}); "
                  "nothing written")
            suffix = {"slurm": "sbatch", "torchrun": "sh", "megatron": "sh", "deepspeed": "json",
                      "hf": "json"}.get(args.to, "yaml")
            tell(f"  hint: name another file, e.g. -o job.{suffix}")
            return ExitCode.INVALID
        try:
            from budgetdsl.io.atomic_write import NotAFile, write_file

            write_file(args.output, text, mode=0o755 if args.to in ("slurm", "torchrun") else 0o644)
        except OSError as exc:
            tell(f"{args.output}: error[io]: {exc.strerror or exc}")
            if isinstance(exc, NotAFile):
                tell("  hint: name a regular file, or leave out -o to write to stdout")
            return ExitCode.INVALID
    else:
        sys.stdout.write(text)
    return ExitCode.OK


def _files_read(plan, path: str) -> set[str]:
    """The plan file and every base it extends: an export must never replace one of them."""
    source = getattr(plan, "source", None)  # plan.loader.LoadedPlan
    return {path, *(str(p) for p in getattr(source, "paths", {}).values())}


def _same_file(a: str, b: str) -> bool:
    import os

    try:
        return os.path.samefile(a, b)
    except (OSError, ValueError):  # the output does not exist yet
        return False


def register(sub: argparse._SubParsersAction) -> None:
    from budgetdsl.exports import FORMATS  # light: the format modules load on use

    formats = "\n".join(f"  {f.name:<11} {f.summary}" for f in FORMATS.values())
    p = sub.add_parser("export", help="write the launch config of a plan for a scheduler",
                       formatter_class=argparse.RawDescriptionHelpFormatter,
                       description="Solve PLAN and write the launch config for FORMAT: nodes, GPUs, "
                       "micro-batch, accumulation, global batch, steps, scaled learning rate, warmup "
                       "and the deadline as the time limit. Defaults and warnings go to stderr.\n"
                       "Exit 0 exported, 1 infeasible (nothing written), 2 invalid plan or a format "
                       "that cannot carry it.\n\nformats:\n" + formats)
    p.add_argument("plan", metavar="PLAN", help="plan file (YAML)")
    p.add_argument("--to", required=True, choices=list(FORMATS), metavar="FORMAT",
                   help="one of: " + ", ".join(FORMATS))
    p.add_argument("-o", "--output", metavar="FILE", help="write to FILE instead of stdout")
    p.add_argument("-q", "--quiet", action="store_true", help="do not print defaults and warnings")
    p.set_defaults(handler=run)
