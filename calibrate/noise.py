"""The gradient noise scale estimator (McCandlish et al. 2018, "An Empirical Model of Large-Batch
Training", appendix A): pure arithmetic on squared gradient norms, no torch.

E|g_B|² = |G|² + tr(Σ)/B (A.1), so two batch sizes measured at the same weights give unbiased |G|²
(A.2) and tr Σ (A.3). Their ratio is not unbiased, so each is smoothed on its own (bias-corrected
EMA, as the paper does) and B_simple = tr Σ / |G|² divides the smoothed values. Its interval is
Fieller's for a ratio of correlated means (Fieller 1954), the per-step covariance estimated from
successive differences (von Neumann 1941): open above when |G|² is not told from 0.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np

from budgetdsl.theory.student_t import t_quantile


def two_batch_estimates(sq_small: float, sq_big: float, b_small: float, b_big: float) -> tuple[float, float]:
    """Unbiased (|G|², tr Σ) from E|g_small|² and |g_big|² at the same weights (A.2, A.3)."""
    if not 0 < b_small < b_big:
        raise ValueError(f"need 0 < B_small < B_big, got {b_small} and {b_big}")
    g2 = (b_big * sq_big - b_small * sq_small) / (b_big - b_small)  # (A.2)
    trace = (sq_small - sq_big) / (1.0 / b_small - 1.0 / b_big)  # (A.3)
    return g2, trace


def ema_weights(n: int, beta: float) -> np.ndarray:
    """Weights the bias-corrected EMA gives to x_1..x_n (they sum to 1). beta = 1 is the limit
    of the bias-corrected EMA: the plain mean."""
    if n == 0:
        return np.zeros(0)
    if beta >= 1.0:
        return np.full(n, 1.0 / n)
    k = np.arange(n - 1, -1, -1, dtype=float)  # age of each value: n-1 ... 0
    w = (1.0 - beta) * beta**k
    return w / (1.0 - beta**n)  # bias correction (Kingma & Ba 2015, section 3)


class BiasCorrectedEMA:
    """m_t = β·m_{t−1} + (1−β)·x_t, reported as m_t / (1 − β^t); β = 1 is the running mean."""

    def __init__(self, beta: float):
        if not 0.0 <= beta <= 1.0:
            raise ValueError(f"EMA beta must lie in [0, 1], got {beta}")
        self.beta = beta
        self.m = 0.0
        self.t = 0

    def update(self, x: float) -> float:
        self.t += 1
        if self.beta >= 1.0:
            self.m += (x - self.m) / self.t
        else:
            self.m = self.beta * self.m + (1.0 - self.beta) * x
        return self.value

    @property
    def value(self) -> float:
        if self.t == 0:
            return math.nan
        return self.m if self.beta >= 1.0 else self.m / (1.0 - self.beta**self.t)


def successive_difference_covariance(x: np.ndarray) -> tuple[np.ndarray, float] | None:
    """Covariance of the per-step noise of the rows of x (n, k) from successive differences (von
    Neumann 1941): Σ dᵀd / (2(n−1)), d = x_{k+1} − x_k. A slow trend — B_simple drifting as the
    loss falls — cancels in the differences instead of passing for noise, as it would in a plain
    or batch-means variance. Steps draw fresh data, so their noise is independent given the
    weights. Returns the covariance and its equivalent degrees of freedom for a t quantile,
    2(n−1)²/(3n−4) (matching the variance of the estimator for normal data); None below 5 rows."""
    n = x.shape[0]
    if n < 5:
        return None
    d = np.diff(x, axis=0)
    return d.T @ d / (2.0 * (n - 1)), 2.0 * (n - 1) ** 2 / (3.0 * n - 4.0)


def fieller_interval(
    num: float, den: float, v_num: float, v_den: float, cov: float, z: float
) -> tuple[float | None, float | None]:
    """Fieller's interval for num/den given the variances and covariance of the two estimates: the
    R with (num − R·den)² ≤ z²·Var(num − R·den). (None, None) when den is not significantly nonzero
    (the set is then unbounded)."""
    a = den * den - z * z * v_den
    if a <= 0.0:
        return None, None
    b = num * den - z * z * cov
    c = num * num - z * z * v_num
    disc = max(b * b - a * c, 0.0)
    root = math.sqrt(disc)
    return (b - root) / a, (b + root) / a


def noise_scale_interval(
    trace: float, g2: float, v_trace: float, v_g2: float, cov: float, z: float
) -> tuple[float | None, float | None]:
    """Fieller's confidence set for tr Σ / |G|², intersected with B >= 0 (both are >= 0); None
    for an end the data leave open.

    - |G|² significantly positive: Fieller's interval, its ends clipped at 0.
    - |G|² not told from 0: the set is the outside of the quadratic's roots; if tr Σ is
      significantly positive, its part with B >= 0 is [r, ∞) — a lower bound and no upper one.
    - |G|² (or tr Σ) significantly negative: the estimates contradict the model; the set says
      nothing about B, so the interval is unbounded — never [0, 0], which would claim B = 0.
    """
    a = g2 * g2 - z * z * v_g2
    b = trace * g2 - z * z * cov
    c = trace * trace - z * z * v_trace
    if a > 0.0:
        if g2 < 0.0:
            return None, None
        lo, hi = fieller_interval(trace, g2, v_trace, v_g2, cov, z)
        if hi is None or hi <= 0.0:
            return None, None  # tr Σ significantly negative: no B >= 0 in the set
        return max(lo or 0.0, 0.0), hi
    if c > 0.0 and trace > 0.0:  # a <= 0 < c: one root of each sign; B >= the positive one
        if a == 0.0:
            return (c / (2.0 * b), None) if b > 0.0 else (None, None)
        return (b - math.sqrt(b * b - a * c)) / a, None
    return None, None


@dataclass(frozen=True)
class Estimate:
    """One step's raw estimate, or the smoothed state after it."""

    g2: float  # |G|², squared norm of the true gradient
    trace: float  # tr Σ, per-example gradient variance summed over parameters
    b_simple: float | None  # tr Σ / |G|² in examples; None when |G|² <= 0


def _ratio(trace: float, g2: float) -> float | None:
    return trace / g2 if g2 > 0 and math.isfinite(g2) and math.isfinite(trace) else None


class NoiseScaleTracker:
    """Accumulates per-step estimates; smooths |G|² and tr Σ separately; gives B_simple and its
    confidence interval. Keeps every raw estimate (the calibration file stores them)."""

    def __init__(self, beta: float, confidence: float = 0.95):
        self.beta = beta
        self.confidence = confidence
        self.z = NormalDist().inv_cdf(0.5 + confidence / 2.0)
        self._g2 = BiasCorrectedEMA(beta)
        self._trace = BiasCorrectedEMA(beta)
        self.steps: list[int] = []
        self.g2: list[float] = []
        self.trace: list[float] = []

    def update(self, step: int, sq_small: float, sq_big: float, b_small: float, b_big: float) -> Estimate:
        g2, trace = two_batch_estimates(sq_small, sq_big, b_small, b_big)
        self.steps.append(step)
        self.g2.append(g2)
        self.trace.append(trace)
        self._g2.update(g2)
        self._trace.update(trace)
        return Estimate(g2, trace, _ratio(trace, g2))

    def __len__(self) -> int:
        return len(self.steps)

    def smoothed(self) -> Estimate:
        g2, trace = self._g2.value, self._trace.value
        return Estimate(g2, trace, _ratio(trace, g2))

    def weights(self) -> np.ndarray:
        return ema_weights(len(self.steps), self.beta)

    def interval(self) -> tuple[float | None, float | None]:
        """Fieller interval for the smoothed B_simple, at self.confidence: the EMA's weights times the
        per-step covariance of (tr Σ, |G|²) from successive differences, which a drifting
        trajectory does not inflate."""
        w = self.weights()
        n = len(w)
        if n < 4:
            return None, None
        sum_w2 = float(np.sum(w * w))
        n_eff = 1.0 / sum_w2  # Kish's effective sample size of the EMA
        window = min(n, max(8, math.ceil(2 * n_eff)))  # the steps that carry the weight
        pairs = np.column_stack([self.trace[-window:], self.g2[-window:]])
        estimated = successive_difference_covariance(pairs)
        if estimated is None:
            return None, None
        cov, dof = estimated
        s = self.smoothed()
        # Var of an EMA of independent steps: Σ w_k² · per-step covariance.
        v_num, v_den, c = (float(sum_w2 * cov[i, j]) for i, j in ((0, 0), (1, 1), (0, 1)))
        t = t_quantile(0.5 + self.confidence / 2.0, dof)  # the covariance is estimated: Student's t
        return noise_scale_interval(s.trace, s.g2, v_num, v_den, c, t)

    def effective_steps(self) -> float:
        """Kish's effective number of steps behind the smoothed values, 1/Σw² of the EMA's weights:
        (1+β)/(1−β) ≈ 39 for β = 0.95 however long the run, the step count for the plain mean."""
        w = self.weights()
        return float(1.0 / np.sum(w * w)) if len(w) else 0.0

    def state_dict(self) -> dict:
        return {"steps": list(self.steps), "g2": list(self.g2), "trace": list(self.trace)}

    def load_state_dict(self, state: dict) -> None:
        self.__init__(self.beta, self.confidence)
        for step, g2, trace in zip(state["steps"], state["g2"], state["trace"]):
            self.steps.append(int(step))
            self.g2.append(float(g2))
            self.trace.append(float(trace))
            self._g2.update(float(g2))
            self._trace.update(float(trace))
