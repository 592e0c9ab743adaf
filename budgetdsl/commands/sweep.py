"""`budgetdsl sweep PLAN --set PATH=V1,V2 ...`: the what-if table a reviewer asks for.

Solves the cross product of the given values in one process, without editing files, and prints
one row per combination (text table, JSON with the full solutions, or CSV with exact numbers).
Exit 0 (whatever the rows' feasibility: a sweep explores), 2 on invalid input or on a sweep whose
counted cost (each row's search pairs, `budgetdsl.solve.sweep.estimate`) passes 10 minutes, unless --yes.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import sys
from collections.abc import Iterator

from budgetdsl.io.exit_codes import ExitCode
from budgetdsl.io.terminal_text import inert
from budgetdsl.plan.diagnostics import PlanError

_COLUMNS = (  # (header, unit for report.human, getter of a sweep.Summary)
    ("feasible", None, lambda s: "yes" if s.feasible else "NO"),
    ("gpus", "GPUs", lambda s: s.gpus),
    ("batch", "tokens", lambda s: s.batch_tokens),
    ("micro", None, lambda s: s.micro_batch),
    ("accum", None, lambda s: s.grad_accum),
    ("dp", None, lambda s: s.data_parallel),
    ("steps", None, lambda s: s.steps),
    ("wall clock", "s", lambda s: s.wall_clock_s),
    ("GPU-hours", "GPU-h", lambda s: s.gpu_hours),
    ("cost", "USD", lambda s: s.usd),
    ("x", "1", lambda s: s.x),
    ("binding", None, lambda s: ",".join(s.binding) or "none"),
)


def _cell(unit, value) -> str:
    from budgetdsl.quantities.humanize import human

    if value is None:
        return "—"
    if unit is None:
        return f"{value:,}" if isinstance(value, int) else str(value)
    if unit == "GPUs":
        return f"{value:,}"
    return human(unit, value)


# Each renderer takes an iterable of rows and yields the output in pieces, so that `run` writes
# each row as it is solved: CSV and JSON hold one row in memory whatever the sweep's size; the
# text table keeps only the cells' strings (its columns are as wide as their widest cell).

def _reason(row) -> str:
    """An invalid row's first problem, one line (its located diagnostics go to stderr)."""
    d = row.error.diagnostics[0] if row.error.diagnostics else None
    return "invalid" if d is None else f"{d.code}: {d.message}".replace("\n", " ")


def _reported(rows, invalid: list):
    """The rows, each invalid one's diagnostics written to stderr as it passes (and counted)."""
    for r in rows:
        if r.error is not None:
            r.error.report()
            invalid.append(r)
        yield r


def iter_table(rows, settings) -> Iterator[str]:
    header = [s.path for s in settings] + [c[0] for c in _COLUMNS]
    body = [[r.values[s.path] for s in settings] + ([_cell(u, get(r.summary)) for _, u, get in _COLUMNS]
             if r.error is None else ["invalid"] + ["—"] * (len(_COLUMNS) - 2) + [_reason(r)])
            for r in rows]
    # a cell is one line: a newline in a --set value or a reason must not forge a row
    body = [[inert(c, keep_lines=False) for c in line] for line in body]
    widths = [max(len(line[i]) for line in [header, *body]) for i in range(len(header))]
    for line in [header, *body]:
        yield "  ".join(c.ljust(w) for c, w in zip(line, widths)).rstrip() + "\n"


_CSV_BATCH = 512  # rows written per piece


def iter_csv(rows, settings) -> Iterator[str]:
    """The CSV, csv.writer's dialect (minimal quoting, "\\n" lines): a summary's fields joined here
    as csv.writer writes them (None empty, every other number and bool its str(), the strings
    quoted by csv.writer itself, once per distinct text), cheaper than a writerow() per row.
    Written in pieces of _CSV_BATCH rows."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")

    def written(cells: list) -> str:
        writer.writerow(cells)
        text = out.getvalue()
        out.seek(0)
        out.truncate()
        return text

    quoted: dict[str, str] = {}

    def cell(text: str) -> str:
        """`text` as csv.writer writes it among other fields (quoted only where it must be)."""
        q = quoted.get(text)
        if q is None:
            q = quoted[text] = written([text, ""])[:-2]
        return q

    paths = [x.path for x in settings]
    lines = [written(paths + ["feasible", "gpus", "batch_tokens", "micro_batch", "grad_accum",
                              "data_parallel", "steps", "tokens", "flops", "wall_clock_s", "gpu_hours",
                              "usd", "x", "binding"])]
    for r in rows:
        s = r.summary
        values = r.values
        if s is None:
            lines.append(written([values[p] for p in paths] + ["invalid"] + [""] * 12 + [_reason(r)]))
        elif s.feasible:  # every number present but the cost without a price (f"{v}" is str(v))
            usd = "" if s.usd is None else s.usd
            lines.append(f"{','.join([cell(values[p]) for p in paths])},{s.feasible},{s.gpus},{s.batch_tokens},"
                         f"{s.micro_batch},{s.grad_accum},{s.data_parallel},{s.steps},{s.tokens},{s.flops},"
                         f"{s.wall_clock_s},{s.gpu_hours},{usd},{s.x},{cell(';'.join(s.binding))}\n")
        else:
            lines.append(",".join([*[cell(values[p]) for p in paths], *[
                "" if v is None else str(v)
                for v in (s.feasible, s.gpus, s.batch_tokens, s.micro_batch, s.grad_accum, s.data_parallel,
                          s.steps, s.tokens, s.flops, s.wall_clock_s, s.gpu_hours, s.usd, s.x)],
                cell(";".join(s.binding))]) + "\n")
        if len(lines) >= _CSV_BATCH:
            yield "".join(lines)
            lines.clear()
    yield "".join(lines)


def iter_json(rows, settings) -> Iterator[str]:
    """A JSON array of {"set", "solution"} written row by row, indented by 2. Each solution is
    pydantic's own JSON (far cheaper than json.dumps of model_dump); solve() has refused any
    non-finite number, so the JSON is strict."""
    first = True
    for r in rows:
        body = (r.solution.model_dump_json(indent=2) if r.solution is not None else
                json.dumps({"invalid": _reason(r)}, indent=2))
        item = ('{\n  "set": ' + json.dumps(r.values, indent=2, allow_nan=False).replace("\n", "\n  ")
                + (',\n  "solution": ' if r.solution is not None else ',\n  "error": ')
                + body.replace("\n", "\n  ") + "\n}")
        yield ("[\n  " if first else ",\n  ") + item.replace("\n", "\n  ")
        first = False
    yield "[]\n" if first else "\n]\n"


def render_table(rows, settings) -> str:
    return "".join(iter_table(rows, settings))


def render_csv(rows, settings) -> str:
    return "".join(iter_csv(rows, settings))


def render_json(rows, settings) -> str:
    return "".join(iter_json(rows, settings))


def run(args: argparse.Namespace) -> int:
    from budgetdsl.plan.loader import read_merged
    from budgetdsl.solve.sweep import iter_sweep, parse_setting, size

    try:
        settings = [parse_setting(text) for text in args.set]
        source = read_merged(args.plan)
        size(settings)
        from budgetdsl.solve.cache import SolveCache

        cache = SolveCache()  # the estimate's search spaces are the sweep's
        if not args.yes:
            _refuse_if_slow(source, settings, args.format == "json", cache)
        # Rows are written as they are solved; a combination that does not load stops the sweep
        # with its located diagnostics (exit 2), after the rows before it.
        render = {"text": iter_table, "json": iter_json, "csv": iter_csv}[args.format]
        invalid: list = []  # invalid combinations are rows too; the exit code says there were some
        # JSON prints whole solutions (the scalar path); the table and CSV print summaries, which
        # the vectorized kernel computes for the rows it can decide (budgetdsl.solve.sweep_kernel)
        rows = iter_sweep(source, settings, args.format == "json", cache)
        from budgetdsl.io.terminal_text import json_text  # --set values: shown, not obeyed

        escape = json_text if args.format == "json" else inert
        for piece in render(_reported(rows, invalid), settings):
            sys.stdout.write(escape(piece))
        if invalid:
            return ExitCode.INVALID
    except PlanError as exc:
        exc.report()
        return ExitCode.INVALID
    return ExitCode.OK


def _refuse_if_slow(source, settings, full: bool, cache) -> None:
    """PlanError (exit 2) before any row is solved when the sweep's counted cost
    (`budgetdsl.solve.sweep.estimate`) passes SLOW_SECONDS: hours of solving are asked for with --yes."""
    from budgetdsl.plan.diagnostics import Diagnostic, Location
    from budgetdsl.solve.sweep import SLOW_SECONDS, estimate

    est = estimate(source, settings, full, cache)
    if est is None or est.seconds <= SLOW_SECONDS:
        return
    how = ("the vectorized kernel" if est.path == "kernel" else
           "solve() per row" + (" (--format json prints whole solutions)" if full else ""))
    raise PlanError([Diagnostic(
        Location("--set"), "too-slow",
        f"the sweep would take about {_duration(est.seconds)}: {est.rows:,} rows × "
        f"{'' if est.uniform else 'up to '}{est.pairs:,} layout × GPU-count pairs each, by {how}",
        "narrow hardware.gpus, give tensor_parallel, pipeline_parallel, zero and recompute, or give fewer "
        "values; --yes runs it anyway")])


def _duration(seconds: float) -> str:
    for unit, size in (("days", 86400), ("hours", 3600), ("minutes", 60)):
        if seconds >= 2 * size:
            return f"{seconds / size:,.0f} {unit}"
    return f"{seconds:,.0f} s"


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("sweep", help="solve a plan over combinations of changed values",
                       description="Solve the cross product of --set values in one process, without "
                       "editing files. Values use the plan language: 64, 14 days, 2T, 20 * model.params.")
    p.add_argument("plan", metavar="PLAN", help="a plan file")
    p.add_argument("--set", action="append", default=[], metavar="PATH=V1,V2",
                   help="a field and its values, e.g. hardware.gpus=64,128,256 (repeatable)")
    p.add_argument("--format", choices=("text", "json", "csv"), default="text")
    p.add_argument("--yes", action="store_true",
                   help="run a sweep whose estimated cost is past 10 minutes (refused otherwise)")
    p.set_defaults(handler=run)
