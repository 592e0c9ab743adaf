"""The fit B_crit(L) = B* / L^(1/α) (Kaplan et al. 2020, "Scaling Laws for Neural Language Models",
eq. 5.4 / section 5.1) over the smoothed B_simple trajectory.

A weighted least-squares line ln B = ln B* − p·ln L (p = 1/α) on points at least one EMA window
apart (closer ones share most of their data), each weighted by its interval, σ(ln B) ≈
(ln hi − ln lo) / (2z); the covariance (XᵀWX)⁻¹ is inflated by the reduced χ² when the points
scatter more than their intervals say.
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
    n_points: int
    reduced_chi2: float


class FitError(ValueError):
    """Too few usable points, or no spread in loss: nothing to fit."""


def spaced(steps: list[int], spacing: float, start: int = 0) -> list[int]:
    """Indices of `steps` from `start` on, each at least `spacing` steps after the previous one,
    walking back from the last step (the best-measured one is always kept)."""
    chosen: list[int] = []
    last = math.inf
    for i in range(len(steps) - 1, -1, -1):
        if steps[i] < start:
            break
        if last - steps[i] >= spacing:
            chosen.append(i)
            last = steps[i]
    return chosen[::-1]


def fit_power_law(loss, b, lo, hi, z: float = 1.959963984540054) -> PowerLaw:
    """Weighted least squares of ln b = ln B* − (1/α)·ln loss. `lo`/`hi` are each point's interval
    at the confidence matching `z`."""
    loss, b, lo, hi = (np.asarray(v, dtype=float) for v in (loss, b, lo, hi))
    ok = (b > 0) & (lo > 0) & np.isfinite(hi) & (hi > lo) & (loss > 0)
    loss, b, lo, hi = loss[ok], b[ok], lo[ok], hi[ok]
    if loss.size < 3:
        raise FitError(f"{loss.size} usable trajectory points; the fit needs at least 3")
    if math.log(loss.max() / loss.min()) < 0.02:
        raise FitError(f"the loss hardly changed ({loss.min():.4g} to {loss.max():.4g}): nothing to fit")
    sigma = (np.log(hi) - np.log(lo)) / (2.0 * z)
    w = 1.0 / sigma**2
    X = np.column_stack([np.ones_like(loss), -np.log(loss)])  # parameters (ln B*, p = 1/α)
    y = np.log(b)
    xtwx = X.T @ (w[:, None] * X)
    cov = np.linalg.inv(xtwx)
    theta = cov @ (X.T @ (w * y))
    resid = y - X @ theta
    dof = loss.size - 2
    chi2 = float(np.sum(w * resid**2) / dof) if dof > 0 else 1.0
    cov = cov * max(1.0, chi2)
    if theta[1] == 0:
        raise FitError("B_simple does not change with the loss: the exponent is undefined")
    return PowerLaw(
        b_star=float(math.exp(theta[0])),
        alpha=float(1.0 / theta[1]),
        cov=((float(cov[0, 0]), float(cov[0, 1])), (float(cov[1, 0]), float(cov[1, 1]))),
        loss_min=float(loss.min()),
        loss_max=float(loss.max()),
        n_points=int(loss.size),
        reduced_chi2=chi2,
    )
