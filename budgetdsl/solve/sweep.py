"""What-if sweeps: solve a plan over the cross product of changed values, in one process.

`--set hardware.gpus=64,128,256 --set budget.deadline=7d,14d` solves 3 × 2 variants of the plan
without editing files. Each value goes through the plan language exactly as if written in the
file (units, expressions, validation), so a sweep row equals `budgetdsl plan` of the edited file.

Two paths give the same rows. `iter_sweep(..., full=True)` loads and solves every combination
(`solve()`: the whole Solution, what JSON prints). With `full=False` (the table and CSV, which
show a `Summary` of each row) a sweep that changes only limits, the target, B_crit or the
objective goes through `budgetdsl.solve.sweep_kernel`: each distinct value is loaded once per axis, and
the rows are placed together, vectorized; every row the kernel cannot decide exactly is solved
by `solve()` as before (docs/solver.md, "Sweeps"). BUDGETDSL_SWEEP_SCALAR=1 turns the kernel off;
without numpy (a core dependency, imported by the sweep command only) every row is solved.

An invalid combination is a row that says so, and the sweep goes on; every such row passes through
`solve_row`, where `Blame` reports each problem at the --set that causes it (the file's line where
the problem was found follows as a note) unless the plan file alone has it.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator
from dataclasses import dataclass

from budgetdsl.plan.diagnostics import Diagnostic, Location, PlanError, did_you_mean
from budgetdsl.plan.loader import MergedSource, field_info, field_spec, numeric_paths
from budgetdsl.solve.cache import SolveCache
from budgetdsl.solve.sweep_rows import Blame, Setting, Summary, SweepRow, solve_row, summarize, variant

__all__ = ["MAX_ROWS", "Setting", "Summary", "SweepRow", "Blame", "parse_setting", "size", "solve_row", "summarize",
           "variant", "iter_sweep", "sweep", "Estimate", "estimate", "SLOW_SECONDS"]

MAX_ROWS = 100_000


def parse_setting(text: str) -> Setting:
    """`hardware.gpus=64,128` -> Setting; PlanError naming the option when malformed."""
    where = Location(f"--set {text}")
    path, sep, values = text.partition("=")
    path = path.strip()
    if not sep or not path or not values.strip():
        raise PlanError([Diagnostic(where, "usage", "expected PATH=VALUE[,VALUE...]",
                                    "e.g. --set hardware.gpus=64,128,256")])
    if field_info(tuple(path.split("."))) is None or isinstance(field_spec(tuple(path.split("."))), type):
        raise PlanError([Diagnostic(where, "unknown-key", f"{path!r} is not a field of the plan",
                                    did_you_mean(path, numeric_paths()))])
    items = tuple(v.strip() for v in values.split(","))
    if any(not v for v in items):
        raise PlanError([Diagnostic(where, "usage", "empty value in the list")])
    return Setting(path, items)


def size(settings: list[Setting]) -> int:
    """The number of combinations; PlanError above MAX_ROWS, or for a path given twice (each row
    would silently take the last value, and every row would repeat)."""
    seen: set[str] = set()
    for s in settings:
        if s.path in seen:
            raise PlanError([Diagnostic(Location(f"--set {s.path}=..."), "usage",
                                        f"{s.path} is set twice", "give all its values in one "
                                        f"--set {s.path}=V1,V2,...")])
        seen.add(s.path)
    n = 1
    for s in settings:
        n *= len(s.values)
    if n > MAX_ROWS:
        raise PlanError([Diagnostic(Location("--set"), "too-large",
                                    f"the sweep has {n:,} combinations; the limit is {MAX_ROWS:,}")])
    return n


def iter_sweep(source: MergedSource, settings: list[Setting], full: bool = True,
               cache: SolveCache | None = None) -> Iterator[SweepRow]:
    """Solve every combination, one row at a time, in the order of the settings (the last varies
    fastest): a caller that writes each row and drops it holds one row in memory, however many
    points the sweep has (a list of 40,000 rows held 3.2 GB). `full=False`: rows carry only their
    `Summary` where the kernel answers them (the kernel works in chunks of rows). `cache`: the
    cost models and search spaces of an `estimate` already made (solve.cache.SolveCache)."""
    rows = size(settings)
    if not full and _use_kernel(rows):
        try:
            from budgetdsl.solve.sweep_kernel import iter_kernel_rows
        except ImportError:  # numpy is a core dependency; an install without it takes the scalar path
            pass
        else:
            yield from iter_kernel_rows(source, settings, cache)
            return
    blame = Blame(source, cache)
    for combo in itertools.product(*(s.values for s in settings)):
        yield solve_row(source, {s.path: v for s, v in zip(settings, combo)}, blame)


# The kernel builds every layout × GPU-count pair's numbers before its first row: a few
# milliseconds on a fixed layout, seconds for a searched GPU range of thousands of pairs (a 7B plan
# on 64–2048 GPUs with every layout key auto: 3,925 pairs, 1 row in 2.6 s against 1.5 s with
# solve()). Fewer rows than this go through solve(), row for row the same answers.
KERNEL_MIN_ROWS = 32


def _use_kernel(rows: int) -> bool:
    """BUDGETDSL_SWEEP_SCALAR=1: never (solve() per row); =0: always; unset: from KERNEL_MIN_ROWS rows."""
    forced = os.environ.get("BUDGETDSL_SWEEP_SCALAR")
    if forced:
        return forced.strip() == "0"
    return rows >= KERNEL_MIN_ROWS


def sweep(source: MergedSource, settings: list[Setting], full: bool = True) -> list[SweepRow]:
    """Every row of `iter_sweep`, as a list."""
    return list(iter_sweep(source, settings, full))


# The sweep's cost, counted rather than timed (the same answer on every machine and every run):
# each row places the layout × GPU-count pairs of its search space, so the work is rows × pairs.
# Seconds per pair-row and per row, rounded up from this project's measurements on one CPU core:
# solve() per row ~60–150 µs per pair (a 7B plan on 8–2,048 GPUs with every layout key searched,
# 16,176 pairs: 1–2.5 s a row); the kernel ~15 µs per pair-row (the same plan, 402 rows of limits:
# ~100 s of CPU) and far less on small spaces. docs/cli.md, "sweep", states the model.
_PAIR_SECONDS = {"kernel": 1e-5, "scalar": 1e-4}
_ROW_SECONDS = {"kernel": 2e-5, "scalar": 5e-3}
SLOW_SECONDS = 600.0  # a sweep estimated past this is refused without --yes


_SPACES_COUNTED = 256  # distinct search spaces counted; a sweep of more is sampled evenly


@dataclass(frozen=True)
class Estimate:
    """What a sweep will cost: `rows` on `path`, each row placing the pairs of its own search
    space; `pairs` is the widest row's (`uniform`: every row has that many)."""

    rows: int
    pairs: int
    path: str  # "kernel" (limits, target, B_crit, objective: rows placed together) | "scalar"
    seconds: float
    uniform: bool = True


def estimate(source: MergedSource, settings: list[Setting], full: bool = True,
             cache: SolveCache | None = None) -> Estimate | None:
    """The sweep's estimated cost (see _PAIR_SECONDS), counted over every row's own search space:
    the space depends on the plan's model and hardware alone, so each combination of the settings
    under `model.` and `hardware.` is one space, counted once (an evenly spaced sample of
    _SPACES_COUNTED of them when there are more); a row whose plan does not load costs a row.
    None when no row's plan loads (each row reports why). Solves nothing; the spaces are kept in
    `cache` for the sweep."""
    from budgetdsl.solve.search_space import search_space

    rows = size(settings)
    path = "kernel" if not full and _use_kernel(rows) and _kernel_paths(settings) else "scalar"
    shaping = [s for s in settings if s.path.startswith(("model.", "hardware."))]
    others = {s.path: s.values[0] for s in settings if s not in shaping}
    spaces = 1
    for s in shaping:
        spaces *= len(s.values)
    step = max(1, -(-spaces // _SPACES_COUNTED))  # ceil: at most _SPACES_COUNTED counted
    cache = SolveCache() if cache is None else cache
    counted: list[int | None] = []  # pairs of each counted space; None: its plan does not load
    for index in range(0, spaces, step):
        combo: dict[str, str] = {}
        rest = index
        for s in reversed(shaping):  # the index's combination (the last setting varies fastest)
            rest, i = divmod(rest, len(s.values))
            combo[s.path] = s.values[i]
        counted.append(_pairs(source, combo, others, cache, search_space))
    loaded = [n for n in counted if n is not None]
    if not loaded:
        return None
    per_row = sum(_ROW_SECONDS[path] + (0 if n is None else max(n, 1) * _PAIR_SECONDS[path]) for n in counted)
    return Estimate(rows, max(loaded), path, rows * per_row / len(counted), uniform=len(set(counted)) == 1)


def _pairs(source: MergedSource, combo: dict[str, str], others: dict[str, str], cache, search_space) -> int | None:
    """The search space's pair count of the plan with `combo` set and the other paths at their first
    --set values (the file's own when those do not load); None if neither loads."""
    for values in ({**others, **combo}, combo):
        try:
            return len(search_space(variant(source, values), cache).pairs)
        except (PlanError, ValueError):
            continue
    return None


def _kernel_paths(settings: list[Setting]) -> bool:
    """Whether the kernel models every swept path (`sweep_kernel.SUPPORTED`)."""
    try:
        from budgetdsl.solve.sweep_kernel import SUPPORTED
    except ImportError:  # no numpy: every row is solved
        return False
    return all(s.path in SUPPORTED for s in settings)
