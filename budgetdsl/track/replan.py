"""`budgetdsl track --replan`: the plan update that the run's measurements call for, written as a
minimal diff with the editor the TUI uses (budgetdsl.plan.edit), for `budgetdsl diff` to show.

- `hardware.mfu`: the measured end-to-end MFU of the launched layout (declared mode: T(B) =
  f·B/(G·P·u), DESIGN.md section 2), so the plan predicts the throughput the run has; a layout the
  solver searched is pinned to the one launched, since a measured MFU belongs to its layout;
- `noise.b_crit`: the measured B_noise, when a gns file gave one (replacing `kaplan_loss` or
  `calibration`), with its interval as `noise.uncertainty`;
- each limit the forecast breaks (deadline, GPU-hours, cost) is raised to the high end of the
  forecast's interval: the reviewer sees in the diff what the plan now needs.
Values keep three significant digits, so a diff shows a measurement, not noise.
"""

from __future__ import annotations

import math
from typing import Any

from budgetdsl.plan.model import Plan
from budgetdsl.solve.solution import Solution
from budgetdsl.track.forecast import Track

_KEYS = {"deadline": "budget.deadline", "gpu_hours": "budget.gpu_hours", "usd": "budget.usd"}


def _round(value: float, up: bool = False) -> float:
    """Three significant digits (up: never below `value`)."""
    if not value:
        return 0.0
    scale = 10.0 ** (math.floor(math.log10(abs(value))) - 2)
    return float(f"{(math.ceil if up else round)(value / scale) * scale:.3g}")


def changes(track: Track, plan: Plan, solution: Solution) -> dict[str, Any]:
    """Dotted plan path -> new value (None removes the key), as budgetdsl.plan.edit takes them."""
    out: dict[str, Any] = {}
    if track.mfu is not None:
        out["hardware.mfu"] = _round(track.mfu)
        if plan.hardware.mfu is None:  # the layout was searched at a predicted MFU: pin the launched one
            b = solution.batch
            out |= {"hardware.tensor_parallel": b.tensor_parallel, "hardware.pipeline_parallel": b.pipeline_parallel}
            if b.zero is not None:
                out["hardware.zero"] = b.zero
            if b.recompute is not None:
                out["hardware.recompute"] = b.recompute
    if track.b_noise:
        out["noise.b_crit"] = _round(track.b_noise["tokens"])
        for key in ("kaplan_loss", "calibration", "at_loss"):
            if getattr(plan.noise, key) is not None:
                out[f"noise.{key}"] = None
        low, high = track.b_noise["low"], track.b_noise["high"]
        if low is not None and high is not None and track.b_noise["tokens"] > 0:
            spread = max(high - track.b_noise["tokens"], track.b_noise["tokens"] - low) / track.b_noise["tokens"]
            out["noise.uncertainty"] = _round(min(spread, 0.99), up=True)
    for limit in track.limits:
        if limit.breaks and limit.name in _KEYS:
            out[_KEYS[limit.name]] = _duration(limit.high) if limit.name == "deadline" else _round(limit.high, up=True)
    return out


def _duration(seconds: float) -> str:
    """A deadline as the plan language writes one (`16.2 days`), rounded up."""
    for unit, size in (("days", 86400.0), ("h", 3600.0), ("min", 60.0)):
        if seconds >= size:
            return f"{_round(seconds / size, up=True):g} {unit}"
    return f"{_round(seconds, up=True):g} s"
