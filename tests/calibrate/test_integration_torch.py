"""budgetdsl.calibrate.gns in plain PyTorch loops (issue 15 item 1): the same numbers as `budgetdsl
calibrate` on the same model, data and seed; the closed-form truth of the linear-regression proxy;
two gloo replicas under DDP the same as one process accumulating; a file `budgetdsl plan` reads."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import linreg_proxy  # noqa: E402
from budgetdsl.calibrate.gns import GradientNoiseScale  # noqa: E402
from gns_loops import linreg_loop  # noqa: E402

from budgetdsl.plan.calibration_file import load_calibration  # noqa: E402

HERE = Path(__file__).parent
REPO = HERE.parents[1]
LINREG = HERE / "linreg_proxy.py"
G2, TRACE, B_TRUE = linreg_proxy.truth()


def test_a_plain_loop_measures_what_budgetdsl_calibrate_measures(cli, linreg_args, tmp_path):
    """Same model, data order and seed at fixed weights: the integration's estimate lies in the
    calibration run's interval — in fact it is the same per-step numbers — and both intervals
    hold the closed-form truth."""
    out = tmp_path / "cli.json"
    assert cli(["calibrate", *linreg_args, "--lr", "0", "--steps", "200", "--batch", "64",
                "--micro-batch", "4", "--eval-every", "50", "--seed", "3", "--quiet", "--out", str(out)]) == 0
    ref = load_calibration(out)
    got = linreg_loop(None, steps=200, batch=64, micro=4, seed=3)
    assert ref.summary.ci_low <= got.summary.b_simple <= ref.summary.ci_high
    np.testing.assert_allclose(got.raw.grad_sq_small, ref.raw.grad_sq_small, rtol=1e-5)
    np.testing.assert_allclose(got.raw.grad_sq_big, ref.raw.grad_sq_big, rtol=1e-5)
    for cal in (ref, got):
        assert cal.summary.ci_low <= B_TRUE <= cal.summary.ci_high
    # The raw |G|^2 and tr(Sigma) average to the truth (fixed weights: i.i.d. steps).
    for key, truth in (("grad_sq", G2), ("trace_sigma", TRACE)):
        xs = np.asarray(getattr(got.raw, key))
        assert abs(xs.mean() - truth) < 4 * xs.std(ddof=1) / np.sqrt(xs.size), key
    assert got.provenance.batch.global_batch_examples == 64 and got.provenance.batch.accumulation == 16


def test_while_training_b_simple_follows_the_closed_form_along_the_loss():
    """lr > 0: the weights approach w*, the loss L = (|delta|^2 + sigma^2)/2 falls and
    B_simple = d + 1 + d sigma^2/|delta|^2 grows; every bounded trajectory interval holds the
    truth at its loss, and the fit exists."""
    cal = linreg_loop(None, steps=400, lr=0.003)
    assert cal.provenance.estimator.ema_beta == 0.95
    d, s2 = linreg_proxy.D, linreg_proxy.SIGMA ** 2
    bounded = [p for p in cal.trajectory if p.ci_low is not None and p.ci_high is not None and p.step > 0]
    assert len(bounded) >= 3
    for p in bounded:
        truth = d + 1 + d * s2 / (2 * p.loss_smoothed - s2)
        assert p.ci_low <= truth <= p.ci_high, (p.step, p.loss_smoothed, truth, p.ci_low, p.ci_high)
    assert cal.fit is not None and cal.trajectory[-1].b_simple > 3 * cal.trajectory[1].b_simple


def _loop(scale_loss: float, divide: bool, grad_scale=None, steps=30):
    """No optimizer: the loop marks each step's end itself (`end_step`, what the adapters call)."""
    torch.manual_seed(0)
    model = linreg_proxy.make_model()
    sampler, gen = linreg_proxy.make_data("train"), torch.Generator().manual_seed(0)
    gns = GradientNoiseScale(model, micro_batch=4, accumulation=4, loss_divided_by_accumulation=divide,
                             grad_scale=grad_scale, ema_beta=1.0)
    for _ in range(steps):
        for _ in range(4):
            loss = model(sampler(4, gen))
            (loss * scale_loss / (4 if divide else 1)).backward()
        gns.end_step()
        model.zero_grad(set_to_none=True)
    return gns.calibration(seed=0)


@pytest.mark.parametrize("examples", [1608, 1624])
def test_epochs_that_end_on_a_short_step_are_measured_at_that_steps_size(examples):
    """1,608 and 1,624 examples in micro-batches of 4 leave 2 micro-batches over at each epoch's
    end, and the loop steps on them: that step is measured as a batch of 8, not mixed into the next
    epoch's first step, and the closed form stays inside the interval."""
    steps = 300  # about three epochs of 101 steps
    cal = linreg_loop(None, steps=steps, batch=16, micro=4, examples=examples)
    s = cal.summary
    assert s.steps_measured == steps and s.steps_skipped == 0
    truth = linreg_proxy.finite_truth(*linreg_proxy.make_data("train")(examples, torch.Generator().manual_seed(3)))
    assert abs(truth / B_TRUE - 1) < 0.25  # the set's own B_simple: the closed form, up to sampling
    assert s.b_simple is not None and s.ci_low <= truth <= s.ci_high, (truth, s.b_simple, s.ci_low, s.ci_high)
    assert (s.ci_high - s.ci_low) / B_TRUE < 0.5
    assert cal.provenance.estimator.ema_beta == 1.0  # lr 0 seen at every step: the plain mean


def test_reentrant_checkpointing_measures_the_same_numbers():
    """A reentrant checkpoint runs a nested backward inside the step's: the micro-batch norms and
    the step's |g_big|^2 are those of the same model without it."""
    plain = linreg_loop(None, steps=120, batch=16, micro=4, examples=1608)
    nested = linreg_loop(None, steps=120, batch=16, micro=4, examples=1608,
                         model=linreg_proxy.CheckpointedLinearRegression())
    assert nested.summary.steps_measured == 120
    for key in ("grad_sq_small", "grad_sq_big"):
        np.testing.assert_allclose(getattr(nested.raw, key), getattr(plain.raw, key), rtol=1e-5, err_msg=key)
    assert nested.summary.ci_low <= B_TRUE <= nested.summary.ci_high


def test_a_parameter_whose_gradient_arrives_in_pieces_is_refused_with_the_remedy():
    from budgetdsl.calibrate.gns import SplitGradientError

    with pytest.raises(SplitGradientError, match=r"^b: .*use_reentrant=False"):
        linreg_loop(None, steps=20, batch=16, micro=4, model=linreg_proxy.CheckpointedLinearRegression(shared=True))


def test_without_a_step_boundary_nothing_is_invented():
    model = linreg_proxy.make_model()
    gns = GradientNoiseScale(model, micro_batch=4, accumulation=4)
    for _ in range(8):
        model(linreg_proxy.make_data("train")(4, torch.Generator().manual_seed(0))).backward()
    with pytest.raises(ValueError, match="no optimizer step was measured.*pass the optimizer"):
        gns.calibration(seed=0)


def test_the_ema_beta_follows_the_learning_rate_the_optimizer_ran_at():
    """One policy (calibrate.config.default_ema_beta): fixed weights => the plain mean; training
    => the EMA; whatever the integration."""
    from budgetdsl.calibrate.config import TRAINING_EMA_BETA, RunConfig

    assert linreg_loop(None, steps=20, lr=0.0).provenance.estimator.ema_beta == 1.0
    assert linreg_loop(None, steps=20, lr=1e-3).provenance.estimator.ema_beta == TRAINING_EMA_BETA
    assert RunConfig(lr=0.0).beta == 1.0 and RunConfig(lr=1e-3).beta == TRAINING_EMA_BETA


def test_the_loss_multiplier_and_the_amp_scale_are_divided_out():
    """Not dividing by the accumulation, or an fp16 loss scale of 1024, changes the raw gradients
    but not the file: |G|^2 and tr(Sigma) of mean losses, as `budgetdsl calibrate` writes them."""
    ref = _loop(1.0, True)
    for other in (_loop(1.0, False), _loop(1024.0, True, grad_scale=lambda: 1024.0)):
        np.testing.assert_allclose(other.raw.grad_sq, ref.raw.grad_sq, rtol=1e-5)
        np.testing.assert_allclose(other.raw.trace_sigma, ref.raw.trace_sigma, rtol=1e-5)
    # A wrong multiplier is visible: told the loss was divided when it was not, |G|^2 is off by 4^2.
    wrong = _loop(4.0, True)
    np.testing.assert_allclose(np.asarray(wrong.raw.grad_sq), 16 * np.asarray(ref.raw.grad_sq), rtol=1e-5)


def test_one_batch_size_is_refused_and_close_removes_the_hooks():
    model = linreg_proxy.make_model()
    with pytest.raises(ValueError, match="two batch sizes"):
        GradientNoiseScale(model, micro_batch=8, accumulation=1)
    gns = GradientNoiseScale(model, micro_batch=4, accumulation=2)
    gns.close()
    for _ in range(2):
        model(linreg_proxy.make_data("train")(4, torch.Generator().manual_seed(0))).backward()
    assert gns.step == 0 and not gns._pending


@pytest.mark.slow
def test_two_gloo_replicas_under_ddp_measure_what_one_process_accumulating_does(tmp_path):
    """DDP: each replica's micro-batch gradients are read before the all-reduce, `.grad` after
    it. Same global data order, so the same per-step numbers up to reduction order."""
    from ddp_launch import gloo_env, two_replicas_beside

    two = tmp_path / "two.json"
    # the one process runs here while the launcher starts the replicas
    one = two_replicas_beside([str(HERE / "gns_loops.py"), str(two), "--steps", "100"],
                              lambda: linreg_loop(None, steps=100), env=gloo_env(REPO), cwd=tmp_path)
    ddp = load_calibration(two)
    assert ddp.provenance.batch.world_size == 2 and ddp.provenance.batch.accumulation == 8
    assert one.provenance.batch.world_size == 1 and one.provenance.batch.accumulation == 16
    for key in ("grad_sq_small", "grad_sq_big", "grad_sq", "trace_sigma"):
        np.testing.assert_allclose(getattr(ddp.raw, key), getattr(one.raw, key), rtol=1e-4, err_msg=key)
    assert ddp.summary.ci_low <= B_TRUE <= ddp.summary.ci_high
    assert sorted(p.name for p in tmp_path.iterdir()) == ["two.json"]  # rank 0 wrote once


def test_budgetdsl_plan_reads_the_file(tmp_path):
    out = tmp_path / "cal.json"
    linreg_loop(out, steps=400, lr=0.003)
    cal = load_calibration(out)
    at = round((cal.fit.loss_min + cal.fit.loss_max) / 2, 3)
    plan = tmp_path / "p.yaml"
    plan.write_text(f"""name: from-a-training-loop
model: {{params: 1e6, layers: 2, d_model: 64, heads: 2, seq_len: 8}}
hardware: {{gpu: H100-SXM5-80GB, gpus: 1, mfu: 0.3}}
target: {{min_tokens: 1e7}}
noise: {{calibration: cal.json, at_loss: {at}}}
""")
    done = subprocess.run([sys.executable, "-m", "budgetdsl", "plan", "--format", "json", str(plan)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    sol = json.loads(done.stdout)
    assert sol["frontier"]["b_crit_tokens"] == pytest.approx(cal.b_crit_tokens_at(at)[0])
    assert "cal.json" in sol["frontier"]["b_crit_source"] and sol["warnings"] == []
