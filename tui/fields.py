"""The controls' fields: which plan key each edits, how typed text is checked, how `+`/`-` step.

Typed text is the plan language itself (`14 days`, `1.2e23`, `4Mi`, `2048 * model.seq_len`),
checked here with `budgetdsl.plan.expressions.evaluate` for a message that points into the text, and
then put into the plan as written, so that Save writes what the person typed. A stepped value is
written back as plan-language text too (`22 days`, `2048 * model.seq_len`, `1.5e23`), so the saved
diff reads well in review.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from budgetdsl.plan.expressions import ExpressionError, Quantity, evaluate
from budgetdsl.quantities.humanize import si
from budgetdsl.quantities.units import (
    DIMENSIONLESS,
    EXAMPLES,
    FLOP,
    TIME,
    Dim,
    dim_name,
)
from budgetdsl.solve.objectives import OBJECTIVES

if TYPE_CHECKING:
    from budgetdsl.tui.state import WhatIf

    from budgetdsl.plan.model import Plan
    from budgetdsl.solve.solution import Solution

_LADDER = (1.0, 1.2, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0, 6.0, 8.0)  # nice mantissas, ~20 % apart
_NOISE_KEYS = ("noise.kaplan_loss", "noise.calibration", "noise.at_loss", "noise.extrapolate",
               "noise.source")


@dataclass(frozen=True, slots=True)
class Field:
    id: str  # the widget id
    label: str
    path: str  # the plan key it edits
    dim: Dim
    integer: bool = False
    optional: bool = False  # empty text removes the key
    empty: str = ""  # what an empty value means, shown as the placeholder


FIELDS: dict[str, Field] = {f.id: f for f in (
    Field("gpus", "GPUs", "hardware.gpus", DIMENSIONLESS, integer=True),
    Field("deadline", "deadline", "budget.deadline", TIME, optional=True, empty="no deadline"),
    Field("flops", "FLOP budget", "budget.flops", FLOP, optional=True, empty="no FLOP budget"),
    Field("batch", "batch", "run.batch", DIMENSIONLESS, optional=True, empty="optimized"),
    Field("b_crit", "B_crit", "noise.b_crit", DIMENSIONLESS),
)}


class FieldError(ValueError):
    """Typed text that is not a value for the field: a message and a hint for a notification."""

    def __init__(self, message: str, hint: str | None = None):
        super().__init__(message)
        self.message = message
        self.hint = hint


# -- reading typed text ---------------------------------------------------------------------------

def _resolver(plan: Plan):
    from budgetdsl.plan.loader import field_spec
    from budgetdsl.plan.model import QuantitySpec

    def resolve(ref: str, col: int) -> Quantity:
        path = tuple(ref.split("."))
        spec = field_spec(path)
        node: Any = plan
        for key in path:
            node = getattr(node, key, None)
        if not isinstance(spec, QuantitySpec) or not isinstance(node, (int, float)) or isinstance(node, bool):
            raise ExpressionError(f"{ref!r} is not a numeric value of this plan", col)
        return Quantity(float(node), spec.dim)
    return resolve


def parse(field: Field, text: str, plan: Plan) -> float | None:
    """The value of `text` in base units; None for an empty optional field. Raises FieldError."""
    text = text.strip()
    if not text:
        if field.optional:
            return None
        raise FieldError(f"{field.label} needs a value", f"e.g. {example(field)}")
    try:
        q = evaluate(text, _resolver(plan))
    except ExpressionError as exc:
        where = f" at column {exc.column + 1}" if exc.column else ""
        raise FieldError(f"{field.label}: {exc.message}{where}", exc.hint) from None
    if q.dim != DIMENSIONLESS and q.dim != field.dim:
        raise FieldError(f"{field.label}: expected {dim_name(field.dim)}, got {dim_name(q.dim)}",
                         f"e.g. {example(field)}")
    if not q.value > 0:
        raise FieldError(f"{field.label} must be greater than 0, got {q.value:g}", f"e.g. {example(field)}")
    if field.integer and q.value != int(q.value):
        raise FieldError(f"{field.label} must be a whole number, got {q.value:g}")
    return q.value


def example(field: Field) -> str:
    return {"gpus": "1024", "batch": "2048 * model.seq_len or 8Mi", "b_crit": "3M"}.get(
        field.id, EXAMPLES.get(field.dim, "1"))


def changes_for(field: Field, text: str, state: WhatIf) -> dict[str, Any]:
    """The plan changes (as `save_changes` takes them) that set `field` to the typed `text`."""
    text = text.strip()
    value: Any = text or None
    if field.integer and text.isdigit():
        value = int(text)
    if field.id == "gpus" and isinstance(state.file_raw("hardware.gpus"), dict):
        # A range in the file: a fixed count is written as min = max, keeping the mapping.
        return {"hardware.gpus.min": value, "hardware.gpus.max": value}
    if field.id == "b_crit":
        # A declared B_crit replaces whichever source the plan named (exactly one is allowed).
        return {"noise.b_crit": value, **{k: None for k in _NOISE_KEYS}}
    return {field.path: value}


# -- what the controls show -----------------------------------------------------------------------

def shown_text(field: Field, state: WhatIf, solution: Solution | None) -> str:
    """The text a control shows: the value as written in the file (or as changed)."""
    if field.id == "gpus":
        raw = state.raw("hardware.gpus")
        if isinstance(raw, dict):  # a range: show the count the solver chose
            lo, hi = state.raw("hardware.gpus.min"), state.raw("hardware.gpus.max")
            if lo == hi and lo is not None:
                return str(lo)
            return str(solution.gpus) if solution is not None and solution.gpus else ""
    if field.id == "b_crit" and state.raw("noise.b_crit") is None:
        return si(solution.frontier.b_crit_tokens) if solution is not None else ""
    raw = state.raw(field.path)
    if raw is None:
        return ""
    if isinstance(raw, float):
        return f"{raw:g}"
    return str(raw)


# -- stepping -------------------------------------------------------------------------------------

def _pow2_step(n: float, direction: int) -> int:
    """The next power of two above (below) n; n itself need not be one."""
    k = math.log2(n)
    k = math.floor(k + 1e-9) + 1 if direction > 0 else math.ceil(k - 1e-9) - 1
    return 2 ** max(0, k)


def _ladder_step(v: float, direction: int) -> float:
    """The next value of the 1-1.2-1.5-2-2.5-3-4-5-6-8 ladder above (below) v."""
    e = math.floor(math.log10(v))
    candidates = sorted(m * 10.0 ** k for k in (e - 1, e, e + 1) for m in _LADDER)
    if direction > 0:
        return next(c for c in candidates if c > v * (1 + 1e-9))
    return next(c for c in reversed(candidates) if c < v * (1 - 1e-9))


def _count_text(v: float) -> str:
    """`1.5M`, `250k`, `8`: a count as the plan language writes it (exact for ladder values)."""
    for suffix, f in (("T", 1e12), ("B", 1e9), ("M", 1e6), ("k", 1e3)):
        if v >= f:
            return f"{round(v / f, 6):g}{suffix}"
    return f"{round(v, 6):g}"


def _sci(v: float) -> str:
    """`1.5e23`: a FLOP count as the plan files write it."""
    return f"{v:g}".replace("e+", "e")


def _duration_text(seconds: float) -> str:
    if seconds >= 2 * 86400:
        return f"{round(seconds / 86400, 6):g} days"
    if seconds >= 2 * 3600:
        return f"{round(seconds / 3600, 6):g} h"
    return f"{round(seconds / 60, 6):g} min"


def _deadline_step(seconds: float, direction: int) -> float:
    """One day (from two days up), one hour (from two hours up), else ten minutes."""
    unit = 86400.0 if seconds >= 2 * 86400 else 3600.0 if seconds >= 2 * 3600 else 600.0
    if direction < 0 and unit == 86400.0 and seconds <= 2 * 86400:
        unit = 3600.0
    k = seconds / unit
    k = math.floor(k + 1e-9) + 1 if direction > 0 else math.ceil(k - 1e-9) - 1
    return max(unit, k * unit)


def stepped(field: Field, state: WhatIf, solution: Solution | None, direction: int) -> str:
    """The text of `field` one `+` (direction 1) or `-` (direction -1) step from its value.

    An empty optional field starts from the solution's own figure (the optimized batch, the wall
    clock for a deadline, the FLOPs for a budget)."""
    plan = state.plan
    current = parse(field, shown_text(field, state, solution), plan)
    if field.id == "gpus":
        return str(_pow2_step(current or 1, direction))
    if field.id == "batch":
        seq = plan.model.seq_len
        if current is None:
            current = solution.batch.tokens if solution is not None and solution.batch.tokens else seq
            return f"{_pow2_step(max(1, round(current / seq)), direction)} * model.seq_len"
        return f"{_pow2_step(max(1.0, current / seq), direction)} * model.seq_len"
    if field.id == "deadline":
        if current is None:
            wall = solution.wall_clock_s if solution is not None and solution.wall_clock_s else 86400.0
            return _duration_text(_deadline_step(wall, 1))
        return _duration_text(_deadline_step(current, direction))
    if field.id == "flops":
        if current is None:
            flops = solution.flops if solution is not None and solution.flops else 1e20
            return _sci(_ladder_step(flops, 1))
        return _sci(_ladder_step(current, direction))
    if field.id == "b_crit":
        return _count_text(_ladder_step(current or 1e6, direction))
    raise KeyError(field.id)


def next_objective(current: str, direction: int) -> str:
    """The objective after (direction 1) or before (-1) `current`, in the order of
    `budgetdsl.solve.objectives.OBJECTIVES` (the one list of objective names), wrapping around."""
    i = OBJECTIVES.index(current) if current in OBJECTIVES else 0
    return OBJECTIVES[(i + direction) % len(OBJECTIVES)]
