"""The `budgetdsl` console command: argument parsing and exit codes, nothing else.

Exit codes (documented in the README):
    0  fine (plan valid / feasible)
    1  the answer is "no" (a plan is infeasible, a check with --solve failed, a diff regressed)
    2  invalid input or usage (a plan that does not validate, a missing file, a bad flag)

Diagnostics go to stderr, results to stdout, so `budgetdsl plan --format json | jq` works.
argparse (stdlib) rather than click/typer: it costs nothing at start-up, and start-up time is a
product requirement (checking plans in CI and pre-commit hooks).
"""

from __future__ import annotations

import argparse
import importlib
import sys

from budgetdsl import __version__
from budgetdsl.commands import COMMANDS

EXIT_OK = 0
EXIT_NO = 1
EXIT_INVALID = 2


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="budgetdsl",
        description="Plan the budget of a training run on the critical-batch frontier.",
    )
    parser.add_argument("--version", action="version", version=f"budgetdsl {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in COMMANDS:
        module = importlib.import_module(f"budgetdsl.commands.{name}")
        module.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.handler(args))
    except BrokenPipeError:  # `budgetdsl plan ... | head` is not an error
        sys.stderr.close()
        return EXIT_OK
    except KeyboardInterrupt:
        print("budgetdsl: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
