"""Render plan diffs: a terminal table, Markdown for a pull-request comment, and JSON.

The Markdown is concise by design — one row per plan, the details folded in `<details>` — since a
reviewer reads it in a PR thread. Deterministic bytes: plans sorted by path, no clocks.
"""

from __future__ import annotations

import json
from dataclasses import asdict

from budgetdsl.io.markdown_text import code, html, inline
from budgetdsl.quantities.humanize import human
from budgetdsl.report.plan_diff import Change, Metric, PlanDiff

_LABELS = {
    "status": "status", "gpus": "GPUs", "batch": "global batch", "micro_batch": "micro-batch",
    "grad_accum": "accumulation", "data_parallel": "data parallel", "steps": "steps",
    "tokens": "tokens", "flops": "FLOPs", "wall_clock": "wall clock", "gpu_hours": "GPU-hours",
    "usd": "cost", "b_crit": "B_crit", "x": "x = B/B_crit", "s_over_smin": "S/S_min",
    "e_over_emin": "E/E_min", "binding": "binding limit", "ramp_stages": "ramp stages",
    "ramp_steps": "ramp steps", "ramp_tokens": "ramp tokens", "ramp_wall_clock": "ramp wall clock",
    "ramp_saves_steps": "ramp saves steps", "ramp_saves_tokens": "ramp saves tokens",
    "ramp_saves_wall_clock": "ramp saves wall clock",
}
_SUMMARY = ("batch", "steps", "wall_clock", "gpu_hours", "binding")


def _value(m: Metric, v: float | str | None) -> str:
    if v is None:
        return "—"
    if isinstance(v, str):
        return v
    if m.unit in ("steps", "sequences", "stages"):
        return f"{v:,.0f}"
    return human(m.unit, v)


def _move(m: Metric) -> str:
    old, new = _value(m, m.old), _value(m, m.new)
    if not m.changed:
        return new
    ratio = m.ratio
    tail = f" (×{ratio:.3g})" if ratio is not None and m.name not in ("status", "binding") else ""
    return f"{old} → {new}{tail}"


def _feasibility(d: PlanDiff) -> str:
    word = {True: "feasible", False: "infeasible", None: "—"}
    if d.change is Change.invalid:
        return f"{word[d.old_feasible]} → invalid" if d.old_feasible is not None else "invalid"
    if d.change is Change.added:
        return word[d.new_feasible]
    if d.change is Change.removed:
        return f"was {word[d.old_feasible]}"
    if d.old_feasible == d.new_feasible:
        return word[d.new_feasible]
    return f"{word[d.old_feasible]} → {word[d.new_feasible]}"


def _table(rows: list[list[str]]) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  " + "  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]


def render_diff_text(diffs: list[PlanDiff]) -> str:
    from budgetdsl.io.terminal_text import inert

    def one(text: str) -> str:  # plan text on one line: it forges no line of the report
        return inert(text, keep_lines=False)

    lines: list[str] = []
    for d in diffs:
        if d.change is Change.unchanged:
            continue
        flag = "  REGRESSION" if d.regressed else ""
        lines.append(f"{one(d.path)} ({one(d.name)}): {d.change} — {_feasibility(d)}{flag}")
        for problem in d.problems:
            lines.append(f"  {problem}")
        if d.inputs:
            lines.append("  inputs")
            lines.extend(_table([[one(i.path), one(i.old or "—"), "→", one(i.new or "—")] for i in d.inputs]))
        moved = [m for m in d.metrics if m.changed] if d.change is not Change.invalid else []
        if moved:
            lines.append("  outcome")
            lines.extend(_table([[_LABELS[m.name], _value(m, m.old), "→", _value(m, m.new),
                                  f"×{m.ratio:.3g}" if m.ratio is not None and m.name != "status" else ""]
                                 for m in moved]))
        lines.append("")
    regressions = sum(d.regressed for d in diffs)
    counts = {c: sum(d.change is c for d in diffs) for c in Change}
    summary = ", ".join(f"{n} {c}" for c, n in counts.items() if n)
    unchanged = [one(d.name) for d in diffs if d.change is Change.unchanged]
    if unchanged:
        lines.append("unchanged: " + ", ".join(unchanged))
    lines.append(f"{len(diffs)} plan{'s' if len(diffs) != 1 else ''}: {summary or 'none'}"
                 + (f"; {regressions} became infeasible" if regressions else ""))
    return "\n".join(lines) + "\n"


def _md(text: str) -> str:
    return inline(text)


def render_diff_markdown(diffs: list[PlanDiff]) -> str:
    shown = [d for d in diffs if d.change is not Change.unchanged]
    out = ["### budgetdsl: what this change does to the runs", ""]
    if not shown:
        out.append(f"No plan changes ({len(diffs)} plan{'s' if len(diffs) != 1 else ''} compared).")
        return "\n".join(out) + "\n"
    header = ["plan", "change", "feasible", *(_LABELS[n] for n in _SUMMARY)]
    out.append("| " + " | ".join(header) + " |")
    out.append("|" + "---|" * len(header))
    for d in shown:
        cells = [code(d.name), str(d.change),
                 ("⚠️ " if d.regressed else "") + _feasibility(d)]
        for name in _SUMMARY:
            m = d.metric(name)
            cells.append(_md(_move(m)) if m is not None and (m.old is not None or m.new is not None) else "—")
        out.append("| " + " | ".join(cells) + " |")
    for d in shown:
        out += ["", f"<details><summary><code>{html(d.path)}</code>: {len(d.inputs)} input"
                f"{'s' if len(d.inputs) != 1 else ''} changed</summary>", ""]
        for problem in d.problems:
            out.append(f"- {_md(problem)}")
        if d.inputs:
            out += ["| input | before | after |", "|---|---|---|"]
            out += [f"| {code(i.path)} | {_md(i.old or '—')} | {_md(i.new or '—')} |" for i in d.inputs]
            out.append("")
        moved = [m for m in d.metrics if m.changed] if d.change is not Change.invalid else []
        if moved:
            out += ["| outcome | before | after |", "|---|---|---|"]
            out += [f"| {_LABELS[m.name]} | {_md(_value(m, m.old))} | {_md(_value(m, m.new))} |" for m in moved]
        out += ["", "</details>"]
    return "\n".join(out) + "\n"


def render_diff_json(diffs: list[PlanDiff]) -> str:
    payload = [{**asdict(d), "regressed": d.regressed} for d in diffs]
    return json.dumps({"plans": payload, "regressed": any(d.regressed for d in diffs)}, indent=2) + "\n"
