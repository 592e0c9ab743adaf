"""The frontier fit S = S_min + E_min/B (McCandlish et al. 2018, eq. 2.11) on synthetic data with
known truth: exact recovery, recovery under noise with honest uncertainties, and refusal when the
batches do not straddle B_crit."""

import math
import random

import pytest

from budgetdsl.theory.frontier_fit import FrontierFitError, FrontierUndetermined, fit_frontier

S_MIN, E_MIN = 400.0, 400.0 * 96.0  # B_crit = 96 examples


def geometric(lo: float, hi: float, n: int) -> list[float]:
    return [lo * (hi / lo) ** (i / (n - 1)) for i in range(n)]


def test_exact_points_are_recovered_exactly():
    batches = geometric(8, 1024, 8)
    fit = fit_frontier([(b, S_MIN + E_MIN / b) for b in batches])
    assert fit.s_min == pytest.approx(S_MIN, rel=1e-8)
    assert fit.e_min == pytest.approx(E_MIN, rel=1e-8)
    assert fit.b_crit == pytest.approx(96.0, rel=1e-8)
    assert max(abs(r) for r in fit.residuals) < 1e-9


@pytest.mark.parametrize("seed", range(6))
def test_noisy_points_recover_the_truth_within_the_reported_uncertainty(seed):
    rng = random.Random(seed)
    batches = geometric(8, 1024, 8)
    noise = 0.05  # 5 % log-normal scatter of steps-to-target
    pts = [(b, (S_MIN + E_MIN / b) * math.exp(rng.gauss(0, noise))) for b in batches for _ in range(2)]
    fit = fit_frontier(pts)
    assert fit.dof == len(pts) - 2
    # within 4 standard errors (and the standard errors are of the right size: a few percent)
    assert abs(math.log(fit.s_min / S_MIN)) < 4 * fit.s_min_rel_se
    assert abs(math.log(fit.e_min / E_MIN)) < 4 * fit.e_min_rel_se
    assert abs(math.log(fit.b_crit / 96.0)) < 4 * fit.b_crit_rel_se
    assert 0.005 < fit.b_crit_rel_se < 0.2
    assert fit.b_crit == pytest.approx(96.0, rel=0.25)
    lo, hi = fit.b_crit_interval(0.95)
    assert lo < fit.b_crit < hi
    assert fit.rms_residual == pytest.approx(noise, rel=0.6)


def test_the_uncertainty_is_calibrated_over_many_noisy_sweeps():
    """About 95 % of 95 % intervals hold the true B_crit (here: at least 85 % of 200)."""
    rng = random.Random(7)
    batches = geometric(8, 1024, 7)
    hits = 0
    for _ in range(200):
        pts = [(b, (S_MIN + E_MIN / b) * math.exp(rng.gauss(0, 0.08))) for b in batches]
        lo, hi = fit_frontier(pts).b_crit_interval(0.95)
        hits += lo <= 96.0 <= hi
    assert hits >= 170


def test_all_batches_far_below_b_crit_is_refused():
    batches = geometric(1, 8, 6)
    s_min, e_min = 40.0, 40.0 * 5000  # B_crit = 5000: x <= 1/600, S ~ 1/B over the range
    with pytest.raises(FrontierUndetermined, match=r"far below B_crit.*add runs at larger batches"):
        fit_frontier([(b, (s_min + e_min / b) * (1 + 0.02 * (-1) ** i)) for i, b in enumerate(batches)])


def test_all_batches_far_above_b_crit_is_refused():
    batches = geometric(2048, 65536, 6)
    with pytest.raises(FrontierUndetermined, match=r"far above B_crit.*add runs at smaller batches"):
        fit_frontier([(b, (S_MIN + E_MIN / b) * (1 + 0.02 * (-1) ** i)) for i, b in enumerate(batches)])


def test_undetermined_is_a_fit_error_and_a_value_error():
    assert issubclass(FrontierUndetermined, FrontierFitError)
    assert issubclass(FrontierFitError, ValueError)


@pytest.mark.parametrize("points, message", [
    ([(8, 100), (16, 60)], "at least 3"),
    ([(8, 100), (8, 90), (16, 60), (16, 61)], "2 distinct"),
    ([(8, 100), (16, -60), (32, 40)], "positive finite"),
    ([(8, 100), (16, math.nan), (32, 40)], "positive finite"),
])
def test_unusable_input_is_refused(points, message):
    with pytest.raises(FrontierFitError, match=message):
        fit_frontier(points)


def test_units_carry_through():
    """Batches in tokens give E_min and B_crit in tokens (a factor 64 on both, none on S_min)."""
    batches = geometric(8, 1024, 6)
    pts = [(b, S_MIN + E_MIN / b) for b in batches]
    a = fit_frontier(pts)
    b = fit_frontier([(x * 64, s) for x, s in pts])
    assert b.s_min == pytest.approx(a.s_min, rel=1e-7)
    assert b.b_crit == pytest.approx(64 * a.b_crit, rel=1e-7)
