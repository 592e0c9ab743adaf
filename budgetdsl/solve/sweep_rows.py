"""A sweep's rows: each combination of --set values as a plan (`variant`, through the plan language
exactly as if written in the file), solved by `solve()` (`solve_row`) or summarised by the sweep
kernel (`Summary`, field for field what `summarize` makes of a solution), and where an invalid row's
problems are reported (`Blame`). Shared by `sweep` and `sweep_kernel`, which import neither other.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from budgetdsl.plan.diagnostics import Diagnostic, Location, PlanError
from budgetdsl.plan.loader import MergedSource, field_spec, load_merged
from budgetdsl.plan.model import Plan, QuantitySpec
from budgetdsl.solve.solution import recompute_label

if TYPE_CHECKING:  # the solution's models are imported by solve(); a kernel-only sweep never builds one
    from budgetdsl.solve.cache import SolveCache
    from budgetdsl.solve.solution import Solution


@dataclass(frozen=True, slots=True)
class Setting:
    """One `--set path=v1,v2,...`."""

    path: str
    values: tuple[str, ...]


@dataclass(slots=True)  # not frozen: many are built, and a frozen one builds slower
class Summary:
    """What a sweep's table and CSV show of one row's answer (`summarize(solution)`, or the
    kernel's own numbers, which equal it field for field)."""

    status: str  # optimal | pinned | infeasible
    feasible: bool
    gpus: int | None
    batch_tokens: float | None
    micro_batch: int | None
    grad_accum: int | None
    data_parallel: int | None
    tensor_parallel: int
    pipeline_parallel: int
    zero: int | None
    recompute: str
    steps: int | None
    tokens: float | None
    flops: float | None
    wall_clock_s: float | None
    gpu_hours: float | None
    usd: float | None
    x: float | None
    binding: tuple[str, ...]  # the binding constraints, in the solution's order


def summarize(s: Solution) -> Summary:
    b = s.batch
    return Summary(str(s.status), s.feasible, s.gpus, b.tokens, b.micro_batch, b.grad_accum, b.data_parallel,
                   b.tensor_parallel, b.pipeline_parallel, b.zero,
                   recompute_label(str(b.recompute), b.recompute_layers, b.virtual_pipeline_stages), s.steps, s.tokens,
                   s.flops, s.wall_clock_s, s.gpu_hours, s.usd, s.frontier.x,
                   tuple(c.name for c in s.constraints if c.binding))


@dataclass(frozen=True)
class SweepRow:
    values: dict[str, str]  # path -> the value as given
    plan: Plan | None
    solution: Solution | None  # None for a row the kernel answered (full=False)
    error: PlanError | None = None  # the combination is invalid: its located diagnostics
    summary: Summary | None = None  # what the table and CSV show; None for an invalid row


def _with(data: dict[str, Any], path: str, value: str) -> dict[str, Any]:
    """`data` with `path` set; the mappings along the path are copied, the rest is shared (the
    evaluator never mutates a document, and a deep copy per variant was a tenth of a sweep)."""
    data = dict(data)
    node = data
    keys = path.split(".")
    for key in keys[:-1]:
        node[key] = dict(node[key]) if isinstance(node.get(key), dict) else {}
        node = node[key]
    spec = field_spec(tuple(keys))
    node[keys[-1]] = value if isinstance(spec, QuantitySpec) else _scalar(value)
    return data


def _scalar(value: str) -> Any:
    """Non-numeric fields take YAML's plain scalars: true/false, names."""
    if value.lstrip("-").isdigit():  # a choice among numbers (hardware.zero: 0-3)
        return int(value)
    return {"true": True, "false": False, "null": None}.get(value.lower(), value)


def variant(source: MergedSource, values: dict[str, str]) -> Plan:
    """The plan with `values` set (path -> text in the plan language), validated. A problem at a
    set path, found by the loader or by `solve()` (the plan keeps this source), points at the
    option: the path's value and key, and whatever the file wrote below it, stand at `--set`."""
    if not values:
        return load_merged(source)
    data = source.data
    for path, value in values.items():
        data = _with(data, path, value)
    at = {tuple(path.split(".")): Location(f"--set {path}={value}") for path, value in values.items()}
    kept_values, kept_keys, kept_spans = _kept(source, frozenset(at))
    return load_merged(MergedSource(data, kept_values | at, kept_keys | at, source.files, dict(kept_spans),
                                    source.key_spans, source.texts, source.paths, source.opener))


_KEPT: list = [None]  # (source, set paths, the tables without them): the last asked for


def _kept(source: MergedSource, paths: frozenset) -> tuple[dict, dict, dict]:
    """The source's value, key and span tables without the entries at or below `paths`, kept for
    the next variant that sets the same paths (a sweep's axis: filtering the three tables was
    a seventh of a variant's load)."""
    hit = _KEPT[0]
    if hit is not None and hit[0] is source and hit[1] == paths:
        return hit[2]

    def kept(table: dict) -> dict:
        return {k: v for k, v in table.items() if not any(k[:len(s)] == s for s in paths)}
    tables = (kept(source.values), kept(source.keys), kept(source.spans))
    _KEPT[0] = (source, paths, tables)
    return tables


class Blame:
    """Where a sweep row's problems are reported. A problem the plan file alone has stays at its
    line; one that only the row's --set values bring (a cross-field rule, an expression of the file
    that reads a set path, a `solve()` error at a path the set values reach) is reported at the
    --set that causes it, with the line it was found at as a note. The cause: each --set of the row
    that brings the problem alone; else each whose removal takes it away; else all of them. A
    problem is its (code, message); each variant is loaded (and solved) once per sweep. One per
    sweep: its rows' solves share `cache` (`solve.cache.SolveCache`: cost models, the search)."""

    def __init__(self, source: MergedSource, cache: SolveCache | None = None) -> None:
        from budgetdsl.solve.cache import SolveCache

        self.source = source
        self.cache = SolveCache() if cache is None else cache
        self.seen: dict[tuple[frozenset, bool], frozenset[tuple[str, str]]] = {}
        self.paths: dict[Location, tuple] | None = None  # where -> the file's path written there

    def problems(self, values: dict[str, str], solved: bool) -> frozenset[tuple[str, str]]:
        """The problems of the plan with `values` set: of loading it, and with `solved`, of
        solving it when it loads."""
        key = (frozenset(values.items()), solved)
        found = self.seen.get(key)
        if found is None:
            from budgetdsl.solve.solver import solve

            found = frozenset()
            try:
                plan = variant(self.source, values)
                if solved:
                    solve(plan, self.cache)
            except PlanError as exc:
                found = frozenset((d.code, d.message) for d in exc.diagnostics)
            self.seen[key] = found
        return found

    def located(self, values: dict[str, str], exc: PlanError, solved: bool) -> PlanError:
        """The row's error (`solved`: raised by solve(), else by loading), each problem located."""
        mine = frozenset((d.code, d.message) for d in exc.diagnostics)
        self.seen[(frozenset(values.items()), solved)] = mine
        if not solved:
            self.seen[(frozenset(values.items()), True)] = mine
        out: list[Diagnostic] = []
        for d in exc.diagnostics:
            if not values or (d.code, d.message) in self.problems({}, solved):
                out.append(d)  # the plan file's own
                continue
            causes = self._causes(values, (d.code, d.message), solved)
            where = Location(" ".join(f"--set {p}={values[p]}" for p in causes))
            out.append(Diagnostic(where, d.code, d.message, d.hint, d.severity))
            path = self._path_at(d.location)
            if path:  # the line of the file it was found at (a --set one is on the command line)
                out.append(Diagnostic(d.location, d.code, f"found at {path}, written here; the plan file "
                                      "alone has no such problem", severity="note"))
        return PlanError(out)

    def _causes(self, values: dict[str, str], problem: tuple[str, str], solved: bool) -> list[str]:
        alone = [p for p in values if problem in self.problems({p: values[p]}, solved)]
        if alone:
            return alone
        needed = [p for p in values
                  if problem not in self.problems({q: v for q, v in values.items() if q != p}, solved)]
        return needed or list(values)

    def _path_at(self, where: Location) -> str | None:
        """The path the plan file writes at `where`; None for the top level, or off the file."""
        if self.paths is None:
            self.paths = {**{loc: path for path, loc in self.source.values.items()},
                          **{loc: path for path, loc in self.source.keys.items()}}
        return ".".join(map(str, self.paths.get(where, ()))) or None


def solve_row(source: MergedSource, values: dict[str, str], blame: Blame | None = None) -> SweepRow:
    """One combination through the plan language and `solve()`: the scalar path. Every invalid
    row of a sweep passes here; `blame` (one per sweep) locates its problems and holds the cache
    the rows' solves share."""
    from budgetdsl.solve.solver import solve

    blame = blame or Blame(source)
    solved = False
    try:  # an invalid combination is a row that says so; the sweep goes on (issue 13 item 7)
        plan = variant(source, values)
        solved = True
        solution = solve(plan, blame.cache)
        return SweepRow(values, plan, solution, summary=summarize(solution))
    except PlanError as exc:
        return SweepRow(values, None, None, blame.located(values, exc, solved))
