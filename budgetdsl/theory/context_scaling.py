"""How the critical batch in tokens moves with the context s (tokens per example): B_crit ∝ s^γ.

An example's loss is the mean of its s per-token losses, so its gradient is the mean of s per-token
gradients. If their noise has covariance Σ_t per token and an average correlation ρ̄ within a
sequence, the per-example covariance is Σ_t·(1 + (s − 1)·ρ̄)/s (the variance of a mean of correlated
variables), and B_simple = tr Σ/|G|² (McCandlish et al. 2018, eq. 2.8) is, in tokens,
s·B_examples = tr Σ_t·(1 + (s − 1)·ρ̄)/|G|². Independent tokens (ρ̄ = 0) give a B in tokens that does
not depend on s (γ = 0); fully correlated tokens (ρ̄ = 1) one in examples that does not (γ = 1).
Text lies between, and the loss of a token also depends on how much context precedes it, so γ is
measured: B_crit from `calibrate sweep` at two contexts and one held-out loss, on two proxies and
three seeds (`bench/noise_evidence.py`, docs/noise-evidence.csv, docs/calibration.md).

The planner reads a calibration made at context c for a model of sequence length s as
B_crit·(s/c)^γ, with the relative uncertainty widened by |ln(s/c)|·σ_γ (budgetdsl.plan.noise).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

# Fitted by `fit_context_exponent` to docs/noise-evidence.csv (gpt-nano and gpt-micro, 64 and 128
# tokens per example, seeds 1-3: six pairs, γ from 0.20 to 1.79; the standard error of their mean is
# 0.23); tests/budgetdsl/test_noise_evidence.py refits them from the CSV.
CONTEXT_GAMMA = 0.79
CONTEXT_GAMMA_SIGMA = 0.55
CONTEXT_EVIDENCE = "measured at 64 and 128 tokens"  # what the warning says γ rests on


@dataclass(frozen=True)
class ContextFit:
    gamma: float  # mean of the per-pair exponents
    sigma: float  # what the planner uses: the pairs' spread (a new model is one more pair)
    se_mean: float  # standard error of the mean over the pairs
    spread: float  # sample standard deviation of the per-pair exponents
    n: int
    per_pair: tuple[float, ...]


def fit_context_exponent(pairs: Sequence[Sequence[tuple[int, float, float | None]]]) -> ContextFit:
    """γ of B_crit ∝ s^γ from groups of (context, B_crit tokens, relative se of B_crit), each group
    one proxy and seed measured at several contexts: each group's slope of ln B_crit against ln s
    (least squares), then their mean. σ_γ is the groups' spread — the uncertainty of γ for one more
    model, not of the mean — and, for a single group, its slope's standard error from the fits'."""
    slopes, ses = [], []
    for group in pairs:
        xs = [math.log(c) for c, _, _ in group]
        ys = [math.log(b) for _, b, _ in group]
        if len(group) < 2 or max(xs) == min(xs):
            continue
        mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
        sxx = sum((x - mx) ** 2 for x in xs)
        slopes.append(sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx)
        # se of a least-squares slope with known per-point errors: sqrt(Σ (x - mx)² se²) / sxx
        ses.append(math.sqrt(sum((x - mx) ** 2 * (se or 0.0) ** 2 for x, (_, _, se) in zip(xs, group))) / sxx)
    n = len(slopes)
    if n == 0:
        raise ValueError("no group measured B_crit at two different contexts")
    gamma = sum(slopes) / n
    if n == 1:
        return ContextFit(gamma, ses[0], ses[0], 0.0, 1, tuple(slopes))
    spread = math.sqrt(sum((g - gamma) ** 2 for g in slopes) / (n - 1))
    return ContextFit(gamma, spread, spread / math.sqrt(n), spread, n, tuple(slopes))


def context_factor(seq_len: float, context: float, gamma: float = CONTEXT_GAMMA) -> float:
    """B_crit at `seq_len` over B_crit measured at `context` (both in tokens per example)."""
    return (seq_len / context) ** gamma


def context_widening(seq_len: float, context: float, sigma: float = CONTEXT_GAMMA_SIGMA) -> float:
    """The relative uncertainty the transfer adds to B_crit: |ln(s/c)|·σ_γ (d ln B = ln(s/c)·dγ)."""
    return abs(math.log(seq_len / context)) * sigma
