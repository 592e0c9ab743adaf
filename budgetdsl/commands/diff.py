"""`budgetdsl diff`: what a change to plan files does to the runs.

    budgetdsl diff OLD.yaml NEW.yaml            two files
    budgetdsl diff --base origin/main [PATHS]   every plan changed between a revision and the work
                                                tree (added, removed, and plans whose base changed)

Exit 0, or 1 when a plan that was feasible becomes infeasible (or invalid), or 2 on invalid input.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from pathlib import Path

from budgetdsl.io.exit_codes import ExitCode
from budgetdsl.io.terminal_text import tell
from budgetdsl.plan.diagnostics import PlanError


def _solved(path: str, opener: Callable[[str], bytes] | None = None, cache=None):
    """(plan, solution) of `path`; `cache`: what the diff's solves share (`solve.cache.SolveCache`)."""
    from budgetdsl.plan.loader import load_plan
    from budgetdsl.solve.solver import solve

    plan = load_plan(path) if opener is None else load_plan(path, opener=opener)
    return plan, solve(plan, cache)


def _is_plan(path: str, opener: Callable[[str], bytes]) -> bool:
    """A plan file has a top-level `name` and is no base fragment (`fragment: true`); what a change
    to a base does shows on the plans that extend it. A file that does not parse is treated as a
    plan, so that breaking one is reported, not skipped."""
    from budgetdsl.plan.source import is_fragment
    from budgetdsl.plan.yaml_source import read_yaml_file

    try:
        data = read_yaml_file(path, path, opener).data
        return "name" in data and not is_fragment(data)
    except PlanError as exc:
        return not any(d.code == "file-not-found" for d in exc.diagnostics)


def _compare(path: str, old_opener, new_opener, old_exists: bool, new_exists: bool, cache=None):
    from budgetdsl.report.plan_diff import diff_plan

    old = new = None
    problems: list[str] = []
    if old_exists:
        try:
            old = _solved(path, old_opener, cache)
        except PlanError:
            old = None  # invalid at the base: nothing to compare against
    if new_exists:
        try:
            new = _solved(path, new_opener, cache)
        except PlanError as exc:
            problems = [d.format() for d in exc.diagnostics]
    return diff_plan(path, old, new, problems)


def _files_diff(args: argparse.Namespace):
    from budgetdsl.report.plan_diff import diff_plan
    from budgetdsl.solve.cache import SolveCache

    old, new = args.files
    cache = SolveCache()  # the two versions share their cost models where the model and hardware agree
    try:
        before = _solved(old, cache=cache)
    except PlanError as exc:
        exc.report()
        return None
    try:
        after = _solved(new, cache=cache)
        return [diff_plan(new, before, after)]
    except PlanError as exc:
        return [diff_plan(new, before, None, [d.format() for d in exc.diagnostics])]


def _base_diff(args: argparse.Namespace):
    from budgetdsl.plan.git_source import (
        GitError,
        files_at,
        opener_at,
        repo_root,
        resolve_revision,
        shown_ref,
    )
    try:
        root = repo_root()
        commit = resolve_revision(args.base)
    except GitError as exc:  # its message, then its hint's line (an unknown revision has one)
        message, _, hint = str(exc).partition("\n  hint: ")
        tell(f"budgetdsl diff: {message}", *([f"  hint: {hint}"] if hint else []))
        return None
    paths = args.paths or (["plans"] if Path("plans").is_dir() else ["."])
    rel_paths = [os.path.relpath(os.path.abspath(p), root) for p in paths]
    for path, rel in zip(paths, rel_paths):
        if rel == os.pardir or rel.startswith(os.pardir + os.sep):
            tell(f"budgetdsl diff: {path}: outside the repository {root} (--base compares paths "
                  "inside the git work tree)")
            return None
    old_opener, new_opener = opener_at(commit, root), _confined_reader(root)
    candidates: set[str] = set()
    try:
        tracked = files_at(commit, root, rel_paths)
    except GitError as exc:  # a path git refuses (e.g. unknown pathspec magic, `:(x)plans`)
        tell(f"budgetdsl diff: {exc}")
        return None
    for path, rel in zip(paths, rel_paths):  # a misspelt path must not compare nothing and pass
        if not os.path.lexists(path) and not any(rel in (".", t) or t.startswith(rel.rstrip("/") + "/")
                                                 for t in tracked):
            tell(f"budgetdsl diff: {path}: no such file or folder in the work tree or at {shown_ref(args.base)}")
            return None
    for rel in tracked:
        candidates.add(os.path.relpath(root / rel))
    for p in paths:
        if os.path.isfile(p):
            candidates.add(os.path.relpath(p))
        for dirpath, _, names in os.walk(p):
            candidates.update(os.path.relpath(os.path.join(dirpath, n)) for n in names)
    from budgetdsl.solve.cache import SolveCache

    cache = SolveCache()  # every version of every plan compared shares cost models and spaces
    diffs = []
    for path in sorted(c for c in candidates if c.endswith((".yaml", ".yml"))):
        in_old = _is_plan(path, old_opener)
        in_new = os.path.isfile(path) and _is_plan(path, new_opener)
        if in_old or in_new:
            diffs.append(_compare(path, old_opener, new_opener, in_old, in_new, cache))
    return diffs


def _confined_reader(root: Path) -> Callable[[str], bytes]:
    """The work tree's reader for `diff --base`: the files compared are found in the pull request's
    tree, so a symbolic link that leads out of the repository is not followed (its target would
    land in the PR comment); bases are confined by the loader itself."""
    from budgetdsl.plan.source import confined
    from budgetdsl.plan.yaml_source import read_bytes

    def read(path: str) -> bytes:
        if not confined(path, root):
            raise PermissionError(0, f"a symbolic link to a file outside the repository {root}", path)
        return read_bytes(path, inside=root)  # checked again on what was opened: no swap

    return read


def run(args: argparse.Namespace) -> int:
    from budgetdsl.report.diff_text import (
        render_diff_json,
        render_diff_markdown,
        render_diff_text,
    )

    if args.base is None and len(args.files) != 2:
        tell("budgetdsl diff: give two plan files, or --base REF [PATHS]")
        return ExitCode.INVALID
    if args.base is not None:
        args.paths = args.files
    diffs = _base_diff(args) if args.base is not None else _files_diff(args)
    if diffs is None:
        return ExitCode.INVALID
    render = {"text": render_diff_text, "markdown": render_diff_markdown, "json": render_diff_json}
    from budgetdsl.io.terminal_text import (
        inert,  # plan text for a terminal: shown, never obeyed
    )

    out = render[args.format](diffs)
    sys.stdout.write(out if args.format == "json" else inert(out))  # JSON escapes its own
    if any(d.problems for d in diffs):
        for d in diffs:
            for problem in d.problems:
                tell(problem)
        return ExitCode.INVALID
    return ExitCode.NO if any(d.regressed for d in diffs) else ExitCode.OK


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("diff", help="what a change to plan files does to the runs",
                       description="Compare two plan files, or every plan changed since a git revision "
                       "(--base). Exit 1 when a feasible plan becomes infeasible.")
    p.add_argument("files", nargs="*", metavar="PATH",
                   help="OLD NEW plan files; with --base, the files or folders to compare (default: plans/)")
    p.add_argument("--base", metavar="REF", help="a git revision to compare the work tree against")
    p.add_argument("--format", choices=("text", "markdown", "json"), default="text",
                   help="markdown for a pull-request comment, json for machines")
    p.set_defaults(handler=run)
