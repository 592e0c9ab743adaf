"""The track report for people (text, Markdown for a pull-request comment) and machines (JSON).

Deterministic for one set of logs: no clock is read; dates are the logs' own, printed in UTC.
"""

from __future__ import annotations

import dataclasses
import json
from datetime import UTC, datetime

from budgetdsl.quantities.humanize import duration, human, significant
from budgetdsl.track.forecast import Span, Track

_STATUS = {"on_track": "the plan holds", "breaks": "the plan BREAKS", "finished": "finished",
           "too_few_points": "too few points to forecast", "no_times": "no wall times to forecast from",
           "no_plan": "nothing to compare with"}


def _date(t: float | None) -> str:
    return "—" if t is None else datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _span(unit: str, s: Span | None) -> str:
    return "—" if s is None else f"{human(unit, s.value)} ({human(unit, s.low)} – {human(unit, s.high)})"


def _ratio(a: float | None, b: float | None) -> str:
    return "" if a is None or not b else f"{significant(a / b)}× plan"


def _pct(a: float, b: float | None) -> str:
    return f"{100 * a / b:.1f}%" if b else ""


def _rows(track: Track) -> list[tuple[str, list[tuple[str, str, str]]]]:
    t = track
    progress = [
        ("steps", f"{t.steps_done:,}" + (f" of {t.steps_planned:,}" if t.steps_planned else ""),
         _pct(t.steps_done, t.steps_planned)),
        ("tokens", human("tokens", t.tokens_done) + (f" of {human('tokens', t.tokens_planned)}"
                                                     if t.tokens_planned else ""),
         _pct(t.tokens_done, t.tokens_planned) + ("" if t.tokens_source == "logged" else f" ({t.tokens_source})")),
        ("elapsed", duration(t.elapsed_s) if t.elapsed_s is not None else "—",
         f"downtime {duration(t.downtime_s)}, {len(t.restarts)} restart(s)"),
    ]
    pace = [
        ("step time", human("s", t.step_time_s), f"plan {human('s', t.step_time_planned)}"),
        ("tokens/s", _span("tokens", t.tokens_per_s).replace(" tokens", "") if t.tokens_per_s else "—",
         f"plan {significant(t.tokens_per_s_planned) if t.tokens_per_s_planned else '—'}; "
         + _ratio(t.tokens_per_s.value if t.tokens_per_s else None, t.tokens_per_s_planned)),
        ("MFU", f"{100 * t.mfu:.1f}%" if t.mfu is not None else "—",
         f"plan {100 * t.mfu_planned:.1f}%" if t.mfu_planned is not None else ""),
    ]
    if t.tflops_per_gpu_logged is not None:
        pace.append(("TFLOP/s/GPU", significant(t.tflops_per_gpu_logged), "logged"))
    f = t.frontier
    frontier = [("B_crit (plan)", human("tokens", t.b_crit),
                 f"±{100 * t.b_crit_uncertainty:.0f}%" if t.b_crit_uncertainty else "")]
    if t.b_noise:
        low, high = t.b_noise["low"], t.b_noise["high"]
        frontier.append(("B_noise (measured)", human("tokens", t.b_noise["tokens"]),
                         f"[{human('tokens', low) if low is not None else '—'}, "
                         f"{human('tokens', high) if high is not None else 'unbounded'}] at step "
                         f"{t.b_noise['step']:,}; {significant(t.b_noise['over_b_crit'])}× B_crit"))
    if f:
        frontier += [("batch", human("tokens", f["batch_tokens"]), f"plan {human('tokens', t.batch_planned)}"),
                     ("x = B/B_crit", significant(f["x"]),
                      f"{significant(f['x_measured'])} at the measured B_noise" if "x_measured" in f else ""),
                     ("S/S_min", significant(f["s_over_smin"]), ""), ("E/E_min", significant(f["e_over_emin"]), "")]
    forecast = [("finish", _date(t.finish.value) if t.finish else "—",
                 f"{_date(t.finish.low)} – {_date(t.finish.high)}" if t.finish else t.reason),
                ("wall clock", _span("s", t.wall_clock_s), ""), ("GPU-hours", _span("GPU-h", t.gpu_hours), ""),
                ("cost", _span("USD", t.usd), ""), ("FLOPs", human("FLOP", t.flops), "")]
    return [("Progress", progress), ("Pace", pace), ("Frontier", frontier), ("Forecast", forecast)]


def _limit_rows(track: Track) -> list[tuple[str, str, str, str, str]]:
    rows = []
    for lim in track.limits:
        state = "BREAKS" if lim.breaks else "at risk" if lim.at_risk else "ok"
        when = f"at {_date(lim.when)}" if lim.when is not None else ""
        rows.append((lim.name, f"≤ {human(lim.unit, lim.limit)}", human(lim.unit, lim.forecast),
                     f"{human(lim.unit, lim.low)} – {human(lim.unit, lim.high)}", f"{state} {when}".strip()))
    return rows


def render_text(track: Track) -> str:
    from budgetdsl.io.terminal_text import inert

    out = [f"{inert(track.plan, keep_lines=False)}: {_STATUS[track.status]} — {track.reason}", ""]
    for title, rows in _rows(track):
        out.append(title)
        width = max(len(r[0]) for r in rows)
        value_width = max(len(r[1]) for r in rows)
        out += [f"  {a.ljust(width)}  {b.ljust(value_width)}  {c}".rstrip() for a, b, c in rows]
        out.append("")
    if track.limits:
        table = [("limit", "bound", "forecast", "interval", "state"), *_limit_rows(track)]
        widths = [max(len(r[i]) for r in table) for i in range(5)]
        out.append("Limits")
        out += ["  " + "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in table]
        out.append("")
    for r in track.restarts:
        out.append(f"restart: step {r['from_step']:,} -> {r['to_step']:,} ({r['file']}, {r['where']})")
    for note in track.notes:
        out.append(f"note: {note}")
    return "\n".join(out).rstrip() + "\n"


def render_markdown(track: Track) -> str:
    from budgetdsl.io.markdown_text import inline

    out = [f"### {inline(track.plan)}: {_STATUS[track.status]}", "", f"{inline(track.reason)}", ""]
    for title, rows in _rows(track):
        out += [f"**{title}**", "", "| | | |", "|---|---|---|"]
        out += [f"| {inline(a)} | {inline(b)} | {inline(c)} |" for a, b, c in rows]
        out.append("")
    if track.limits:
        out += ["| limit | bound | forecast | interval | state |", "|---|---|---|---|---|"]
        out += ["| " + " | ".join(inline(c) for c in r) + " |" for r in _limit_rows(track)]
        out.append("")
    return "\n".join(out)


def render_json(track: Track) -> str:
    data = dataclasses.asdict(track)
    data["breaks"] = track.breaks
    return json.dumps(data, indent=2, ensure_ascii=False, allow_nan=False) + "\n"


RENDERERS = {"text": render_text, "markdown": render_markdown, "json": render_json}
