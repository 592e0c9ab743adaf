"""The fit B_crit(L) = B* / L^(1/α) (Kaplan et al. 2020, "Scaling Laws for Neural Language Models",
eq. 5.4 / section 5.1) over the smoothed B_simple trajectory.

A line ln B = ln B* − p·ln L (p = 1/α) on points at least one EMA window apart (closer ones share
most of their data), fitted by maximum likelihood with every point: a bounded interval is a normal
measurement of ln B with σ ≈ (ln hi − ln lo)/(2z); an interval open at one end is a censored one
(Tobit 1958: the line's probability of lying beyond the bound, at the bounded points' typical σ);
one open at both ends carries nothing and is counted. Dropping the open intervals instead would
keep only the points where B happened to come out small, and bias the law low. The covariance
(the likelihood's curvature) is inflated by the bounded points' reduced χ² when they scatter more
than their intervals say, and the slope must be told from 0 at the intervals' confidence: a flat
law read at another loss is a guess. Numpy, no torch: `budgetdsl calibrate` fits its files with it,
and `budgetdsl track --replan` the B_noise a run logs (budgetdsl.track.ramp).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class PowerLaw:
    b_star: float  # B* in the units of the b values given (tokens in the calibration file)
    alpha: float
    cov: tuple[tuple[float, float], tuple[float, float]]  # of (ln B*, 1/α)
    loss_min: float
    loss_max: float
    n_points: int  # points that entered the likelihood (bounded or censored)
    reduced_chi2: float
    n_censored: int = 0  # of them, intervals open at one end
    n_unbounded: int = 0  # points open at both ends: no information, not in n_points
    slope_z: float = math.inf  # p / se(p): how many standard errors the slope is from 0


class FitError(ValueError):
    """Too few usable points, or no spread in loss: nothing to fit."""


def _log_phi(u: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """log Φ(u) and the inverse Mills ratio φ(u)/Φ(u), stable for very negative u."""
    erfc = np.frompyfunc(math.erfc, 1, 1)
    cdf = np.asarray(0.5 * erfc(-u / math.sqrt(2.0)), dtype=float)
    pdf = np.exp(-0.5 * u * u) / math.sqrt(2.0 * math.pi)
    far = u < -30.0  # Φ(u) ~ φ(u)/(−u): log Φ ≈ −u²/2 − log(−u√(2π)), ratio ≈ −u
    safe = np.where(far, 1.0, cdf)
    log_cdf = np.where(far, -0.5 * u * u - np.log(np.where(far, -u, 1.0) * math.sqrt(2.0 * math.pi)), np.log(safe))
    ratio = np.where(far, -u, pdf / safe)
    return log_cdf, ratio


def fit_power_law(loss, b, lo, hi, z: float = 1.959963984540054) -> PowerLaw:
    """Maximum likelihood of ln b = ln B* − (1/α)·ln loss. `lo`/`hi` are each point's interval at the
    confidence matching `z`; None, NaN, 0 (for lo) or infinity (for hi) mark an open end."""
    def arr(v, fill):
        return np.array([fill if x is None else x for x in v], dtype=float)

    loss, b, lo, hi = np.asarray(loss, dtype=float), arr(b, math.nan), arr(lo, math.nan), arr(hi, math.nan)
    has_lo = np.isfinite(lo) & (lo > 0)
    has_hi = np.isfinite(hi) & (hi > 0)
    ok = loss > 0
    bounded = ok & has_lo & has_hi & (hi > lo) & np.isfinite(b) & (b > 0)
    lower = ok & has_lo & ~has_hi  # B >= lo
    upper = ok & has_hi & ~has_lo  # B <= hi
    used = bounded | lower | upper
    n_unbounded = int(np.sum(ok & ~used))
    if int(used.sum()) < 3 or int(bounded.sum()) < 2:
        raise FitError(f"{int(used.sum())} usable trajectory points ({int(bounded.sum())} with a bounded "
                       f"interval, {n_unbounded} unbounded); the fit needs at least 3, 2 of them bounded")
    lu = loss[used]
    if math.log(lu.max() / lu.min()) < 0.02:
        raise FitError(f"the loss hardly changed ({lu.min():.4g} to {lu.max():.4g}): nothing to fit")
    x = -np.log(loss)
    X = np.column_stack([np.ones_like(x), x])  # parameters (ln B*, p = 1/α)
    y = np.log(np.where(bounded, b, 1.0))
    sigma = np.where(bounded, (np.log(np.where(has_hi, hi, 1.0)) - np.log(np.where(has_lo, lo, 1.0))) / (2 * z), 1.0)
    s_cens = float(np.median(sigma[bounded]))  # the censored points' scale: a bounded point's
    cut = np.log(np.where(lower, lo, np.where(upper, hi, 1.0)))
    sign = np.where(lower, 1.0, -1.0)  # lower: Φ((μ − cut)/s); upper: Φ((cut − μ)/s)
    Xb, wb = X[bounded], 1.0 / sigma[bounded] ** 2
    cens = lower | upper
    Xc, cc, sc = X[cens], cut[cens], sign[cens]
    theta = np.linalg.solve(Xb.T @ (wb[:, None] * Xb) + 1e-12 * np.eye(2), Xb.T @ (wb * y[bounded]))

    def derivatives(t: np.ndarray) -> tuple[float, np.ndarray, np.ndarray]:
        r = y[bounded] - Xb @ t
        ll = -0.5 * float(np.sum(wb * r * r))
        g = Xb.T @ (wb * r)
        h = -(Xb.T @ (wb[:, None] * Xb))
        if cc.size:
            u = sc * (Xc @ t - cc) / s_cens
            log_cdf, lam = _log_phi(u)
            ll += float(np.sum(log_cdf))
            g = g + Xc.T @ (lam * sc / s_cens)
            h = h - Xc.T @ ((lam * (u + lam) / s_cens**2)[:, None] * Xc)
        return ll, g, h

    ll, g, h = derivatives(theta)
    for _ in range(100):  # Newton on a concave log-likelihood, halving a step that does not climb
        step = np.linalg.solve(h, -g)
        for _ in range(30):
            trial = theta + step
            ll_t, g_t, h_t = derivatives(trial)
            if ll_t >= ll - 1e-12:
                break
            step = step / 2
        theta, ll, g, h = trial, ll_t, g_t, h_t
        if float(np.max(np.abs(step))) < 1e-10:
            break
    cov = np.linalg.inv(-h)
    resid = y[bounded] - Xb @ theta
    dof = int(bounded.sum()) - 2
    chi2 = float(np.sum(wb * resid**2) / dof) if dof > 0 else 1.0
    cov = cov * max(1.0, chi2)
    slope_z = float(theta[1] / math.sqrt(cov[1, 1])) if cov[1, 1] > 0 else math.inf
    if not slope_z > z:
        raise FitError(
            f"the slope of ln B_simple against ln L is not distinguishable from zero (1/alpha = "
            f"{theta[1]:.3g} +- {math.sqrt(max(cov[1, 1], 0.0)):.2g}, {slope_z:.2g} standard errors, "
            f"needs > {z:.3g}) over losses {lu.min():.4g}-{lu.max():.4g}: B_simple does not measurably "
            "grow as the loss falls here, so the law would be read at other losses on no evidence")
    return PowerLaw(
        b_star=float(math.exp(theta[0])),
        alpha=float(1.0 / theta[1]),
        cov=((float(cov[0, 0]), float(cov[0, 1])), (float(cov[1, 0]), float(cov[1, 1]))),
        loss_min=float(lu.min()),
        loss_max=float(lu.max()),
        n_points=int(used.sum()),
        reduced_chi2=chi2,
        n_censored=int(cens.sum()),
        n_unbounded=n_unbounded,
        slope_z=slope_z,
    )
