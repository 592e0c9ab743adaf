"""A calibration file is untrusted: a trajectory whose steps go back anywhere, even once between two
neighbours, is refused with both steps named, rather than read as a B_noise curve."""

from __future__ import annotations

from pathlib import Path

import pytest

from budgetdsl.plan.calibration_file import load_calibration
from budgetdsl.solve.batch_ramp import NoiseTrajectory

FIXTURE = Path(__file__).parents[1] / "fixtures/calibration/gpt-micro-stdlib.json"


@pytest.mark.parametrize("where", [0, 1, 2, -3, -2])
def test_one_step_out_of_order_is_refused(where):
    cal = load_calibration(FIXTURE)
    points = list(cal.trajectory)
    n = where % (len(points) - 1)
    points[n], points[n + 1] = points[n + 1], points[n]  # two neighbours swapped: one step back
    bad = cal.model_copy(update={"trajectory": points})
    with pytest.raises(ValueError, match="not in increasing order") as exc:
        NoiseTrajectory.from_calibration(bad)
    assert f"(step {points[n + 1].step} follows step {points[n].step})" in str(exc.value)


def test_a_step_recorded_twice_is_refused():
    """Two points at one step are not a trajectory (the progress between them would be zero, and
    a resumed run that logged a step again is not a curve to trust): strictly increasing steps."""
    cal = load_calibration(FIXTURE)
    points = list(cal.trajectory)
    points[2] = points[2].model_copy(update={"step": points[1].step})
    with pytest.raises(ValueError, match="not in increasing order") as exc:
        NoiseTrajectory.from_calibration(cal.model_copy(update={"trajectory": points}))
    assert f"(step {points[1].step} follows step {points[1].step})" in str(exc.value)


def test_a_plain_mean_estimator_drops_only_the_warmup():
    """ema_beta 1 is the plain mean over all steps (no EMA window to wait out): the trajectory
    starts at the first usable point past the warmup, and ends at the last point."""
    cal = load_calibration(FIXTURE)
    p = cal.provenance
    estimator = p.estimator.model_copy(update={"ema_beta": 1.0})
    warmup = cal.trajectory[3].step
    optimizer = p.optimizer.model_copy(update={"warmup_steps": warmup})
    plain = cal.model_copy(update={"provenance": p.model_copy(update={"estimator": estimator, "optimizer": optimizer})})
    t = NoiseTrajectory.from_calibration(plain)
    usable = [x for x in plain.trajectory if x.step >= warmup and x.b_simple and x.b_simple > 0]
    assert f"steps {usable[0].step}–{usable[-1].step}" in t.source  # what the report names as the source
    assert t.b_noise[-1] == pytest.approx(usable[-1].b_simple_tokens, rel=1e-12)
