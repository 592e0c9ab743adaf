"""The estimator's arithmetic: McCandlish appendix A, the bias-corrected EMA, Fieller's interval."""

import math
import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

np = pytest.importorskip("numpy")  # the calibrate extra

from budgetdsl.calibrate.noise import (  # noqa: E402
    BiasCorrectedEMA,
    NoiseScaleTracker,
    ema_weights,
    fieller_interval,
    noise_scale_interval,
    successive_difference_covariance,
    t_quantile,
    two_batch_estimates,
)


@given(
    g2=st.floats(1e-6, 1e6),
    trace=st.floats(0.0, 1e8),
    b_small=st.integers(1, 512),
    factor=st.integers(2, 64),
)
def test_two_batch_formulas_invert_the_expected_norms(g2, trace, b_small, factor):
    b_big = b_small * factor
    # E|g_B|^2 = |G|^2 + tr(Sigma)/B  (McCandlish A.1)
    sq_small, sq_big = g2 + trace / b_small, g2 + trace / b_big
    est_g2, est_trace = two_batch_estimates(sq_small, sq_big, b_small, b_big)
    scale = sq_small  # the formulas subtract nearly equal numbers: error relative to the inputs
    assert est_g2 == pytest.approx(g2, rel=1e-9, abs=1e-9 * scale)
    assert est_trace == pytest.approx(trace, rel=1e-9, abs=1e-9 * scale * b_small)


def test_two_batch_needs_two_distinct_sizes():
    with pytest.raises(ValueError, match="B_small < B_big"):
        two_batch_estimates(1.0, 1.0, 8, 8)


def test_bias_corrected_ema_has_no_startup_bias():
    ema = BiasCorrectedEMA(0.9)
    assert [round(ema.update(5.0), 12) for _ in range(3)] == [5.0, 5.0, 5.0]


@pytest.mark.parametrize("beta", [0.0, 0.5, 0.95, 1.0])
def test_ema_weights_match_the_recursion(beta):
    xs = [random.Random(1).gauss(0, 1) + i for i in range(30)]
    ema = BiasCorrectedEMA(beta)
    for x in xs:
        ema.update(x)
    w = ema_weights(len(xs), beta)
    assert w.sum() == pytest.approx(1.0)
    assert ema.value == pytest.approx(float(np.dot(w, xs)))
    if beta == 1.0:
        assert ema.value == pytest.approx(sum(xs) / len(xs))  # the limit: the plain mean


def test_t_quantile_matches_tables():
    for dof, exact in [(3, 3.1824), (4, 2.7764), (9, 2.2622), (30, 2.0423), (1000, 1.9623)]:
        assert t_quantile(0.975, dof) == pytest.approx(exact, rel=2e-3)


def test_fieller_interval_shrinks_to_the_ratio_and_opens_when_the_denominator_is_noise():
    lo, hi = fieller_interval(10.0, 2.0, 1e-8, 1e-8, 0.0, 1.96)
    assert lo == pytest.approx(5.0, rel=1e-3) and hi == pytest.approx(5.0, rel=1e-3)
    lo, hi = fieller_interval(10.0, 2.0, 1.0, 0.04, 0.0, 1.96)
    assert lo < 5.0 < hi and (hi - 5.0) > (5.0 - lo)  # asymmetric: the ratio's tail is long
    assert fieller_interval(10.0, 0.1, 1.0, 1.0, 0.0, 1.96) == (None, None)
    assert noise_scale_interval(0.1, 1.0, 1.0, 1e-6, 0.0, 1.96)[0] == 0.0  # tr(Sigma) >= 0


def test_successive_differences_see_the_noise_not_the_trend():
    rng = np.random.default_rng(0)
    noise = rng.multivariate_normal([0, 0], [[4.0, 1.0], [1.0, 1.0]], size=4000)
    trend = np.column_stack([np.linspace(0, 300, 4000), np.linspace(50, 0, 4000)])
    cov, dof = successive_difference_covariance(noise + trend)
    np.testing.assert_allclose(cov, [[4.0, 1.0], [1.0, 1.0]], rtol=0.1)
    assert np.cov(noise + trend, rowvar=False)[0, 0] > 100  # a plain variance counts the trend
    assert dof == pytest.approx(2 * 3999**2 / (3 * 4000 - 4))
    assert successive_difference_covariance(noise[:4]) is None


def test_tracker_smooths_numerator_and_denominator_separately_and_round_trips():
    rng = random.Random(7)
    tr = NoiseScaleTracker(beta=0.9)
    for step in range(60):
        g2, trace = 2.0 + rng.gauss(0, 1.5), 200.0 + rng.gauss(0, 40)
        # feed the norms that produce exactly these estimates (B_small 4, B_big 32)
        tr.update(step, g2 + trace / 4, g2 + trace / 32, 4, 32)
    s = tr.smoothed()
    w = tr.weights()
    assert s.b_simple == pytest.approx(float(np.dot(w, tr.trace)) / float(np.dot(w, tr.g2)))
    assert s.b_simple != pytest.approx(float(np.dot(w, np.array(tr.trace) / np.array(tr.g2))))
    lo, hi = tr.interval()
    assert lo < s.b_simple < hi
    copy = NoiseScaleTracker(beta=0.9)
    copy.load_state_dict(tr.state_dict())
    assert copy.smoothed() == s and copy.interval() == (lo, hi)


def test_tracker_needs_a_few_steps_for_an_interval():
    tr = NoiseScaleTracker(beta=0.9)
    tr.update(0, 3.0, 2.0, 4, 32)
    assert tr.interval() == (None, None)
    assert math.isfinite(tr.smoothed().b_simple)


def test_a_significantly_negative_g2_leaves_the_interval_open_not_zero():
    """|G|^2 = -1 +- 0.1: the estimates contradict |G|^2 >= 0, so the set says nothing about B
    (before: clipped to [0, 0], a claim that B = 0)."""
    assert noise_scale_interval(30.0, -1.0, 1.0, 0.01, 0.0, 1.96) == (None, None)
    # tr(Sigma) significantly negative under a positive |G|^2: likewise open, never [0, 0]
    assert noise_scale_interval(-30.0, 1.0, 1.0, 0.01, 0.0, 1.96) == (None, None)


def test_an_unresolved_g2_with_a_resolved_trace_bounds_b_from_below():
    """|G|^2 = 0.1 +- 0.1 (not told from 0), tr(Sigma) = 30 +- 1: B >= r, open above, where r is
    the positive root of Fieller's quadratic: (30 - r 0.1)^2 = z^2 (1 + r^2 0.01)."""
    z = 1.96
    lo, hi = noise_scale_interval(30.0, 0.1, 1.0, 0.01, 0.0, z)
    assert hi is None and lo is not None and lo > 0
    assert (30.0 - lo * 0.1) ** 2 == pytest.approx(z * z * (1.0 + lo * lo * 0.01))
    assert lo < 30.0 / 0.1  # below the point estimate


def test_the_tracker_reports_its_effective_number_of_steps():
    tr = NoiseScaleTracker(0.95)
    for k in range(300):
        tr.update(k, 10.0 + (k % 3), 3.0 + (k % 2), 4, 16)
    assert tr.effective_steps() == pytest.approx(39.0, rel=0.01)  # (1 + beta) / (1 - beta)
    plain = NoiseScaleTracker(1.0)
    for k in range(50):
        plain.update(k, 10.0, 3.0, 4, 16)
    assert plain.effective_steps() == pytest.approx(50.0)
