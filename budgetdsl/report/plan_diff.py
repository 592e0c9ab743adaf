"""What a change to plan files does to the runs they describe — for pull-request review.

A reviewer sees, per plan, the inputs that changed (effective values after `extends`, so a change
to a shared base shows on every plan that inherits it) and what moved because of them: batch,
steps, tokens, FLOPs, wall clock, GPU-hours, cost, the position on the frontier, which limit binds,
feasibility. Pure: takes loaded plans and their solutions, returns a `PlanDiff`; rendering lives in
`diff_report`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from budgetdsl.plan.loader import field_spec
from budgetdsl.plan.model import Plan, QuantitySpec
from budgetdsl.quantities.humanize import quantity, si
from budgetdsl.quantities.units import DIMENSIONLESS
from budgetdsl.solve.solution import FEASIBLE, Solution


class Change(StrEnum):
    added = "added"
    removed = "removed"
    changed = "changed"
    unchanged = "unchanged"
    invalid = "invalid"  # the new version does not validate


@dataclass(frozen=True, slots=True)
class InputChange:
    path: str
    old: str | None  # as people read it: "21 days", "1024"; None when unset
    new: str | None


@dataclass(frozen=True, slots=True)
class Metric:
    """One outcome of the solve, before and after."""

    name: str
    unit: str
    old: float | str | None
    new: float | str | None

    @property
    def changed(self) -> bool:
        if isinstance(self.old, float) and isinstance(self.new, float):
            return abs(self.old - self.new) > 1e-9 * max(abs(self.old), abs(self.new))
        return self.old != self.new

    @property
    def ratio(self) -> float | None:
        if isinstance(self.old, (int, float)) and isinstance(self.new, (int, float)) and self.old:
            return self.new / self.old
        return None


@dataclass(frozen=True)
class PlanDiff:
    path: str
    name: str
    change: Change
    inputs: list[InputChange] = field(default_factory=list)
    metrics: list[Metric] = field(default_factory=list)
    old_feasible: bool | None = None
    new_feasible: bool | None = None
    problems: list[str] = field(default_factory=list)  # diagnostics of an invalid new version

    @property
    def regressed(self) -> bool:
        """A plan that was feasible is no longer: infeasible now, or invalid (a removed plan is not)."""
        return bool(self.old_feasible) and (self.change is Change.invalid or self.new_feasible is False)

    def metric(self, name: str) -> Metric | None:
        return next((m for m in self.metrics if m.name == name), None)


def _flatten(data: Any, prefix: str = "") -> dict[str, Any]:
    """Dotted path -> value; a list of mappings (the stages of a batch schedule) one entry per item,
    `path.0`, so a reviewer sees which stage moved."""
    if isinstance(data, dict):
        out: dict[str, Any] = {}
        for key, value in data.items():
            out.update(_flatten(value, f"{prefix}{key}."))
        return out
    if isinstance(data, list) and data and all(isinstance(v, dict) for v in data):
        return {f"{prefix}{i}": item for i, item in enumerate(data)}
    return {prefix[:-1]: data}


def _path(dotted: str) -> tuple[str | int, ...]:
    return tuple(int(p) if p.isdigit() else p for p in dotted.split("."))


def _show_input(path: str, value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, dict):  # an item of a list of mappings: `{until: 0.25, batch: 1.05M tokens}`
        shown = ((k, _show_input(f"{path}.{k}", v)) for k, v in value.items())
        return "{" + ", ".join(f"{k}: {v}" for k, v in shown if v is not None) + "}"
    spec = field_spec(_path(path))
    if isinstance(spec, QuantitySpec) and isinstance(value, (int, float)) and not isinstance(value, bool):
        if spec.dim != DIMENSIONLESS:
            return quantity(float(value), spec.dim)
        return str(value) if isinstance(value, int) else si(value)
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)


def input_changes(old: Plan | None, new: Plan | None) -> list[InputChange]:
    """The effective inputs that differ, in schema order."""
    a = _flatten(old.model_dump(mode="json", exclude={"extends"})) if old else {}
    b = _flatten(new.model_dump(mode="json", exclude={"extends"})) if new else {}
    keys = list(b) + [k for k in a if k not in b]
    return [InputChange(k, _show_input(k, a.get(k)), _show_input(k, b.get(k)))
            for k in keys if a.get(k) != b.get(k)]


def _binding(sol: Solution) -> str:
    names = [c.name for c in sol.constraints if c.binding]
    return ", ".join(names) if names else "none"


#: The outcomes a reviewer compares, with their units (as `report.human` formats them).
METRICS: list[tuple[str, str, Callable[[Solution], Any]]] = [
    ("status", "", lambda s: str(s.status)),
    ("gpus", "GPUs", lambda s: s.gpus),
    ("batch", "tokens", lambda s: s.batch.tokens),
    ("micro_batch", "sequences", lambda s: s.batch.micro_batch),
    ("grad_accum", "sequences", lambda s: s.batch.grad_accum),
    ("data_parallel", "sequences", lambda s: s.batch.data_parallel),
    ("steps", "steps", lambda s: s.steps),
    ("tokens", "tokens", lambda s: s.tokens),
    ("flops", "FLOP", lambda s: s.flops),
    ("wall_clock", "s", lambda s: s.wall_clock_s),
    ("gpu_hours", "GPU-h", lambda s: s.gpu_hours),
    ("usd", "USD", lambda s: s.usd),
    ("b_crit", "tokens", lambda s: s.frontier.b_crit_tokens),
    ("x", "1", lambda s: s.frontier.x),
    ("s_over_smin", "1", lambda s: s.frontier.s_over_smin),
    ("e_over_emin", "1", lambda s: s.frontier.e_over_emin),
    ("binding", "", _binding),
]


#: What a batch ramp (`run.batch_schedule`) costs and saves against the fixed batch, shown when either
#: version of the plan has one.
RAMP_METRICS: list[tuple[str, str, Callable[[Solution], Any]]] = [
    ("ramp_stages", "stages", lambda s: len(s.ramp.stages) if s.ramp else None),
    ("ramp_steps", "steps", lambda s: s.ramp.steps if s.ramp else None),
    ("ramp_tokens", "tokens", lambda s: s.ramp.tokens if s.ramp else None),
    ("ramp_wall_clock", "s", lambda s: s.ramp.wall_clock_s if s.ramp else None),
    ("ramp_saves_steps", "steps", lambda s: s.ramp.saves_steps if s.ramp else None),
    ("ramp_saves_tokens", "tokens", lambda s: s.ramp.saves_tokens if s.ramp else None),
    ("ramp_saves_wall_clock", "s", lambda s: s.ramp.saves_wall_clock_s if s.ramp else None),
]


def _number(v: Any) -> Any:
    return float(v) if isinstance(v, int) and not isinstance(v, bool) else v


def diff_solutions(old: Solution | None, new: Solution | None) -> list[Metric]:
    ramp = any(s is not None and s.ramp is not None for s in (old, new))
    return [Metric(name, unit, _number(get(old)) if old else None, _number(get(new)) if new else None)
            for name, unit, get in METRICS + (RAMP_METRICS if ramp else [])]


def diff_plan(path: str, old: tuple[Plan, Solution] | None, new: tuple[Plan, Solution] | None,
              problems: list[str] | None = None) -> PlanDiff:
    """Compare one plan's two versions; `new` is None for a removed or an invalid plan."""
    old_plan, old_sol = old if old else (None, None)
    new_plan, new_sol = new if new else (None, None)
    shown = new_plan or old_plan
    name = shown.name if shown else path
    inputs = input_changes(old_plan, new_plan) if old_plan is not None and new_plan is not None else []
    metrics = diff_solutions(old_sol, new_sol)
    if problems:
        change = Change.invalid
    elif old is None:
        change = Change.added
    elif new is None:
        change = Change.removed
    elif inputs or any(m.changed for m in metrics):
        change = Change.changed
    else:
        change = Change.unchanged
    return PlanDiff(path, name, change, inputs, metrics,
                    old_feasible=None if old_sol is None else old_sol.status in FEASIBLE,
                    new_feasible=None if new_sol is None else new_sol.status in FEASIBLE,
                    problems=list(problems or []))
