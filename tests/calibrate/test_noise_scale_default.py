"""Issue 25 item 2: the law B_crit(L) a calibration writes — what the planner reads — is fitted to
the noise scale budgetdsl.theory.noise_scale chose, and the file says which; the raw B_simple by
default, Adam's preconditioned one when the decision says so."""

import math

import pytest
from budgetdsl.calibrate import record as record_module
from budgetdsl.calibrate.noise import NoiseScaleTracker
from budgetdsl.calibrate.record import RunRecord

B_STAR, ALPHA, PRE = 4.0e4, 0.25, 7.0  # the law, and the preconditioned B_simple's factor over it


def _record() -> RunRecord:
    """A trajectory on an exact law B = B*/L^(1/α) (±10 % intervals), the preconditioned one PRE×."""
    rec = RunRecord(NoiseScaleTracker(0.95), batch=64, micro_batch=8, tokens_per_example=1)
    for step in range(0, 400, 10):
        loss = 4.0 - 1.5 * step / 400
        b = B_STAR / loss ** (1 / ALPHA)
        rec.trajectory.append({"step": step, "loss_smoothed": loss, "b_simple": b, "ci_low": 0.9 * b,
                               "ci_high": 1.1 * b, "b_simple_pre": PRE * b, "ci_low_pre": 0.9 * PRE * b,
                               "ci_high_pre": 1.1 * PRE * b})
    return rec


def test_the_fit_is_of_the_raw_noise_scale_by_default():
    assert record_module.DEFAULT_NOISE_SCALE == "raw"
    fit, error = _record().fit(warmup=0)
    assert error is None and fit.noise_scale == "raw"
    assert fit.b_star_tokens == pytest.approx(B_STAR, rel=1e-6) and fit.alpha == pytest.approx(ALPHA, rel=1e-6)


def test_the_fit_follows_the_decision_when_it_is_the_preconditioned_one(monkeypatch):
    monkeypatch.setattr(record_module, "DEFAULT_NOISE_SCALE", "preconditioned")
    fit, error = _record().fit(warmup=0)
    assert error is None and fit.noise_scale == "preconditioned"
    assert math.log(fit.b_star_tokens) == pytest.approx(math.log(PRE * B_STAR), rel=1e-6)
    assert fit.alpha == pytest.approx(ALPHA, rel=1e-6)
