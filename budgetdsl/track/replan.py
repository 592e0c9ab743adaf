"""`budgetdsl track --replan`: the plan update that the run's measurements call for, written as a
minimal diff with the editor the TUI uses (budgetdsl.plan.edit), for `budgetdsl diff` to show.

- `hardware.mfu`: the measured end-to-end MFU, so the plan predicts the throughput the run has; a
  layout the solver searched is pinned to the one launched, since a measured MFU belongs to its
  layout. A declared MFU holds at the plan's reference configuration and the modelled step, scaled
  through it, gives the others (`cost_model.declared_anchor`), so the value written is the one
  whose anchored model gives the measured MFU where the run was launched (`declared_mfu`);
- `noise.b_crit`: the measured B_noise, when a gns file gave one (replacing `kaplan_loss` or
  `calibration`), with its interval as `noise.uncertainty`;
- the rest of the run: once the logs show progress, the plan becomes the plan of what is left —
  `target.tokens` (or `target.min_tokens`) times the share of the planned tokens not yet done, and
  each limit the plan sets (deadline, FLOPs, GPU-hours, money) less what the run has spent of it
  (wall clock and GPU-hours since the start, downtime included, as the forecast counts them); a
  limit the forecast breaks becomes what the rest needs at the forecast's high end instead, so the
  reviewer sees in the diff what the run now needs. The solver then places the rest on the
  frontier at the measured MFU and B_crit (on a fixed batch, tokens and progress are proportional:
  E = E_min(1 + B/B_crit) at every point of the run, McCandlish et al. 2018 eq. 2.11, so the share
  of tokens left is the share of E_min left). `budgetdsl track --since-step N` tracks the rest;
- a batch ramp for the rest (`run.batch_schedule`, budgetdsl.track.ramp) when the measured B_noise
  carries one, with `noise.b_crit` the progress-weighted mean B_noise of the rest.
Measured values keep three significant digits (limits rounded up), so a diff shows a
measurement, not noise; the tokens left are a whole count.
"""

from __future__ import annotations

import math
from typing import Any

from budgetdsl.cost.cost_model import Split, build_cost_model
from budgetdsl.plan.model import Plan
from budgetdsl.solve.solution import Solution
from budgetdsl.track.forecast import Track

_KEYS = {"deadline": "budget.deadline", "gpu_hours": "budget.gpu_hours", "usd": "budget.usd",
         "flops": "budget.flops"}


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
        layout: dict[str, Any] = {}
        if plan.hardware.mfu is None:  # the layout was searched at a predicted MFU: pin the launched one
            b = solution.batch
            layout = {"tensor_parallel": b.tensor_parallel, "pipeline_parallel": b.pipeline_parallel}
            if b.zero is not None:
                layout["zero"] = b.zero
            if b.recompute is not None:
                layout["recompute"] = b.recompute
                if b.recompute_layers is not None or plan.hardware.recompute_layers is not None:
                    layout["recompute_layers"] = b.recompute_layers  # block recomputation, pinned or removed
        out["hardware.mfu"] = _round(declared_mfu(plan, solution, track.mfu, layout))
        out |= {f"hardware.{key}": value for key, value in layout.items()}
    if track.b_noise:
        out["noise.b_crit"] = _round(track.b_noise["tokens"])
        for key in ("kaplan_loss", "calibration", "at_loss"):
            if getattr(plan.noise, key) is not None:
                out[f"noise.{key}"] = None
        low, high = track.b_noise["low"], track.b_noise["high"]
        if low is not None and high is not None and track.b_noise["tokens"] > 0:
            spread = max(high - track.b_noise["tokens"], track.b_noise["tokens"] - low) / track.b_noise["tokens"]
            out["noise.uncertainty"] = _round(min(spread, 0.99), up=True)
    out |= rest(track, plan, solution)
    return out


def declared_mfu(plan: Plan, solution: Solution, measured: float, layout: dict[str, Any]) -> float:
    """The `hardware.mfu` whose anchored model gives `measured` on the launched configuration of
    `solution` (with `layout` pinned): at every configuration the anchored MFU is proportional to
    the declared u (the anchor's k is ∝ 1/u), so one evaluation at u = `measured` scales it. The
    measured value itself where nothing is modelled (no shape: the line T = f·B/(G·P·u))."""
    b = solution.batch
    if not (solution.gpus and b.tokens and b.grad_accum and b.zero is not None and b.recompute is not None):
        return measured
    hardware = plan.hardware.model_copy(update={"mfu": measured, **layout})
    trial = plan.model_copy(update={"hardware": hardware})
    split = Split(b.zero, b.tensor_parallel, b.pipeline_parallel, b.recompute, plan.hardware.flash_attention,
                  b.context_parallel, b.expert_parallel, recompute_layers=b.recompute_layers)
    try:
        at_launch = build_cost_model(trial, solution.gpus, split).breakdown(b.tokens, b.grad_accum)
    except ValueError:  # ShapeUnknown: the solve that launched it would have said so
        return measured
    if at_launch is None or not at_launch.mfu > 0:
        return measured
    return measured * measured / at_launch.mfu


def progress(track: Track) -> float | None:
    """The share of the planned tokens done, or None when the logs cannot say (no plan to compare
    with, no timed progress, or nothing left)."""
    if not track.tokens_planned or track.elapsed_s is None or not 0 < track.tokens_done < track.tokens_planned:
        return None
    return track.tokens_done / track.tokens_planned


def rest(track: Track, plan: Plan, solution: Solution) -> dict[str, Any]:
    """The target and the limits of the rest of the run (module docstring); {} without progress."""
    done = progress(track)
    if done is None:
        return {}
    assert track.elapsed_s is not None
    out: dict[str, Any] = {}
    left = 1.0 - done
    if plan.target.min_tokens is not None:
        out["target.min_tokens"] = _whole(plan.target.min_tokens * left)
    elif plan.target.tokens is not None:
        out["target.tokens"] = _whole(plan.target.tokens * left)
    gpus = solution.gpus or 0
    gpu_hours = track.elapsed_s * gpus / 3600
    price = plan.budget.usd_per_gpu_hour
    per_token = solution.flops / track.tokens_planned if solution.flops and track.tokens_planned else None
    spent = {"deadline": track.elapsed_s, "gpu_hours": gpu_hours,
             "usd": gpu_hours * price if price is not None else None,
             "flops": per_token * track.tokens_done if per_token else None}
    forecast = {limit.name: limit for limit in track.limits}
    for name, used in spent.items():
        bound = getattr(plan.budget, name)
        if bound is None or used is None:
            continue
        limit = forecast.get(name)
        need = (limit.high if limit is not None and limit.breaks else bound) - used
        if need <= 0:  # spent already and not forecast (no timed rate): nothing left to plan with
            continue
        out[_KEYS[name]] = _duration(need) if name == "deadline" else _round(need, up=True)
    return out


def _whole(tokens: float) -> int:
    """Tokens left, a count: whole, rounded up (a float's last-digit error is not a token)."""
    return math.ceil(tokens * (1 - 1e-12))


def _duration(seconds: float) -> str:
    """A deadline as the plan language writes one (`16.2 days`), rounded up."""
    for unit, size in (("days", 86400.0), ("h", 3600.0), ("min", 60.0)):
        if seconds >= size:
            return f"{_round(seconds / size, up=True):g} {unit}"
    return f"{_round(seconds, up=True):g} s"
