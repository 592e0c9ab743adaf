"""The critical-batch frontier (docs/design.md section 1; McCandlish et al. 2018, "An Empirical Model
of Large-Batch Training", eq. 2.11 and 2.12):

    S(B) = S_min (1 + B_crit/B)        E(B) = E_min (1 + B/B_crit)        S_min = E_min / B_crit
    (S/S_min − 1)(E/E_min − 1) = 1     x = B / B_crit

B, E and B_crit are in tokens, S in optimizer steps. E_min comes from the plan's target: directly
(`target.min_tokens`), or from `target.tokens` reached at `target.at_batch`, which lie on the
frontier: tokens = E(at_batch) = E_min (1 + at_batch/B_crit).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from budgetdsl.theory import closed_forms_generated as cf
from budgetdsl.theory.xp import SCALAR


class Target(Protocol):
    """What a plan's `target:` says (budgetdsl.plan.model.Target): E_min, or tokens at a batch."""

    @property
    def min_tokens(self) -> float | None: ...
    @property
    def tokens(self) -> float | None: ...
    @property
    def at_batch(self) -> float | None: ...

# Kaplan et al. 2020, "Scaling Laws for Neural Language Models", eq. 1.4 and table 4:
# B_crit(L) ≈ B*/L^(1/α_B), B* ≈ 2·10⁸ tokens, α_B ≈ 0.21, L in nats on their WebText2 data.
KAPLAN_B_STAR = 2e8
KAPLAN_ALPHA_B = 0.21


# x = B/B_crit beyond this factor either way is doubtful: x = 100 spends E/E_min = 1 + x = 101x the
# minimal tokens, x = 1/100 takes S/S_min = 1 + 1/x = 101x the minimal steps (McCandlish et al. 2018,
# eq. 2.11). No plan sits there on purpose, so B_crit is the likelier mistake (a warning, for the
# chosen batch and for a declared target.at_batch alike).
X_DOUBTFUL = 100.0


def kaplan_b_crit(loss: float) -> float:
    """B_crit in tokens at `loss` (nats/token), Kaplan et al. (2020) eq. 1.4."""
    return cf.kaplan_b_crit(loss, KAPLAN_B_STAR, KAPLAN_ALPHA_B)


@dataclass(frozen=True, slots=True)
class Frontier:
    """One run's frontier: B_crit, E_min and S_min; everything else follows from B."""

    b_crit: float  # tokens
    e_min: float  # tokens

    @property
    def s_min(self) -> float:
        return self.e_min / self.b_crit

    def x(self, batch: float) -> float:
        return batch / self.b_crit

    def steps(self, batch: float) -> float:
        """S(B), optimizer steps (continuous)."""
        return steps(self.e_min, self.b_crit, batch)

    def examples(self, batch: float) -> float:
        """E(B), tokens (continuous)."""
        return self.e_min * e_over_emin(self.b_crit, batch)

    def s_over_smin(self, batch: float) -> float:
        return s_over_smin(self.b_crit, batch)

    def e_over_emin(self, batch: float) -> float:
        return e_over_emin(self.b_crit, batch)


# The frontier's factors, eq. 2.11 and 2.12, as functions of B_crit and B: plain arithmetic, so the
# same definitions run on floats (one plan) and on numpy arrays (a sweep's rows).

def s_over_smin(b_crit, batch):
    """S(B)/S_min = 1 + B_crit/B."""
    return 1.0 + b_crit / batch


def e_over_emin(b_crit, batch):
    """E(B)/E_min = 1 + B/B_crit."""
    return 1.0 + batch / b_crit


def steps(e_min, b_crit, batch):
    """S(B) = S_min (1 + B_crit/B), optimizer steps (continuous)."""
    return e_min / b_crit * s_over_smin(b_crit, batch)


def balance(x):
    """(S/S_min)(E/E_min) = (1 + 1/x)(1 + x) at x = B/B_crit: least, 4, at x = 1."""
    return s_over_smin(1.0, x) * e_over_emin(1.0, x)


def balance_at(b_crit, batch):
    """(S/S_min)(E/E_min) at B, from B and B_crit themselves (no x: the placement's own key)."""
    return s_over_smin(b_crit, batch) * e_over_emin(b_crit, batch)



def wall_bound(lines, b_min, b_crit, s_min, b_max=None, xp=SCALAR):
    """The least of W(B) ≥ S_min(1 + B_crit/B)·max(a1·B + c1, a2·B + c2) over b_min ≤ B ≤ b_max
    (None: no upper end), `lines` = ((a1, c1), (a2, c2)), c ≥ 0: a lower bound of the wall clock of
    a step time above both lines (steps from the continuous frontier, eq. 2.11; integer steps only
    add). Each S_min(1 + B_crit/B)(a·B + c) is convex in B, so is their maximum, and its least on
    the interval lies at an end, at a line's own least √(B_crit·c/a), or where the lines cross.
    Floats, or numpy arrays (the lines per pair, or B_crit and S_min per row) with `xp` numpy."""
    (a1, c1), (a2, c2) = lines

    def at(b):
        return s_over_smin(b_crit, b) * xp.maximum(a1 * b + c1, a2 * b + c2)

    def lower(best, b, inside):
        return xp.where(inside, xp.minimum(best, at(xp.where(inside, b, b_min))), best)

    best = at(b_min)
    if b_max is not None:
        best = xp.minimum(best, at(b_max))
    for a, c in lines:  # each line's own least, where a > 0 and c > 0
        own = (a > 0.0) & (c > 0.0)
        if own is not False:  # (a plain False: no such point anywhere)
            b = xp.sqrt(b_crit * xp.where(own, c, 1.0) / xp.where(own, a, 1.0))
            best = lower(best, b, own & (b >= b_min) & (True if b_max is None else b <= b_max))
    cross = a1 != a2  # where the lines cross
    if cross is not False:
        b = (c2 - c1) / xp.where(cross, a1 - a2, 1.0)
        best = lower(best, b, cross & (b >= b_min) & (True if b_max is None else b <= b_max))
    return s_min * best


def e_min_of(target: Target, b_crit: float) -> float:
    if target.min_tokens is not None:
        return float(target.min_tokens)
    assert target.tokens is not None and target.at_batch is not None  # the plan validator ensures it
    return cf.e_min_from_target(target.tokens, target.at_batch, b_crit)


def frontier_from_target(target: Target, b_crit: float) -> Frontier:
    return Frontier(b_crit=b_crit, e_min=e_min_of(target, b_crit))
