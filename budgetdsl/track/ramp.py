"""The batch ramp of the rest of a run (`budgetdsl track --replan`): the B_noise the run measured,
extrapolated over the tokens still to come, and stages placed on it as `batch_schedule: auto` does.

Two power laws of Kaplan et al. 2020 ("Scaling Laws for Neural Language Models"), each fitted to
this run's own logs:
- B_noise(L) = B*·L^(−k): their eq. 1.4, B_crit(L) = B*/L^(1/α_B), k = 1/α_B. Fitted to the
  (loss, B_noise) points of the gns log by `budgetdsl.theory.power_law_fit`, the fit of a
  calibration file: weighted least squares in log space, each point weighted by its interval
  (an interval open at one end a censored point), the errors scaled by the Birge ratio when the
  points scatter more than their intervals say; k's interval takes Student's t (n − 2 degrees).
- L(E) ∝ E^(−α_D): the form of their eq. 1.2, L(D) = (D_c/D)^α_D, fitted by least squares in log
  space to the losses logged over the last doubling of the tokens (where the loss curve is now).
Together B_noise(E) ∝ E^(α_D·k) from the tokens done E_now to the run's planned E_end; the
exponent's interval comes from both fits (delta method, the fewer degrees of freedom of the two).

No ramp is written (`NoRamp`, the rest of the replan is) when the measurements cannot carry one:
fewer than MIN_POINTS points; an extrapolation past MAX_EXTRAPOLATION × the measured span of
ln tokens; k not > 0 at 95 %; a growth of B_noise over the rest whose interval spans more than
×MAX_SPREAD; or a growth below ×MIN_GROWTH, which a ramp would not follow.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from budgetdsl.plan.model import Plan
from budgetdsl.solve import batch_ramp as br
from budgetdsl.solve.ramp_solution import launchable
from budgetdsl.solve.solution import Solution
from budgetdsl.theory.power_law_fit import FitError, fit_power_law
from budgetdsl.theory.student_t import t_quantile
from budgetdsl.track.forecast import Track
from budgetdsl.track.replan import _round
from budgetdsl.track.run import Timeline

MIN_POINTS = 6
MAX_EXTRAPOLATION = 2.0  # the rest may reach this many times the measured span of ln tokens past the last point
MAX_SPREAD = 2.0  # the growth's 95 % interval, high / low
MIN_GROWTH = 1.2
CONFIDENCE = 0.95
KNOTS = 64  # of the trajectory over the rest (piecewise linear in progress)


class NoRamp(ValueError):
    """Why the measurements carry no batch ramp for the rest of the run (one line)."""


@dataclass(frozen=True)
class Growth:
    """B_noise over the rest of the run: b_now·(E/E_now)^exponent, from E_now to E_end tokens."""

    k: float  # B_noise ∝ L^(−k)
    k_low: float
    k_high: float
    b_star: float  # tokens at L = 1
    alpha_d: float  # L ∝ E^(−α_D) over the last doubling
    exponent: float  # α_D·k
    exponent_low: float
    exponent_high: float
    points: int
    birge: float  # √(reduced χ²) of the B_noise fit
    tokens_first: float  # of the first and last B_noise points
    tokens_last: float
    tokens_now: float
    tokens_end: float
    b_now: float  # fitted B_noise at E_now

    def b_noise(self, tokens: float) -> float:
        return self.b_now * (tokens / self.tokens_now) ** self.exponent

    def growth(self, exponent: float | None = None) -> float:
        """B_noise(E_end) / B_noise(E_now) at the exponent (default: the fitted one)."""
        return (self.tokens_end / self.tokens_now) ** (self.exponent if exponent is None else exponent)


def _t(dof: int) -> float:
    return t_quantile(0.5 + CONFIDENCE / 2, dof)


def _points(line: Timeline) -> list[tuple[float, float, float, float | None, float | None]]:
    """(tokens, loss, B_noise, low, high) of each measurement: its own tokens and loss, else those
    logged at its step; the latest measurement of a step kept."""
    tokens_col, loss_col = line.column("tokens"), line.column("loss")
    by_step: dict[int, tuple[float, float, float, float | None, float | None]] = {}
    for n in line.noise:
        i = line.index_of(n.step)
        tokens = n.tokens if n.tokens is not None else (tokens_col[i] if i is not None else math.nan)
        loss = n.loss if n.loss is not None else (loss_col[i] if i is not None else math.nan)
        if tokens > 0 and loss > 0 and 0 < n.b_noise < math.inf:
            by_step[n.step] = (tokens, loss, n.b_noise, n.low, n.high)
    return [by_step[s] for s in sorted(by_step)]


def _loss_slope(line: Timeline, tokens_now: float) -> tuple[float, float, float, int]:
    """α_D, its standard error, ln of the fitted loss at E_now, and the degrees of freedom: least
    squares of ln L = c − α_D·ln E over the losses logged at E_now/2 ≤ E ≤ E_now."""
    e = np.frombuffer(line.column("tokens"), dtype=np.float64)
    loss = np.frombuffer(line.column("loss"), dtype=np.float64)
    keep = np.isfinite(e) & np.isfinite(loss) & (loss > 0) & (e >= tokens_now / 2) & (e <= tokens_now)
    x, y = np.log(e[keep]), np.log(loss[keep])
    if len(x) < 3 or np.ptp(x) <= 0:
        raise NoRamp(f"{len(x)} losses logged over the last doubling of the tokens; the loss fit needs 3")
    xm = x - x.mean()
    slope = float(xm @ (y - y.mean()) / (xm @ xm))
    resid = y - y.mean() - slope * xm
    se = math.sqrt(float(resid @ resid) / (len(x) - 2) / float(xm @ xm))
    return -slope, se, float(y.mean() + slope * (math.log(tokens_now) - x.mean())), len(x) - 2


def fit(line: Timeline, tokens_now: float, tokens_end: float) -> Growth:
    """B_noise over the rest (module docstring), or NoRamp with the reason."""
    pts = [p for p in _points(line) if p[0] <= tokens_now]
    usable = [p for p in pts if p[3] or p[4]]  # an interval bounded at one end at least
    if len(usable) < MIN_POINTS:
        raise NoRamp(f"{len(usable)} B_noise points with an interval (a gns log: b_noise, b_noise_low, "
                     f"b_noise_high); the fit needs {MIN_POINTS}")
    first, last = usable[0][0], usable[-1][0]
    span = math.log(last / first) if last > first else 0.0
    reach = math.log(tokens_end / last)
    if reach > MAX_EXTRAPOLATION * span:
        raise NoRamp(f"the rest reaches {reach:.2g} in ln tokens past the last B_noise point, more than "
                     f"{MAX_EXTRAPOLATION:g} × the measured span ({span:.2g}): too far to extrapolate")
    try:
        law = fit_power_law([p[1] for p in usable], [p[2] for p in usable], [p[3] for p in usable],
                            [p[4] for p in usable])
    except FitError as exc:
        raise NoRamp(f"B_noise against the loss: {exc}") from None
    k, se_k = 1.0 / law.alpha, math.sqrt(law.cov[1][1])
    bounded = sum(1 for p in usable if p[3] and p[4])
    t_k = _t(max(bounded - 2, 1))
    if not k - t_k * se_k > 0:
        raise NoRamp(f"k = {k:.3g} ± {t_k * se_k:.2g} (B_noise ∝ L^-k) is not > 0 at {CONFIDENCE * 100:g} %")
    alpha_d, se_a, ln_loss_now, dof_a = _loss_slope(line, tokens_now)
    p = alpha_d * k
    se_p = math.sqrt((alpha_d * se_k) ** 2 + (k * se_a) ** 2)  # delta method, the fits independent
    t_p = _t(max(min(bounded - 2, dof_a), 1))  # the fewer degrees of freedom of the two fits
    growth = Growth(k=k, k_low=k - t_k * se_k, k_high=k + t_k * se_k, b_star=law.b_star, alpha_d=alpha_d,
                    exponent=p, exponent_low=p - t_p * se_p, exponent_high=p + t_p * se_p,
                    points=len(usable), birge=math.sqrt(law.reduced_chi2), tokens_first=first,
                    tokens_last=last, tokens_now=tokens_now, tokens_end=tokens_end,
                    b_now=law.b_star * math.exp(-k * ln_loss_now))
    low, high = growth.growth(growth.exponent_low), growth.growth(growth.exponent_high)
    if high / low > MAX_SPREAD:
        raise NoRamp(f"B_noise grows ×{growth.growth():.3g} over the rest, 95 % ×{low:.3g}–×{high:.3g}: "
                     f"an interval wider than ×{MAX_SPREAD:g}")
    if growth.growth() < MIN_GROWTH:
        raise NoRamp(f"B_noise grows ×{growth.growth():.3g} over the rest (95 % ×{low:.3g}–×{high:.3g}), "
                     f"less than ×{MIN_GROWTH:g}: no ramp to follow")
    return growth


def trajectory(growth: Growth, batch: float) -> br.NoiseTrajectory:
    """B_noise against the progress φ of the rest, at the run's batch: a step of B tokens makes
    1/(1 + B_noise/B) of an ideal step's progress (McCandlish et al. 2018, eq. 2.11 step by step),
    so dφ ∝ dE/(B + B_noise(E)), by trapezoids over KNOTS tokens from E_now to E_end."""
    e = np.linspace(growth.tokens_now, growth.tokens_end, KNOTS)
    b = growth.b_now * (e / growth.tokens_now) ** growth.exponent
    rate = 1.0 / (batch + b)
    phi = np.concatenate([[0.0], np.cumsum(0.5 * (rate[1:] + rate[:-1]) * np.diff(e))])
    return br.NoiseTrajectory(tuple(float(v) for v in phi / phi[-1]), tuple(float(v) for v in b),
                              f"B_noise ∝ E^{growth.exponent:.3g}, fitted at {growth.points} points")


def _percent(fraction: float) -> str:
    return f"{100 * fraction:.3g}%"


def stages(traj: br.NoiseTrajectory, count: int, x: float, snap: Callable[[float], float]) -> list[dict[str, Any]]:
    """The stages of `batch_schedule: auto` (budgetdsl.solve.batch_ramp.plan_auto) on `traj`, each
    with its mean B_noise; neighbours that snap to one batch or one written `until` are merged
    (their B_noise the progress-weighted mean, so each stage keeps its share of ∫B_noise dφ)."""
    costs = br.plan_auto(traj, 1.0, count, x, snap)  # S_min = 1: the fractions do not depend on it
    total = sum(c.tokens for c in costs)
    merged: list[list[float]] = []  # [until, batch, ∫B_noise dφ, Δφ]
    done = 0.0
    for c in costs:
        done += c.tokens
        row = [done / total, c.batch, c.b_noise * (c.end - c.start), c.end - c.start]
        if merged and (merged[-1][1] == row[1] or _percent(merged[-1][0]) == _percent(row[0])):
            last = merged.pop()
            row = [row[0], row[1], last[2] + row[2], last[3] + row[3]]
        merged.append(row)
    merged[-1][0] = 1.0
    return [{"until": _percent(u), "batch": round(b), "b_noise": _round(area / width)}
            for u, b, area, width in merged]


def ramp_changes(track: Track, line: Timeline, plan: Plan, solution: Solution,
                 since_step: int | None = None) -> tuple[dict[str, Any], Growth]:
    """`run.batch_schedule` and `noise.b_crit` (the progress-weighted mean B_noise of the rest) for
    the rest of the run, and the fit they come from; NoRamp says why not."""
    if since_step is not None:
        raise NoRamp("--since-step counts the tokens from step N, and B_noise ∝ E^(α_D·k) needs the "
                     "run's own tokens: replan from the whole run's logs")
    if not line.noise:
        raise NoRamp("the logs carry no B_noise (a gns log of the run: docs/track.md)")
    cfg = solution.batch
    batch = track.batch_tokens or cfg.tokens
    if not track.tokens_planned or not batch or cfg.micro_batch is None or cfg.data_parallel is None:
        raise NoRamp("the plan has no launched configuration to ramp from")
    growth = fit(line, track.tokens_done, track.tokens_planned)
    traj = trajectory(growth, batch)
    run = plan.run
    x = float(run.ramp_x) if run is not None and "ramp_x" in run.model_fields_set else batch / growth.b_now
    count = int(run.ramp_stages) if run is not None else 4
    bounds = br.auto_boundaries(traj, count)
    smallest = min(x * traj.mean(a, b) for a, b in zip(bounds, bounds[1:]))
    _, snap = launchable(smallest, cfg.micro_batch, cfg.data_parallel, plan.model.seq_len)
    schedule = stages(traj, count, x, snap)
    return {"run.batch_schedule": schedule, "noise.b_crit": _round(traj.mean())}, growth
