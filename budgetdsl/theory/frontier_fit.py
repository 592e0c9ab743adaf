"""Fit the critical-batch frontier to measured (batch, steps-to-target) pairs.

McCandlish et al. 2018, eq. 2.11: S(B) = S_min (1 + B_crit/B) = S_min + E_min/B, B_crit =
E_min/S_min. `fit_frontier` finds S_min and E_min by least squares in log space, with an
uncertainty from the residuals, and refuses (`FrontierUndetermined`) when the batches do not
straddle B_crit. Pure Python, no numpy: the planner imports it. E_min and B_crit come out in the
unit of B the caller uses (examples or tokens).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from statistics import NormalDist

# se(ln B_crit) above this (a factor e ≈ 2.7 at one sigma) means the data do not determine B_crit.
MAX_LOG_SE = 1.0
# The fitted B_crit must lie within this factor of the measured batch range.
RANGE_FACTOR = 4.0


class FrontierFitError(ValueError):
    """The points cannot be fitted at all (too few, not positive, not finite)."""


class FrontierUndetermined(FrontierFitError):
    """The points lie on one asymptote of the hyperbola: B_crit is not determined by them."""


@dataclass(frozen=True)
class FrontierFit:
    """S(B) = s_min + e_min / B fitted to the points; uncertainties are one standard error."""

    s_min: float  # steps
    e_min: float  # examples (the unit of the batches given)
    b_crit: float  # e_min / s_min, same unit
    # Covariance of (ln S_min, ln E_min); the standard errors below are of the logarithms, i.e.
    # relative errors of S_min, E_min and B_crit.
    cov: tuple[tuple[float, float], tuple[float, float]]
    s_min_rel_se: float
    e_min_rel_se: float
    b_crit_rel_se: float
    residuals: tuple[float, ...]  # ln S_measured − ln S_fitted, in the order given
    batches: tuple[float, ...]
    steps: tuple[float, ...]
    dof: int

    def b_crit_interval(self, confidence: float = 0.95) -> tuple[float, float]:
        """B_crit · exp(∓ t·se): the interval of ln B_crit, with Student's t on `dof` degrees."""
        t = _t_quantile(0.5 + confidence / 2.0, self.dof)
        return self.b_crit * math.exp(-t * self.b_crit_rel_se), self.b_crit * math.exp(t * self.b_crit_rel_se)

    @property
    def rms_residual(self) -> float:
        return math.sqrt(sum(r * r for r in self.residuals) / len(self.residuals))


def _t_quantile(p: float, dof: int) -> float:
    """Student-t quantile by the Cornish-Fisher expansion (Abramowitz & Stegun 26.7.5); exact
    enough for dof >= 3. Falls back to the normal quantile for dof = 0."""
    z = NormalDist().inv_cdf(p)
    if dof <= 0:
        return z
    v = float(dof)
    return (z + (z**3 + z) / (4 * v) + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * v**2)
            + (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / (384 * v**3))


def _model(theta: tuple[float, float], b: float) -> tuple[float, float, float]:
    """ln S(B) and its derivatives by (ln S_min, ln E_min)."""
    s_min, e_min = math.exp(theta[0]), math.exp(theta[1])
    s = s_min + e_min / b
    return math.log(s), s_min / s, (e_min / b) / s


def _rss(theta, pts) -> float:
    return sum((math.log(s) - _model(theta, b)[0]) ** 2 for b, s in pts)


def _solve2(a: list[list[float]], g: list[float]) -> tuple[float, float] | None:
    det = a[0][0] * a[1][1] - a[0][1] * a[1][0]
    if not math.isfinite(det) or abs(det) < 1e-300:
        return None
    return ((a[1][1] * g[0] - a[0][1] * g[1]) / det, (a[0][0] * g[1] - a[1][0] * g[0]) / det)


def _least_squares(pts: list[tuple[float, float]]) -> tuple[float, float]:
    """Levenberg-Marquardt on θ = (ln S_min, ln E_min)."""
    # Start from the asymptotes: S_min below the smallest S, E_min from the smallest batch.
    b0, s0 = min(pts)
    s_floor = min(s for _, s in pts)
    theta = (math.log(0.5 * s_floor), math.log(max(b0 * (s0 - 0.5 * s_floor), 1e-12 * b0 * s0)))
    lam = 1e-3
    rss = _rss(theta, pts)
    for _ in range(500):
        jtj = [[0.0, 0.0], [0.0, 0.0]]
        jtr = [0.0, 0.0]
        for b, s in pts:
            f, d0, d1 = _model(theta, b)
            r = math.log(s) - f
            jtj[0][0] += d0 * d0
            jtj[0][1] += d0 * d1
            jtj[1][1] += d1 * d1
            jtr[0] += d0 * r
            jtr[1] += d1 * r
        jtj[1][0] = jtj[0][1]
        improved = False
        while lam < 1e12:
            damped = [[jtj[0][0] * (1 + lam), jtj[0][1]], [jtj[1][0], jtj[1][1] * (1 + lam)]]
            step = _solve2(damped, jtr)
            if step is None:
                lam *= 10
                continue
            # A step that sends a parameter to ±60 in log space has left the data behind.
            cand = (max(-60.0, min(60.0, theta[0] + step[0])), max(-60.0, min(60.0, theta[1] + step[1])))
            new = _rss(cand, pts)
            if new <= rss:
                done = abs(rss - new) <= 1e-15 * max(rss, 1e-30) and max(abs(step[0]), abs(step[1])) < 1e-10
                theta, rss, lam = cand, new, max(lam / 10, 1e-12)
                improved = True
                if done:
                    return theta
                break
            lam *= 10
        if not improved:
            return theta
    return theta


def fit_frontier(points: Iterable[tuple[float, float]]) -> FrontierFit:
    """Fit S = S_min + E_min/B (McCandlish et al. 2018, eq. 2.11) to (batch, steps) pairs.

    Minimizes Σ (ln S_i − ln(S_min + E_min/B_i))²: the scatter of steps-to-target is roughly
    relative, and log residuals weigh a 50-step and a 5,000-step run alike. θ = (ln S_min, ln E_min)
    keeps both positive; Levenberg-Marquardt from the asymptotes converges. The covariance is
    σ²(JᵀJ)⁻¹ with σ² the residual variance (n − 2 degrees of freedom).

    B_crit is determined only when the batches straddle it: far below it S ≈ E_min/B hides S_min,
    far above it S ≈ S_min hides E_min. Raises FrontierFitError for unusable input,
    FrontierUndetermined when the batches do not straddle B_crit (the message says which to add).
    """
    pts = [(float(b), float(s)) for b, s in points]
    for b, s in pts:
        if not (math.isfinite(b) and math.isfinite(s) and b > 0 and s > 0):
            raise FrontierFitError(f"batches and steps must be positive finite numbers, got ({b:g}, {s:g})")
    distinct = sorted({b for b, _ in pts})
    if len(distinct) < 3:
        raise FrontierFitError(
            f"{len(distinct)} distinct batch size(s); the fit of S = S_min + E_min/B needs at least 3 "
            "(two parameters and one degree of freedom for the uncertainty)")
    lo, hi = distinct[0], distinct[-1]
    theta = _least_squares(pts)
    s_min, e_min = math.exp(theta[0]), math.exp(theta[1])
    b_crit = e_min / s_min

    jtj = [[0.0, 0.0], [0.0, 0.0]]
    residuals = []
    for b, s in pts:
        f, d0, d1 = _model(theta, b)
        residuals.append(math.log(s) - f)
        jtj[0][0] += d0 * d0
        jtj[0][1] += d0 * d1
        jtj[1][1] += d1 * d1
    jtj[1][0] = jtj[0][1]
    dof = len(pts) - 2
    # Residual variance; a floor of (0.1 %)² keeps exact synthetic data from claiming zero error.
    sigma2 = max(sum(r * r for r in residuals) / dof, 1e-6)
    det = jtj[0][0] * jtj[1][1] - jtj[0][1] ** 2
    # det ~ 0: one of the two columns of J vanishes on all points (a single asymptote).
    degenerate = not math.isfinite(det) or det <= 1e-12 * max(jtj[0][0] * jtj[1][1], 1e-300)
    if degenerate:
        cov = ((math.inf, 0.0), (0.0, math.inf))
    else:
        cov = ((sigma2 * jtj[1][1] / det, -sigma2 * jtj[0][1] / det),
               (-sigma2 * jtj[0][1] / det, sigma2 * jtj[0][0] / det))
    v_b = cov[0][0] + cov[1][1] - 2 * cov[0][1]  # ln B_crit = ln E_min − ln S_min
    b_se = math.sqrt(v_b) if v_b >= 0 and math.isfinite(v_b) else math.inf

    span = f"the measured batches {lo:g}–{hi:g}"
    if b_crit > RANGE_FACTOR * hi or (b_se > MAX_LOG_SE and b_crit > math.sqrt(lo * hi)):
        raise FrontierUndetermined(
            f"B_crit is not determined: steps fall almost as 1/B over {span} (S ≈ E_min/B), so every "
            f"batch is far below B_crit and S_min is invisible (fitted B_crit {b_crit:.3g}, "
            f"se(ln B_crit) {b_se:.2g}); add runs at larger batches, up to where doubling the batch "
            f"no longer halves the steps (at least {RANGE_FACTOR * hi:g})")
    if b_crit < lo / RANGE_FACTOR or b_se > MAX_LOG_SE:
        raise FrontierUndetermined(
            f"B_crit is not determined: steps hardly change over {span} (S ≈ S_min), so every batch "
            f"is far above B_crit and E_min is invisible (fitted B_crit {b_crit:.3g}, se(ln B_crit) "
            f"{b_se:.2g}); add runs at smaller batches, down to where halving the batch doubles the "
            f"steps (at most {lo / RANGE_FACTOR:g})")
    return FrontierFit(
        s_min=s_min, e_min=e_min, b_crit=b_crit, cov=cov,
        s_min_rel_se=math.sqrt(cov[0][0]), e_min_rel_se=math.sqrt(cov[1][1]), b_crit_rel_se=b_se,
        residuals=tuple(residuals), batches=tuple(b for b, _ in pts), steps=tuple(s for _, s in pts),
        dof=dof)
