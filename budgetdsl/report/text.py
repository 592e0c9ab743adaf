"""Render a Solution for people: a plain-text table (`render_text`) and Markdown for pull-request
comments (`render_markdown`); JSON is the model dump (`render_json`). Pure functions, deterministic
bytes (no clocks, no terminal widths, no dict-order surprises), numbers for people:
4.19M tokens, 3.1 days, 1.2e23 FLOP, 74.5 GiB.
"""

from __future__ import annotations

from collections.abc import Sequence

from budgetdsl.quantities.humanize import data, human, si, significant
from budgetdsl.solve.placement import TIGHT, binds
from budgetdsl.solve.solution import Constraint, Solution, recompute_label


def _count(v: int | None) -> str:
    return "—" if v is None else f"{v:,}"


def _headline(sol: Solution) -> str:
    word = {"optimal": "feasible", "pinned": "feasible (pinned run)", "infeasible": "INFEASIBLE"}[sol.status]
    from budgetdsl.io.terminal_text import (
        inert,  # plan text on one line: it forges no line of the report
    )

    return f"{inert(sol.plan, keep_lines=False)}: {word} — objective {sol.objective}, status {sol.status}"


def _item(text: str) -> str:
    """One item of a list in the report: one line, whatever outside text (a device name, a plan
    value) it quotes: a line break in it is escaped, it forges no line of the report."""
    from budgetdsl.io.terminal_text import one_line

    return f"  - {one_line(text)}"


def _warning_lines(w) -> list[str]:
    """A located warning as a list item: its head on one line, its hint's lines below it."""
    from budgetdsl.plan.diagnostics import Diagnostic, Location

    head, *rest = Diagnostic(Location(w.file, w.line, w.col), w.code, w.message, w.hint, "warning").lines()
    return [f"  - {head}", *(f"  {line}" for line in rest)]


def _launch_rows(sol: Solution) -> list[tuple[str, str]]:
    b = sol.batch
    rows = [("GPUs", _count(sol.gpus) + (f" (dp {b.data_parallel})" if b.data_parallel else ""))]
    if b.tokens is not None:
        rows += [
            ("global batch", f"{human('tokens', b.tokens)} = {_count(b.sequences)} sequences"),
            ("micro-batch", f"{b.micro_batch} per device × {b.grad_accum} accumulation × "
                            f"{b.data_parallel} replicas"),
            ("layout", _layout_text(b.tensor_parallel, b.pipeline_parallel, b.zero, b.recompute,
                                    b.recompute_layers, b.virtual_pipeline_stages)
             + (f" · CP {b.context_parallel}" if b.context_parallel is not None else "")
             + (f" · EP {b.expert_parallel}" if b.expert_parallel is not None else "")
             + _schedule_text(b.sequence_parallel, b.virtual_pipeline_stages, b.pipeline_split_slots)
             + (" (searched)" if sol.layout is not None else "")),
            ("steps", _count(sol.steps)),
            *outcome_rows(sol),
        ]
    return rows


def _layout_text(tp: int, pp: int, zero: int | None, recompute: str | None, recompute_layers: int | None = None,
                 virtual_stages: int | None = None) -> str:
    return (f"TP {tp} · PP {pp}" + ("" if zero is None else f" · ZeRO {zero}")
            + ("" if recompute is None else
               f" · recompute {recompute_label(recompute, recompute_layers, virtual_stages)}"))


def _schedule_text(sequence_parallel: bool | None, virtual_stages: int | None,
                   split_slots: list[str] | None = None) -> str:
    """Sequence parallelism and interleaving, where the search chose them, and what the pipeline
    split counts as a layer beside the transformer layers (Megatron-Core's accounted split)."""
    return ((f" · SP {'on' if sequence_parallel else 'off'}" if sequence_parallel is not None else "")
            + (f" · v {virtual_stages}" if virtual_stages is not None else "")
            + (f" · split counts {' + '.join(split_slots)}" if split_slots else ""))


_LAYOUT_HEADER = ("layout", "GPUs", "batch", "micro", "wall clock", "GPU-hours", "FLOPs", "vs winner")


def _layout_rows(sol: Solution) -> list[tuple[str, ...]]:
    """The chosen layout and its runners-up, each at its own best configuration."""
    ls = sol.layout
    assert ls is not None
    rows: list[tuple[str, ...]] = []
    for o, tag in ([(ls.chosen, "chosen")] if ls.chosen else []) + [(r, "") for r in ls.runners_up]:
        vs = tag or ("dominated" if o.dominated else
                     "—" if o.objective_ratio is None else f"{o.objective_ratio:.3g}×")
        rows.append((_layout_text(o.tensor_parallel, o.pipeline_parallel, o.zero, o.recompute, o.recompute_layers,
                                  o.virtual_pipeline_stages)
                     + _schedule_text(o.sequence_parallel, o.virtual_pipeline_stages,
                                      sol.batch.pipeline_split_slots if o.pipeline_parallel > 1 else None),
                     f"{o.gpus:,}",
                     human("tokens", o.batch_tokens), str(o.micro_batch), human("s", o.wall_clock_s),
                     human("GPU-h", o.gpu_hours), human("FLOP", o.flops), vs))
    return rows


_FRONT_HEADER = ("GPUs", "batch", "x", "layout", "wall clock", "GPU-hours", "FLOPs", "objectives")


def _front_rows(sol: Solution) -> list[tuple[str, ...]]:
    """A few points of the Pareto front and where each objective lands."""
    return [(f"{p.gpus:,}", human("tokens", p.batch_tokens), significant(p.x),
             _layout_text(p.tensor_parallel, p.pipeline_parallel, p.zero, p.recompute, p.recompute_layers,
                          p.virtual_pipeline_stages), human("s", p.wall_clock_s),
             human("GPU-h", p.gpu_hours), human("FLOP", p.flops),
             ", ".join(p.objectives) + (" ◀ launched" if p.chosen else "")) for p in sol.front]


def outcome_rows(sol: Solution) -> list[tuple[str, str]]:
    """What the launched configuration costs: tokens, FLOPs, wall clock, GPU-hours (and money)."""
    rows = [
        ("tokens", human("tokens", sol.tokens)),
        ("FLOPs", human("FLOP", sol.flops)),
        ("wall clock", human("s", sol.wall_clock_s)),
        ("GPU-hours", human("GPU-h", sol.gpu_hours)),
    ]
    if sol.usd is not None:
        rows.append(("cost", human("USD", sol.usd)))
    return rows


def _frontier_rows(sol: Solution) -> list[tuple[str, str]]:
    f = sol.frontier
    unc = f" ±{f.b_crit_uncertainty:.0%}" if f.b_crit_uncertainty else ""
    rows = [("B_crit", f"{human('tokens', f.b_crit_tokens)}{unc} — {f.b_crit_source}"),
            ("S_min", f"{si(f.s_min)} steps"), ("E_min", human("tokens", f.e_min_tokens))]
    if f.x is not None:
        rows += [("x = B/B_crit", significant(f.x)), ("S/S_min", significant(f.s_over_smin or 0.0)),
                 ("E/E_min", significant(f.e_over_emin or 0.0))]
    return rows


# A limit "binds" only when the run sits on it (`placement.binds`, the solver's own rule). A
# limit the solver marks binding with more slack than that decided the run without being reached:
# memory capped the micro-batch (the next one would not fit, so the free memory is less than one
# sequence's activations), or another limit capped the global batch before the launchable rounding
# stepped back from it. Those read "caps …", not "binds".


def limit_state(c: Constraint, violated: tuple[str, str] = ("VIOLATED", "VIOLATED")) -> str:
    """One phrase for a limit at the run: binds, caps micro-batch, caps batch, ok, or the
    violated word (`violated` = (for a ≤ limit, for a ≥ limit)); — without a run."""
    if c.satisfied is None:
        return "—"
    if not c.satisfied:
        return violated[0] if c.sense == "<=" else violated[1]
    if c.slack is not None and binds(c.slack, c.limit):
        return "binds"
    if c.binding:
        return "caps micro-batch" if c.name == "memory" else "caps batch"
    return "ok"


def limit_use(c: Constraint) -> str:
    """The run against its limit: the share used of a ≤ limit (79%), and for a ≥ limit how far
    above the minimum the run is (at min, 4× min), never a share of a lower bound (400 %)."""
    if c.value is None or not c.limit:
        return "—"
    ratio = c.value / c.limit
    if c.sense == ">=":
        return "at min" if abs(ratio - 1) < TIGHT else f"{significant(ratio)}× min"
    return f"{ratio:.0%}"


def _constraint_rows(sol: Solution) -> list[tuple[str, ...]]:
    rows: list[tuple[str, ...]] = []
    for c in sol.constraints:
        limit = ("≥ " if c.sense == ">=" else "≤ ") + human(c.unit, c.limit)
        rows.append((c.name, limit, human(c.unit, c.value), limit_use(c), human(c.unit, c.slack),
                     limit_state(c)))
    return rows


def _remedy_price(m) -> str:
    """A memory remedy's predicted step time against the plan's layout: '×1.33 step time'."""
    return "" if m.relative_step_time is None else f"×{m.relative_step_time:.3g} step time"


def _throughput_rows(sol: Solution) -> list[tuple[str, ...]]:
    """Utilization and the step's seconds by cause; declared: the shares inside the declared MFU."""
    tp = sol.throughput
    if tp is None:
        return []

    def pct(v: float | None) -> str:
        return "—" if v is None else f"{v:.1%}"

    head = ("declared (hardware.mfu, end-to-end)" if tp.source == "declared" else "predicted from the layout")
    rows: list[tuple[str, ...]] = [("utilization", head, ""),
            ("MFU / HFU", f"{pct(tp.mfu)} / {pct(tp.hfu)}", "HFU counts recomputation"),
            ("TFLOP/s per GPU", f"{tp.model_tflops_per_gpu:.1f} model / "
             + ("—" if tp.hardware_tflops_per_gpu is None else f"{tp.hardware_tflops_per_gpu:.1f} hardware"), "")]
    if tp.predicted_mfu is not None:
        rows.append(("predicted MFU", pct(tp.predicted_mfu), "what the layout alone would give"))
    rows.append(("step time", human("s", tp.step_time_s), "100%"))
    for name, sec in tp.breakdown.items():
        if sec > 0:
            rows.append((f"  {name}", human("s", sec), f"{sec / tp.step_time_s:.1%}" if tp.step_time_s else ""))
    return rows


def _assumption_rows(sol: Solution) -> list[tuple[str, ...]]:
    return [(name, human(a.unit, a.value), str(a.origin), a.detail) for name, a in sol.assumptions.items()]


def _uncertainty_rows(sol: Solution) -> list[tuple[str, str]]:
    u = sol.uncertainty
    if u is None:
        return []
    broken = [n for n, ok in u.limits_hold.items() if not ok]
    return [
        ("B_crit", f"{human('tokens', u.b_crit_tokens.low)} – {human('tokens', u.b_crit_tokens.high)}"),
        ("steps", f"{u.steps.low:,.0f} – {u.steps.high:,.0f}"),
        ("tokens", f"{human('tokens', u.tokens.low)} – {human('tokens', u.tokens.high)}"),
        ("FLOPs", f"{human('FLOP', u.flops.low)} – {human('FLOP', u.flops.high)}"),
        ("wall clock", f"{human('s', u.wall_clock_s.low)} – {human('s', u.wall_clock_s.high)}"),
        ("limits hold", "yes, at both ends" if u.all_hold else "no: " + ", ".join(broken)),
    ]


_RAMP_HEADER = ("until", "batch", "accum", "B_noise", "x", "steps", "tokens", "wall clock")


def _ramp_title(sol: Solution) -> str:
    r = sol.ramp
    assert r is not None
    if r.schedule == "auto":
        return (f"Batch ramp (auto: {len(r.stages)} stages at {significant(r.x or 0.0)} × B_noise, "
                f"micro-batch {r.micro_batch})")
    return f"Batch ramp (the plan's {len(r.stages)} stages, micro-batch {r.micro_batch})"


def _ramp_rows(sol: Solution) -> list[tuple[str, ...]]:
    r = sol.ramp
    assert r is not None
    return [(f"{st.until:.0%}", human("tokens", st.batch_tokens), str(st.grad_accum),
             human("tokens", st.b_noise_tokens), significant(st.x), f"{st.steps:,}",
             human("tokens", st.tokens), human("s", st.wall_clock_s)) for st in r.stages]


def _ramp_summary(sol: Solution) -> list[tuple[str, str, str, str]]:
    r = sol.ramp
    assert r is not None

    def saved(v: float, unit: str) -> str:
        word = "saves" if v >= 0 else "costs"
        return f"{word} {human(unit, abs(v)) if unit != 'steps' else f'{abs(v):,.0f}'}"

    rows = [("", "steps", "tokens", "wall clock"),
            ("ramp", f"{r.steps:,}", human("tokens", r.tokens), human("s", r.wall_clock_s)),
            ("fixed batch", f"{r.fixed_steps:,}", human("tokens", r.fixed_tokens), human("s", r.fixed_wall_clock_s)),
            ("ramp − fixed", saved(r.saves_steps, "steps"), saved(r.saves_tokens, "tokens"),
             saved(r.saves_wall_clock_s, "s"))]
    if r.closed_form_steps is not None and r.closed_form_tokens is not None:
        rows.append(("closed form", f"{r.closed_form_steps:,.0f}", human("tokens", r.closed_form_tokens),
                     "S_min(1+1/x), E_min(1+x)"))
    return rows


def _table(rows: Sequence[tuple[str, ...]], indent: str = "  ") -> list[str]:
    if not rows:
        return []
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return [(indent + "  ".join(cell.ljust(w) for cell, w in zip(r, widths))).rstrip() for r in rows]


def render_text(sol: Solution) -> str:
    """The table for people (`budgetdsl plan`)."""
    out = [_headline(sol), ""]
    if sol.batch.tokens is not None:
        out += ["Launch", *_table(_launch_rows(sol)), ""]
    if sol.throughput is not None:
        out += ["Throughput", *_table(_throughput_rows(sol)), ""]
    out += ["Frontier", *_table(_frontier_rows(sol)), ""]
    if sol.warnings:
        out += ["Warnings", *[line for w in sol.warnings for line in _warning_lines(w)], ""]
    out += ["Limits", *_table([("limit", "bound", "value", "use", "slack", "state"), *_constraint_rows(sol)]), ""]
    if sol.conflicts:
        out += ["Conflicts", *map(_item, sol.conflicts), ""]
    if sol.relaxations:
        out += ["Smallest change of each limit that makes the plan feasible on its own",
                *[_item(r.message) for r in sol.relaxations], ""]
    if sol.memory_remedies:
        out += ["Memory remedies (at micro-batch 1)",
                *_table([(m.change, data(m.memory_per_device), f"micro-batch ≤ {m.micro_batch_max}",
                          "fits" if m.fits else "does not fit", _remedy_price(m)) for m in sol.memory_remedies]), ""]
    if sol.pinned is not None:
        out += ["Against the objective", f"  {sol.pinned.summary}", ""]
    if sol.gpu_choice is not None:
        g = sol.gpu_choice
        out += [f"GPU count ({g.min}–{g.max} step {g.step}: {g.considered} launchable, {g.feasible} feasible)",
                f"  {g.reason}", ""]
    if sol.layout is not None:
        out += [f"Layout search ({', '.join(sol.layout.searched)})", *_table([_LAYOUT_HEADER, *_layout_rows(sol)]),
                f"  {sol.layout.reason}", ""]
    if len(sol.front) > 1:
        out += ["Pareto front (wall clock, cost, FLOPs): where each objective lands",
                *_table([_FRONT_HEADER, *_front_rows(sol)]), ""]
    if sol.uncertainty is not None:
        out += [f"Uncertainty (B_crit ±{sol.uncertainty.relative:.0%})", *_table(_uncertainty_rows(sol)), ""]
    if sol.ramp is not None:
        r = sol.ramp
        out += [_ramp_title(sol), *_table([_RAMP_HEADER, *_ramp_rows(sol)]), "",
                *_table(_ramp_summary(sol)),
                f"  B_noise trajectory: {r.trajectory}", f"  assumption: {r.assumption}",
                *map(_item, r.notes), ""]
    out += ["Assumptions", *_table(_assumption_rows(sol)), ""]
    if sol.notes:
        out += ["Notes", *map(_item, sol.notes), ""]
    return "\n".join(out).rstrip() + "\n"


def _md_escape(text: str) -> str:
    from budgetdsl.io.markdown_text import (
        inline,  # Markdown only: not imported for text output
    )

    return inline(text)  # plan text never becomes a link, an image, HTML or a new row


def _md_table(header: tuple[str, ...], rows: Sequence[tuple[str, ...]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(_md_escape(c) for c in r) + " |" for r in rows]
    return lines


def render_markdown(sol: Solution) -> str:
    """Markdown for a pull-request comment."""
    from budgetdsl.io.markdown_text import code

    icon = "✅" if sol.feasible else "❌"
    out = [f"### {icon} {code(sol.plan)}: {sol.status} ({sol.objective})", ""]
    if sol.batch.tokens is not None:
        out += [*_md_table(("launch", ""), _launch_rows(sol)), ""]
    if sol.throughput is not None:
        out += [*_md_table(("throughput", "", "share"), _throughput_rows(sol)), ""]
    out += [*_md_table(("frontier", ""), _frontier_rows(sol)), ""]
    if sol.warnings:
        out += ["**Warnings**", "", *[f"- ⚠️ `{w.code}` {_md_escape(w.message)}" for w in sol.warnings], ""]
    out += [*_md_table(("limit", "bound", "value", "use", "slack", "state"), _constraint_rows(sol)), ""]
    for title, items in (("Conflicts", sol.conflicts), ("Relaxations", [r.message for r in sol.relaxations]),
                         ("Notes", sol.notes)):
        if items:
            out += [f"**{title}**", "", *[f"- {_md_escape(i)}" for i in items], ""]
    if sol.memory_remedies:
        out += [*_md_table(("memory remedy", "memory at micro-batch 1", "micro-batch max", "fits", "step time"),
                           [(m.change, data(m.memory_per_device), str(m.micro_batch_max),
                             "yes" if m.fits else "no", _remedy_price(m)) for m in sol.memory_remedies]), ""]
    if sol.pinned is not None:
        out += [f"**Against the objective:** {_md_escape(sol.pinned.summary)}", ""]
    if sol.gpu_choice is not None:
        out += [f"**GPU count:** {_md_escape(sol.gpu_choice.reason)}", ""]
    if sol.layout is not None:
        out += [*_md_table(_LAYOUT_HEADER, _layout_rows(sol)), "",
                f"**Layout:** {_md_escape(sol.layout.reason)}", ""]
    if len(sol.front) > 1:
        out += [*_md_table(_FRONT_HEADER, _front_rows(sol)), ""]
    if sol.uncertainty is not None:
        out += [*_md_table((f"B_crit ±{sol.uncertainty.relative:.0%}", "range"), _uncertainty_rows(sol)), ""]
    if sol.ramp is not None:
        r = sol.ramp
        summary = _ramp_summary(sol)
        out += [f"**{_ramp_title(sol)}**", "", *_md_table(_RAMP_HEADER, _ramp_rows(sol)), "",
                *_md_table(summary[0], summary[1:]), "",
                f"B_noise trajectory: {_md_escape(r.trajectory)}; assumption: {_md_escape(r.assumption)}", "",
                *[f"- {_md_escape(n)}" for n in r.notes], *([""] if r.notes else [])]
    out += ["<details><summary>Assumptions</summary>", "",
            *_md_table(("coefficient", "value", "origin", "from"), _assumption_rows(sol)), "", "</details>"]
    return "\n".join(out) + "\n"


def json_document(payload: object) -> str:
    """JSON as budgetdsl prints it: 2-space indent, UTF-8, C1 and bidi controls as \\u escapes
    (`io.terminal_text.json_text`), a final newline."""
    import json  # the text and Markdown reports do not need it

    from budgetdsl.io.terminal_text import json_text

    return json_text(json.dumps(payload, indent=2, ensure_ascii=False)) + "\n"


def render_json(sol: Solution) -> str:
    """The model dump: stable keys, deterministic bytes, as `budgetdsl plan --format json` prints it."""
    return json_document(sol.model_dump(mode="json"))


RENDERERS = {"text": render_text, "markdown": render_markdown, "json": render_json}


def render(sol: Solution, fmt: str = "text") -> str:
    return RENDERERS[fmt](sol)
