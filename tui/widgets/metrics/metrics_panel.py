"""The metrics: what to launch and where it sits on the frontier, in the report's own formatting."""

from __future__ import annotations

from budgetdsl.tui.widgets.text_panel import TextPanel
from rich.text import Text

from budgetdsl.quantities.humanize import human, si
from budgetdsl.report.text import outcome_rows
from budgetdsl.solve.solution import Solution

LABEL = 12


def _n(v: float | None) -> str:
    return "—" if v is None else f"{v:,.0f}"


def _ratio(v: float | None) -> str:
    return "—" if v is None else f"{v:.3g}"


def metric_rows(sol: Solution) -> list[tuple[str, str]]:
    """(name, value) rows: batch, micro-batch × accumulation × dp, steps, tokens, FLOPs, wall
    clock, GPU-hours, cost, x, S/S_min, E/E_min, B_crit; a name "" spans the row."""
    b, f = sol.batch, sol.frontier
    rows = []
    if sol.gpu_choice is not None:
        rows.append(("GPUs", f"{_n(sol.gpus)} (chosen)"))
    if b.tokens is None:
        rows.append(("batch", "— none launchable"))
    else:
        rows += [
            ("batch", human("tokens", b.tokens)),
            ("micro·acc·dp", f"{b.micro_batch}×{b.grad_accum}×{b.data_parallel} = {_n(b.sequences)} seq"),
            ("steps", _n(sol.steps)),
            *outcome_rows(sol),
        ]
        rows.append(("", f"x={_ratio(f.x)}  S/Smin={_ratio(f.s_over_smin)}  E/Emin={_ratio(f.e_over_emin)}"))
    unc = f" ±{f.b_crit_uncertainty:.0%}" if f.b_crit_uncertainty else ""
    rows.append(("B_crit", f"{human('tokens', f.b_crit_tokens)}{unc}"))
    rows.append(("S_min E_min", f"{si(f.s_min)} · {human('tokens', f.e_min_tokens)}"))
    return rows


def headline(sol: Solution) -> Text:
    if sol.feasible:
        word = "pinned run, feasible" if sol.status == "pinned" else "feasible"
        return Text.assemble(("● ", "bold green"), (word, "bold"), f" · {sol.objective}")
    return Text.assemble(("✖ ", "bold red"), ("INFEASIBLE", "bold red"), f" · {sol.objective}")


class MetricsPanel(TextPanel):
    PLACEHOLDER = "solving…"

    def lines(self, sol: Solution, width: int) -> list[Text]:
        out = [headline(sol)]
        for name, value in metric_rows(sol):
            line = Text.assemble((name.ljust(LABEL) + " ", "bright_black"), value) if name else Text(value)
            line.truncate(width, overflow="ellipsis")
            out.append(line)
        return out
