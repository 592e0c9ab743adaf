"""`budgetdsl calibrate sweep`: the frontier measured directly on the proxy, end to end through the
real CLI (the quick size), and its pieces on synthetic data with known truth."""


import pytest

torch = pytest.importorskip("torch")

from budgetdsl.calibrate.sweep import crossing, pilot_target  # noqa: E402
from budgetdsl.calibrate.sweep_config import SweepConfig  # noqa: E402

from budgetdsl.plan.calibration_file import load_calibration  # noqa: E402


def test_crossing_interpolates_between_the_bracketing_evaluations():
    assert crossing([0, 10, 20], [3.0, 2.5, 2.0], 2.25) == pytest.approx(15.0)
    assert crossing([0, 10, 20], [3.0, 2.5, 2.0], 2.5) == pytest.approx(10.0)
    assert crossing([0, 10, 20], [3.0, 2.5, 2.4], 2.0) is None


def test_the_pilot_target_is_crossed_within_the_pilot():
    losses = [3.0, 2.6, 2.4, 2.41, 2.39]
    t = pilot_target(losses)
    assert t == pytest.approx((2.4 + 2.41 + 2.39) / 3)
    assert crossing(list(range(len(losses))), losses, t) is not None


def test_lr_rules_and_micro_batches():
    cfg = SweepConfig()
    assert cfg.lr_at(128) == pytest.approx(1e-3 * 2)  # sqrt rule from 1e-3 at 32
    assert cfg.with_(lr_rule="linear").lr_at(64, 0.5) == pytest.approx(1e-3)
    assert cfg.micro_for(8) == 2 and cfg.micro_for(512) == 64 and cfg.micro_for(24) == 6
    assert cfg.steps_limit == 900 and cfg.with_(target_loss=2.0).steps_limit == 2000


@pytest.mark.parametrize("change, message", [
    (dict(batches=(8, 16)), "at least 3"), (dict(batches=(1, 8, 16)), "at least 2 examples"),
    (dict(target_loss=-1.0), "positive"), (dict(lr_rule="cubic"), "lr-rule"),
    (dict(lr_grid=(1.0, -2.0)), "positive multipliers"), (dict(reference_batch=5), "not one of")])
def test_bad_settings_name_the_flag(change, message):
    with pytest.raises(ValueError, match=message):
        SweepConfig().with_(**change).validate()


def test_quick_sweep_writes_the_frontier_into_the_calibration(cli, tmp_path, capsys):
    out = tmp_path / "sweep.json"
    plot = tmp_path / "sweep.svg"
    assert cli(["calibrate", "sweep", "--quick", "--out", str(out), "--plot", str(plot)]) == 0
    cal = load_calibration(out)
    sw = cal.sweep
    assert sw.target_from == "pilot" and sw.batches == [4, 8, 16, 32, 64]
    assert all(r.reached and r.best for r in sw.runs)
    steps = [r.steps_to_target for r in sw.runs]
    assert steps[0] > steps[-1]  # a larger batch needs fewer steps ...
    tokens = [r.tokens_to_target for r in sw.runs]
    assert tokens[-1] > tokens[0]  # ... and more tokens
    f = sw.fit
    assert f.b_crit_examples == pytest.approx(f.e_min_examples / f.s_min)
    assert f.b_crit_tokens == pytest.approx(f.b_crit_examples * 32)
    assert f.b_crit_ci_low_tokens < f.b_crit_tokens < f.b_crit_ci_high_tokens
    assert f.n_points == 5 and f.dof == 3
    c = sw.comparison
    assert c.b_simple_examples > 0 and c.ratio == pytest.approx(f.b_crit_examples / c.b_simple_examples)
    # Adam's preconditioned B_simple, pooled the same way: the mean tr Σ over the mean |G|² of the runs
    for r in sw.runs:
        assert r.b_simple_pre == pytest.approx(r.trace_sigma_pre / r.grad_sq_pre)
    pooled = sum(r.trace_sigma_pre for r in sw.runs) / sum(r.grad_sq_pre for r in sw.runs)
    assert c.b_simple_pre_examples == pytest.approx(pooled) and c.b_simple_pre_examples != c.b_simple_examples
    assert c.ratio_pre == pytest.approx(f.b_crit_examples / c.b_simple_pre_examples)
    assert c.b_simple_pre_ci_low < c.b_simple_pre_examples < c.b_simple_pre_ci_high
    # the file is also a B_simple calibration (the smallest batch's run) and a noise source
    assert cal.provenance.batch.global_batch_examples == 4 and cal.trajectory
    b, rel = cal.b_crit_tokens_at(sw.target_loss, source="sweep")
    assert b == pytest.approx(f.b_crit_tokens) and rel == pytest.approx(f.b_crit_rel_se)
    with pytest.raises(ValueError, match="not the loss the frontier sweep measured"):
        cal.b_crit_tokens_at(sw.target_loss + 0.5, source="sweep")
    printed = capsys.readouterr().out
    assert "B_crit / B_simple =" in printed and "tokens to the target (log)" in printed
    assert f"B_simple of Adam's preconditioned gradient there = {c.b_simple_pre_examples:.3g}" in printed
    assert cal.schema_version == 2 and cal.provenance.batch.context == 32 == cal.context
    assert f"wrote {out}" in printed
    assert plot.read_text().startswith("<?xml")
    # same seed, same start: the sweep is deterministic
    again = tmp_path / "again.json"
    assert cli(["calibrate", "sweep", "--quick", "--quiet", "--out", str(again)]) == 0
    assert [r.steps_to_target for r in load_calibration(again).sweep.runs] == steps


def test_a_batch_that_never_reaches_the_target_is_said_and_left_out(cli, tmp_path, capsys):
    out = tmp_path / "short.json"
    code = cli(["calibrate", "sweep", "--quick", "--target-loss", "2.6", "--max-steps", "60",
                "--out", str(out)])
    sw = load_calibration(out).sweep
    missed = [r for r in sw.runs if not r.reached]
    assert missed and all("did not reach loss 2.6000 in 60 steps" in r.note for r in missed)
    assert all(r.steps_run == 60 for r in missed)
    printed = capsys.readouterr()
    assert "did not reach" in printed.out
    if sw.fit is None:
        assert code == 1 and "no frontier fit" in printed.err
    else:
        assert code == 0 and sw.fit.n_points == sum(r.reached for r in sw.runs)


def test_a_target_above_the_initial_loss_is_a_usage_error(cli, tmp_path, capsys):
    assert cli(["calibrate", "sweep", "--quick", "--target-loss", "50", "--out", str(tmp_path / "x.json")]) == 2
    assert "not below the initial held-out loss" in capsys.readouterr().err


def test_bad_flags_are_usage_errors(cli, tmp_path, capsys):
    assert cli(["calibrate", "sweep", "--batches", "8,16", "--out", str(tmp_path / "x.json")]) == 2
    assert "at least 3 distinct" in capsys.readouterr().err
    assert cli(["calibrate", "sweep", "--quick", "--plot", str(tmp_path / "x.pdf")]) == 2
    assert ".svg or .png" in capsys.readouterr().err
