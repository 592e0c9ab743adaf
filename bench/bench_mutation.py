"""Mutation benchmark (not a test, not in CI): `python bench/bench_mutation.py [--sample N] [--seed S]`.

Injects one-line slips into budgetdsl/cost, budgetdsl/solve and budgetdsl/exports, one at a time,
and runs a fast subset of the suite on each: the share of mutants some test catches (the kill rate)
says how much of a wrong answer the suite would notice. The operators are the slips of issue 23:
comparisons (< <=, > >=, == !=), and/or, + -, * /, // /, ceil/floor (math.ceil and the
-(-a // b) idiom), min/max, += -=, and integer constants one larger. Sites come from the AST (no
docstrings, annotations or f-strings), a seeded sample of them is run.

Every mutant is written into a throwaway copy of the tracked files (a temporary folder), never into
the work tree; the tests run there with PYTHONPATH pointing at the copy, so subprocesses of the CLI
import the mutant too. A mutant is killed when the subset fails or runs past its time limit (a hang
is a caught slip); a survivor may be an equivalent mutant, so the rate is a lower bound. mutmut was
not used: version 3 wants its own section in pyproject.toml, a clean run and coverage run of the
whole suite before the first mutant, and has no seeded sample.
"""

from __future__ import annotations

import argparse
import ast
import concurrent.futures
import copy
import os
import pathlib
import random
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass

REPO = pathlib.Path(__file__).resolve().parents[1]
PACKAGES = ("budgetdsl/cost", "budgetdsl/solve", "budgetdsl/exports")
# Ordered so that most mutants fail early under -x: the cost model and the exports' golden files
# first, the brute-force oracles and the property tests last.
TESTS = (
    "tests/budgetdsl/test_cost_model.py", "tests/budgetdsl/test_step_cost.py",
    "tests/budgetdsl/test_throughput_zero.py", "tests/budgetdsl/test_layout.py",
    "tests/budgetdsl/test_solver.py", "tests/budgetdsl/test_solve_pure.py", "tests/budgetdsl/test_batch_ramp.py",
    "tests/budgetdsl/test_pareto.py", "tests/budgetdsl/test_pareto_fast.py",
    "tests/budgetdsl/test_snapping_oracle.py", "tests/exports", "tests/budgetdsl/test_report.py",
    "tests/budgetdsl/test_plan_command.py", "tests/budgetdsl/test_published_runs.py",
    "tests/budgetdsl/test_frontier.py", "tests/budgetdsl/test_diff.py", "tests/budgetdsl/test_sweep.py",
    "tests/budgetdsl/test_sweep_kernel.py", "tests/budgetdsl/test_solver_oracle.py",
    "tests/budgetdsl/test_solver_properties.py", "tests/budgetdsl/test_solve_caches.py",
    "tests/budgetdsl/test_search_space.py", "tests/budgetdsl/test_search_exhaustive.py",
)

SWAP_CMP = {ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt, ast.Eq: ast.NotEq,
            ast.NotEq: ast.Eq}
SWAP_BIN = {ast.Add: ast.Sub, ast.Sub: ast.Add, ast.Mult: ast.Div, ast.Div: ast.Mult, ast.FloorDiv: ast.Div}
SWAP_CALL = {"ceil": "floor", "floor": "ceil", "min": "max", "max": "min"}
SYMBOL = {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "==", ast.NotEq: "!=", ast.Add: "+",
          ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//", ast.And: "and", ast.Or: "or"}


@dataclass(frozen=True)
class Mutant:
    path: str  # relative to the repository
    line: int
    col: int
    end_line: int
    end_col: int
    text: str  # what replaces the span
    what: str  # e.g. "< -> <="

    def apply(self, source: str) -> str:
        lines = source.splitlines(keepends=True)
        start = sum(len(x) for x in lines[:self.line - 1]) + _char_offset(lines[self.line - 1], self.col)
        end = sum(len(x) for x in lines[:self.end_line - 1]) + _char_offset(lines[self.end_line - 1], self.end_col)
        return source[:start] + self.text + source[end:]


def _char_offset(line: str, byte_col: int) -> int:
    """ast's col_offset counts UTF-8 bytes; the source string counts characters."""
    return len(line.encode()[:byte_col].decode(errors="ignore"))


def _skipped(tree: ast.Module) -> set[int]:
    """ids of the nodes no mutant touches: annotations, docstrings, f-strings and what they hold."""
    roots: list[ast.AST] = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            roots += [a.annotation for a in (*node.args.args, *node.args.kwonlyargs, *node.args.posonlyargs,
                                             node.args.vararg, node.args.kwarg) if a is not None and a.annotation]
            if node.returns is not None:
                roots.append(node.returns)
        if isinstance(node, ast.AnnAssign):
            roots.append(node.annotation)
        if isinstance(node, ast.JoinedStr):
            roots.append(node)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body \
                and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant):
            roots.append(node.body[0])
    return {id(n) for r in roots for n in ast.walk(r)}


def _variants(node: ast.AST) -> list[tuple[ast.AST | str, str]]:
    """(replacement node or source text, description) of each slip at `node`."""
    out: list[tuple[ast.AST | str, str]] = []
    if isinstance(node, ast.Compare):
        for i, op in enumerate(node.ops):
            if type(op) in SWAP_CMP:
                new = copy.deepcopy(node)
                new.ops[i] = SWAP_CMP[type(op)]()
                out.append((new, f"{SYMBOL[type(op)]} -> {SYMBOL[SWAP_CMP[type(op)]]}"))
    elif isinstance(node, ast.BoolOp):
        new = copy.deepcopy(node)
        new.op = ast.Or() if isinstance(node.op, ast.And) else ast.And()
        out.append((new, f"{SYMBOL[type(node.op)]} -> {SYMBOL[type(new.op)]}"))
    elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) and isinstance(node.operand, ast.BinOp) \
            and isinstance(node.operand.op, ast.FloorDiv) and isinstance(node.operand.left, ast.UnaryOp) \
            and isinstance(node.operand.left.op, ast.USub):  # -(-a // b), a ceiling
        out.append((ast.BinOp(node.operand.left.operand, ast.FloorDiv(), node.operand.right),
                    "-(-a // b) -> a // b (ceil -> floor)"))
    elif isinstance(node, ast.BinOp) and type(node.op) in SWAP_BIN:
        new = copy.deepcopy(node)
        new.op = SWAP_BIN[type(node.op)]()
        out.append((new, f"{SYMBOL[type(node.op)]} -> {SYMBOL[type(new.op)]}"))
    elif isinstance(node, ast.AugAssign) and type(node.op) in (ast.Add, ast.Sub):
        new = copy.deepcopy(node)
        new.op = SWAP_BIN[type(node.op)]()
        out.append((new, f"{SYMBOL[type(node.op)]}= -> {SYMBOL[type(new.op)]}="))
    elif isinstance(node, ast.Call):
        f = node.func
        name = f.attr if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id == "math" \
            and f.attr in ("ceil", "floor") else f.id if isinstance(f, ast.Name) and f.id in ("min", "max") else None
        if name:
            new = copy.deepcopy(node)
            if isinstance(new.func, ast.Attribute):
                new.func.attr = SWAP_CALL[name]
            else:
                assert isinstance(new.func, ast.Name)
                new.func.id = SWAP_CALL[name]
            out.append((new, f"{name} -> {SWAP_CALL[name]}"))
    elif isinstance(node, ast.Constant) and type(node.value) is int:
        out.append((repr(node.value + 1), f"{node.value} -> {node.value + 1}"))  # one per constant
    return out


def sites(root: pathlib.Path = REPO) -> list[Mutant]:
    """Every mutant of PACKAGES, in a fixed order."""
    out: list[Mutant] = []
    for package in PACKAGES:
        for path in sorted((root / package).glob("*.py")):
            source = path.read_text(encoding="utf-8")
            tree = ast.parse(source)
            skip = _skipped(tree)
            rel = str(path.relative_to(root))
            for node in ast.walk(tree):
                if id(node) in skip or not hasattr(node, "lineno"):
                    continue
                for new, what in _variants(node):
                    text = new if isinstance(new, str) else (
                        ast.unparse(new) if isinstance(new, ast.stmt) else f"({ast.unparse(new)})")
                    m = Mutant(rel, node.lineno, node.col_offset, node.end_lineno or node.lineno,
                               node.end_col_offset or 0, text, what)
                    try:
                        ast.parse(m.apply(source))
                    except SyntaxError:
                        continue
                    out.append(m)
    out.sort(key=lambda m: (m.path, m.line, m.col, m.what))
    return out


def _copy(dest: pathlib.Path) -> None:
    files = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, check=True, capture_output=True).stdout
    for rel in files.decode().split("\0"):
        if rel and (REPO / rel).is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / rel, dest / rel)


def _run_tests(tree: pathlib.Path, limit: float) -> tuple[str, float]:
    """'pass', 'fail' or 'timeout' of the subset in `tree`, and the seconds it took."""
    # BUDGETDSL_ROOT: the copy is no git work tree, and plans extend and read files inside it
    env = {**os.environ, "PYTHONPATH": str(tree), "PYTHONDONTWRITEBYTECODE": "1", "BUDGETDSL_ROOT": str(tree)}
    with tempfile.TemporaryDirectory(prefix="hypothesis-") as store:
        env["HYPOTHESIS_STORAGE_DIRECTORY"] = store  # no example of one mutant replays on the next
        t0 = time.monotonic()
        try:
            proc = subprocess.run([sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider",
                                   "-p", "no:randomly", f"--timeout={int(limit)}", *TESTS],
                                  cwd=tree, env=env, capture_output=True, timeout=limit)
        except subprocess.TimeoutExpired:
            return "timeout", time.monotonic() - t0
    return ("pass" if proc.returncode == 0 else "fail"), time.monotonic() - t0


def _worker(mutants: list[Mutant], limit: float, report) -> list[tuple[Mutant, str, float]]:
    results = []
    with tempfile.TemporaryDirectory(prefix="budgetdsl-mutant-") as tmp:
        tree = pathlib.Path(tmp)
        _copy(tree)
        for m in mutants:
            target = tree / m.path
            original = target.read_text(encoding="utf-8")
            target.write_text(m.apply(original), encoding="utf-8")
            try:
                outcome, seconds = _run_tests(tree, limit)
            finally:
                target.write_text(original, encoding="utf-8")
            results.append((m, outcome, seconds))
            report(m, outcome, seconds)
    return results


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sample", type=int, default=100, help="mutants to run (0: every site)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--jobs", type=int, default=1, help="mutants run at once, each in its own copy")
    ap.add_argument("--limit", type=float, default=0.0,
                    help="seconds per mutant before it counts as a hang (default: 4x the clean run)")
    ap.add_argument("--list", action="store_true", help="print the sampled mutants and stop")
    args = ap.parse_args()

    every = sites()
    chosen = every if args.sample <= 0 else random.Random(args.seed).sample(every, min(args.sample, len(every)))
    print(f"{len(every)} mutation sites in {', '.join(PACKAGES)}; running {len(chosen)} (seed {args.seed})")
    if args.list:
        for m in chosen:
            print(f"  {m.path}:{m.line}  {m.what}")
        return 0

    with tempfile.TemporaryDirectory(prefix="budgetdsl-clean-") as tmp:
        _copy(pathlib.Path(tmp))
        outcome, clean = _run_tests(pathlib.Path(tmp), 3600)
    if outcome != "pass":
        print(f"the subset fails without a mutant ({outcome}): fix the suite first")
        return 1
    limit = args.limit or max(60.0, 4 * clean)
    print(f"clean run of the subset: {clean:.0f} s; limit per mutant {limit:.0f} s")

    done = [0]

    def report(m: Mutant, outcome: str, seconds: float) -> None:
        done[0] += 1
        mark = {"fail": "killed", "timeout": "killed (time limit)", "pass": "SURVIVED"}[outcome]
        print(f"[{done[0]}/{len(chosen)}] {mark:20} {seconds:5.0f} s  {m.path}:{m.line}  {m.what}", flush=True)

    t0 = time.monotonic()
    shares = [chosen[i::args.jobs] for i in range(args.jobs)]
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        results = [r for part in pool.map(lambda s: _worker(s, limit, report), shares) for r in part]

    killed = sum(outcome != "pass" for _, outcome, _ in results)
    print(f"\nkill rate {killed}/{len(results)} = {100 * killed / len(results):.1f} % "
          f"({sum(o == 'timeout' for _, o, _ in results)} by the time limit); {time.monotonic() - t0:.0f} s")
    for package in PACKAGES:
        mine = [o for m, o, _ in results if m.path.startswith(package)]
        if mine:
            print(f"  {package}: {sum(o != 'pass' for o in mine)}/{len(mine)}")
    survivors = sorted((m for m, o, _ in results if o == "pass"), key=lambda m: (m.path, m.line))
    if survivors:
        print("survivors (some may be equivalent mutants):")
        for m in survivors:
            print(f"  {m.path}:{m.line}  {m.what}   -> {m.text[:100]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
