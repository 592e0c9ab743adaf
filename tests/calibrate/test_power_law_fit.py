"""The fit B_crit(L) = B*/L^(1/alpha) in log space, with its uncertainty."""

import math

import pytest

np = pytest.importorskip("numpy")  # the calibrate extra

from budgetdsl.calibrate.fit import spaced  # noqa: E402

from budgetdsl.theory.power_law_fit import FitError, fit_power_law  # noqa: E402


def _synthetic(b_star=2e8, alpha=0.21, sigma=0.1, n=12, seed=0):
    rng = np.random.default_rng(seed)
    loss = np.linspace(2.0, 4.0, n)
    b = b_star / loss ** (1 / alpha) * np.exp(rng.normal(0, sigma, n))
    half = 1.96 * sigma
    return loss, b, b * math.exp(-half), b * math.exp(half)


def test_recovers_a_known_law_within_its_uncertainty():
    hits = 0
    for seed in range(40):
        law = fit_power_law(*_synthetic(seed=seed))
        p_se = math.sqrt(law.cov[1][1])
        hits += abs(1 / law.alpha - 1 / 0.21) < 1.96 * p_se
        assert law.loss_min == 2.0 and law.loss_max == 4.0 and law.n_points == 12
    assert hits >= 34  # ~95% coverage of the exponent's interval


def test_exact_data_gives_exact_parameters():
    loss, b, lo, hi = _synthetic(sigma=1e-9)
    law = fit_power_law(loss, b, b * 0.9, b * 1.1)
    assert law.b_star == pytest.approx(2e8, rel=1e-6) and law.alpha == pytest.approx(0.21, rel=1e-6)


def test_refuses_what_cannot_be_fitted():
    loss, b, lo, hi = _synthetic()
    with pytest.raises(FitError, match="needs at least 3"):
        fit_power_law(loss[:2], b[:2], lo[:2], hi[:2])
    with pytest.raises(FitError, match="hardly changed"):
        fit_power_law([3.0, 3.001, 3.002], b[:3], lo[:3], hi[:3])
    # a point open at both ends carries nothing: 2 usable
    with pytest.raises(FitError, match="2 usable"):
        fit_power_law(loss[:3], b[:3], [lo[0], lo[1], None], [hi[0], hi[1], None])


def test_a_law_that_does_not_move_is_refused():
    """B_simple constant over the losses (a run at fixed weights, or too short): the slope is not
    told from 0, and the fit says so instead of producing an alpha."""
    rng = np.random.default_rng(1)
    loss = np.linspace(0.57, 0.69, 50)
    b = 80 * np.exp(rng.normal(0, 0.1, loss.size))
    with pytest.raises(FitError, match="not distinguishable from zero"):
        fit_power_law(loss, b, b * math.exp(-0.2), b * math.exp(0.2))


def test_open_intervals_enter_as_bounds_and_keep_the_law_unbiased():
    """Where B is large its interval is open above (|G|^2 not resolved): those points are the ones
    with large B. Dropping them biases the slope; as censored points (B >= lo) they do not."""
    p_true, se_sum, est_kept, est_dropped = 1 / 0.21, [], [], []
    for seed in range(40):
        loss, b, lo, hi = _synthetic(seed=seed, sigma=0.3, n=16)
        open_above = b > np.quantile(b, 0.6)  # the largest 40 % lose their upper end
        hi_open = np.where(open_above, math.inf, hi)
        law = fit_power_law(loss, b, lo, hi_open)
        assert law.n_censored == int(open_above.sum()) and law.n_points == 16
        est_kept.append(1 / law.alpha)
        se_sum.append(math.sqrt(law.cov[1][1]))
        keep = ~open_above
        est_dropped.append(1 / fit_power_law(loss[keep], b[keep], lo[keep], hi[keep]).alpha)
    se = float(np.mean(se_sum)) / math.sqrt(40)
    assert abs(np.mean(est_kept) - p_true) < 3 * se + 0.05 * p_true
    assert abs(np.mean(est_dropped) - p_true) > abs(np.mean(est_kept) - p_true)


def test_spaced_points_keep_the_last_and_respect_the_spacing():
    steps = list(range(0, 300, 10))
    idx = spaced(steps, spacing=39, start=50)
    chosen = [steps[i] for i in idx]
    assert chosen[-1] == 290 and chosen[0] >= 50
    assert all(b - a >= 39 for a, b in zip(chosen, chosen[1:]))
