"""The batch ramp against closed forms on synthetic B_noise trajectories (McCandlish et al. 2018:
dS = S_min (1 + B_noise/B) dφ; an adaptive batch x·B_noise gives S = S_min(1 + 1/x),
E = E_min(1 + x) exactly)."""

import math
from pathlib import Path

import pytest

from budgetdsl.solve.batch_ramp import (
    NoiseTrajectory,
    adaptive_closed_form,
    auto_boundaries,
    plan_auto,
    stage_cost,
    stages_from_token_fractions,
    totals,
)

# B_noise grows 30-fold over training, as a power of progress (tokens)
GROWING = NoiseTrajectory(tuple(i / 50 for i in range(51)),
                          tuple(1e5 * (1 + 29 * (i / 50) ** 0.7) for i in range(51)))
S_MIN = 10_000.0


@pytest.mark.parametrize("k", [1, 2, 4, 9])
@pytest.mark.parametrize("x", [0.25, 1.0, 3.0])
def test_unsnapped_ramp_meets_the_adaptive_closed_form_for_any_k(k, x):
    e_min = S_MIN * GROWING.integral(0, 1)
    costs = plan_auto(GROWING, S_MIN, k, x)
    steps, tokens = totals(costs)
    cs, ce = adaptive_closed_form(S_MIN, e_min, x)
    assert steps == pytest.approx(cs, rel=1e-9)
    assert tokens == pytest.approx(ce, rel=1e-9)
    assert len(costs) == k
    assert all(c.x == pytest.approx(x) for c in costs)
    assert [c.batch for c in costs] == sorted(c.batch for c in costs)  # the batch ramps up


def test_savings_against_a_fixed_batch_equal_the_closed_form():
    """Fixed batch B_f: S = S_min(1 + B_crit/B_f), E = E_min(1 + B_f/B_crit) with B_crit the
    progress-average; a ramp at x saves S_min(1/x_f - 1/x) steps and E_min(x_f - x) tokens."""
    b_crit = GROWING.mean()
    e_min = S_MIN * b_crit
    for x_f, x in ((4.0, 1.0), (1.0, 0.5), (8.0, 2.0)):
        fixed = stage_cost(GROWING, S_MIN, 0.0, 1.0, x_f * b_crit)
        assert fixed.steps == pytest.approx(S_MIN * (1 + 1 / x_f), rel=1e-9)
        assert fixed.tokens == pytest.approx(e_min * (1 + x_f), rel=1e-9)
        steps, tokens = totals(plan_auto(GROWING, S_MIN, 6, x))
        assert fixed.steps - steps == pytest.approx(S_MIN * (1 / x_f - 1 / x), rel=1e-9, abs=1e-6)
        assert fixed.tokens - tokens == pytest.approx(e_min * (x_f - x), rel=1e-9)


def test_snapping_moves_the_ramp_off_the_closed_form_only_slightly():
    unit = 4096 * 8  # whole sequences over 8 replicas
    costs = plan_auto(GROWING, S_MIN, 4, 1.0, snap=lambda b: max(1, round(b / unit)) * unit)
    steps, tokens = totals(costs)
    cs, ce = adaptive_closed_form(S_MIN, S_MIN * GROWING.integral(0, 1), 1.0)
    assert all(c.batch % unit == 0 for c in costs)
    assert steps == pytest.approx(cs, rel=0.05) and tokens == pytest.approx(ce, rel=0.05)
    assert steps * tokens >= cs * ce * (1 - 1e-12)  # x = 1 minimizes the product stage by stage


def test_token_fraction_stages_round_trip():
    """Stages planned in progress, written as fractions of the run's tokens, evaluate back to the
    same stages."""
    costs = plan_auto(GROWING, S_MIN, 4, 1.0)
    total = sum(c.tokens for c in costs)
    acc, stages = 0.0, []
    for c in costs:
        acc += c.tokens
        stages.append((acc / total, c.batch))
    back = stages_from_token_fractions(GROWING, S_MIN, stages)
    assert len(back) == 4
    for a, b in zip(costs, back):
        assert b.start == pytest.approx(a.start, abs=1e-6) and b.end == pytest.approx(a.end, abs=1e-6)
        assert b.steps == pytest.approx(a.steps, rel=1e-6)


def test_one_stage_is_the_fixed_batch():
    b = 3e6
    (only,) = stages_from_token_fractions(GROWING, S_MIN, [(1.0, b)])
    assert only.steps == pytest.approx(S_MIN * (1 + GROWING.mean() / b), rel=1e-9)


def test_constant_noise_gives_equal_boundaries_and_no_gain():
    flat = NoiseTrajectory.constant(2e5)
    assert auto_boundaries(flat, 4) == [0.0, 0.25, 0.5, 0.75, 1.0]
    steps, tokens = totals(plan_auto(flat, S_MIN, 4, 1.0))
    fixed = stage_cost(flat, S_MIN, 0, 1, 2e5)
    assert (steps, tokens) == (pytest.approx(fixed.steps), pytest.approx(fixed.tokens))


def test_scaling_keeps_the_shape():
    s = GROWING.scaled_to_mean(5e5)
    assert s.mean() == pytest.approx(5e5)
    assert s.at(0.3) / s.at(0.9) == pytest.approx(GROWING.at(0.3) / GROWING.at(0.9))


def test_piecewise_linear_integral_is_exact():
    t = NoiseTrajectory((0.0, 0.5, 1.0), (1.0, 3.0, 3.0))
    assert t.integral(0, 1) == pytest.approx(0.5 * 2 + 0.5 * 3)
    assert t.integral(0.25, 0.75) == pytest.approx(0.25 * (2 + 3) / 2 + 0.25 * 3)


@pytest.mark.parametrize("progress, b, message", [
    ((0.0, 0.0), (1.0, 2.0), "increase"), ((0.0, 1.0), (1.0, -2.0), "positive"), ((), (), "at least one")])
def test_bad_trajectories_are_refused(progress, b, message):
    with pytest.raises(ValueError, match=message):
        NoiseTrajectory(progress, b)


def test_trajectory_from_the_calibration_fixture():
    from pathlib import Path

    from budgetdsl.plan.calibration_file import load_calibration

    cal = load_calibration(Path(__file__).parents[1] / "fixtures/calibration/gpt-micro-stdlib.json")
    t = NoiseTrajectory.from_calibration(cal)
    assert t.progress[0] == 0.0 and t.progress[-1] == 1.0
    assert t.b_noise[-1] > 1.5 * t.b_noise[0]  # B_simple grows during the proxy's run
    assert math.isclose(t.b_noise[-1], cal.trajectory[-1].b_simple_tokens)


@pytest.mark.parametrize("k", [2, 4, 7])
def test_stages_with_their_b_noise_price_as_the_trajectory_they_came_from(k):
    """Stages written with their mean B_noise (track --replan) rebuild a trajectory on which each
    stage costs what it cost on the original: the same steps and tokens, stage by stage."""
    costs = plan_auto(GROWING, S_MIN, k, 0.5, snap=lambda b: 4096 * max(1, round(b / 4096)))
    total, done, written = sum(c.tokens for c in costs), 0.0, []
    for c in costs:
        done += c.tokens
        written.append((done / total, c.batch, c.b_noise))
    rebuilt = NoiseTrajectory.from_stages(written)
    assert rebuilt.mean() == pytest.approx(GROWING.mean(), rel=1e-6)  # the progress-weighted mean
    again = stages_from_token_fractions(rebuilt, S_MIN, [(u, b) for u, b, _ in written])
    assert len(again) == k
    for before, after in zip(costs, again):
        assert after.b_noise == pytest.approx(before.b_noise, rel=1e-6)
        assert after.steps == pytest.approx(before.steps, rel=1e-6)
        assert after.tokens == pytest.approx(before.tokens, rel=1e-6)


def test_a_trajectory_that_runs_past_a_million_steps_is_refused():
    """The file is untrusted: a last step of 10**12 would be summed step by step for hours. Only
    the last point runs long here (its predecessors are the fixture's own)."""
    from pathlib import Path

    from budgetdsl.plan.calibration_file import load_calibration

    cal = load_calibration(Path(__file__).parents[1] / "fixtures/calibration/gpt-micro-stdlib.json")
    last = cal.trajectory[-1].model_copy(update={"step": 10**12})
    long = cal.model_copy(update={"trajectory": [*cal.trajectory[:-1], last]})
    with pytest.raises(ValueError, match="runs to step 1000000000000: a proxy run of more than 1,000,000"):
        NoiseTrajectory.from_calibration(long)


def test_progress_between_calibration_points_is_the_integral_of_the_interpolated_noise():
    """φ(s) = Σ 1/(1 + b(s)/B_p) with b linear between kept points: over 20,000 steps the sum is the
    integral ∫ ds/(1 + b(s)/B_p) = L·B_p/(b1 − b0)·ln((B_p + b1)/(B_p + b0)) per segment (to 1e-3),
    so the progress at each point is its share of the whole."""
    from pathlib import Path

    from budgetdsl.plan.calibration_file import load_calibration

    cal = load_calibration(Path(__file__).parents[1] / "fixtures/calibration/gpt-micro-stdlib.json")
    bp = cal.provenance.batch.global_batch_examples  # 32 examples
    tokens = cal.provenance.batch.tokens_per_example
    points = [(100, 8.0), (10_100, 72.0), (20_100, 40.0)]  # (step, B_simple in examples)
    first = cal.trajectory[0]
    cal = cal.model_copy(update={"trajectory": [
        first.model_copy(update={"step": s, "b_simple": b, "b_simple_tokens": b * tokens}) for s, b in points]})
    t = NoiseTrajectory.from_calibration(cal)

    def segment(length, b0, b1):
        return length * bp / (b1 - b0) * math.log((bp + b1) / (bp + b0))

    head = 101 / (1 + 8.0 / bp)  # steps 0..100 at the first point's value
    one, two = head + segment(10_000, 8.0, 72.0), segment(10_000, 72.0, 40.0)
    assert t.progress[1:] == pytest.approx((head / (one + two), one / (one + two), 1.0), rel=1e-3)


@pytest.mark.parametrize("last_until", [1.0 - 1e-13, 0.5 + 1e-13])
def test_stage_boundaries_closer_than_a_ramp_keep_progress_increasing_to_one(last_until):
    """A stage boundary within STEP_WIDTH of the end, or of the boundary before it, gets no ramp of
    its own: the trajectory's progress rises strictly from 0 to exactly 1 (a point past 1, or one
    out of order, would misplace every B_noise read off it)."""
    traj = NoiseTrajectory.from_stages([(0.5, 65536.0, 1e5), (last_until, 65536.0, 2e5), (1.0, 65536.0, 3e5)])
    assert traj.progress[0] == 0.0 and traj.progress[-1] == 1.0
    assert all(a < b for a, b in zip(traj.progress, traj.progress[1:]))


def test_the_ramp_says_whether_it_was_planned_or_written(tmp_path):
    """A report of a ramp names its origin: `auto` where the solver planned the stages from the
    trajectory (plans/ramp-gpt-micro-proxy.yaml), `stages` where the plan wrote them itself."""
    from budgetdsl.plan.loader import load_plan
    from budgetdsl.solve.solver import solve

    repo = Path(__file__).resolve().parents[2]
    planned = solve(load_plan(repo / "plans" / "ramp-gpt-micro-proxy.yaml")).ramp
    assert planned is not None and planned.schedule == "auto"
    path = tmp_path / "written.yaml"
    path.write_text("name: written\nmodel: {params: 7B, layers: 32, d_model: 4096, seq_len: 2048}\n"
                    "hardware: {gpu: H100-SXM5-80GB, gpus: 64}\n"
                    "target: {min_tokens: 140B}\nnoise: {b_crit: 2M}\nrun:\n  batch_schedule:\n"
                    "    - {until: 25%, batch: 1M}\n    - {until: 100%, batch: 4M}\n")
    written = solve(load_plan(path)).ramp
    assert written is not None and written.schedule == "stages"
