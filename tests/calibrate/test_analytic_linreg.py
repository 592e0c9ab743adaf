"""The estimator against a closed form: linear regression with Gaussian inputs (linreg_proxy.py),
measured through the same --model/--data factory path and calibration loop as the GPT proxy."""

import json
import math
import statistics
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

import linreg_proxy  # noqa: E402  (this folder is on sys.path under pytest's default import mode)
from budgetdsl.calibrate.config import RunConfig  # noqa: E402
from budgetdsl.calibrate.run import calibrate  # noqa: E402

LINREG = Path(__file__).with_name("linreg_proxy.py")

G2, TRACE, B_TRUE = linreg_proxy.truth()


def test_closed_form_is_what_the_proxy_implements():
    # d = 16, sigma = 1, |delta| = 1:  B = d + 1 + d sigma^2/|delta|^2 = 33
    assert (G2, TRACE, B_TRUE) == (1.0, 33.0, 33.0)


def test_cli_measures_the_closed_form_within_its_interval(cli, linreg_args, tmp_path):
    out = tmp_path / "linreg.json"
    argv = ["calibrate", *linreg_args, "--lr", "0", "--steps", "200", "--batch", "64",
            "--micro-batch", "4", "--eval-every", "50", "--seed", "3", "--quiet", "--out", str(out)]
    assert cli(argv) == 0
    cal = json.loads(out.read_text())
    s = cal["summary"]
    assert cal["provenance"]["estimator"]["ema_beta"] == 1.0  # --lr 0: the mean over all steps
    assert s["steps_measured"] == 200 and s["b_simple_tokens"] == s["b_simple"]  # 1 token/example
    assert s["ci_low"] <= B_TRUE <= s["ci_high"]
    assert abs(s["b_simple"] / B_TRUE - 1) < 0.2
    # The interval is informative, not vacuous: a few tens of percent wide at 200 steps.
    assert (s["ci_high"] - s["ci_low"]) / B_TRUE < 0.8
    # The raw per-step estimates of |G|^2 and tr(Sigma) average to the truth (lr 0: i.i.d. steps).
    for key, truth in (("grad_sq", G2), ("trace_sigma", TRACE)):
        xs = cal["raw"][key]
        se = statistics.stdev(xs) / math.sqrt(len(xs))
        assert abs(statistics.fmean(xs) - truth) < 4 * se, key


def _run(seed: int, out, steps: int = 40):
    cfg = RunConfig(model=f"{LINREG}:make_model", data=f"{LINREG}:make_data", lr=0.0, steps=steps,
                    batch=32, micro_batch=4, eval_every=steps, eval_batches=1, seed=seed,
                    checkpoint_every=0)
    return calibrate(cfg, out).calibration


def test_estimator_is_unbiased_over_seeds(tmp_path):
    seeds = range(24)
    cals = [_run(seed, tmp_path / f"s{seed}.json") for seed in seeds]
    for key, truth in (("grad_sq", G2), ("trace_sigma", TRACE)):
        per_seed = [statistics.fmean(getattr(c.raw, key)) for c in cals]
        mean, se = statistics.fmean(per_seed), statistics.stdev(per_seed) / math.sqrt(len(per_seed))
        assert abs(mean - truth) < 4 * se, (key, mean, se)
        assert se / truth < 0.05  # the test has the power to see a 20% bias
    # A biased estimator would fail the same check: |g_small|^2 * B_small alone estimates
    # tr(Sigma) + B_small |G|^2 (= 33 + 4 here), not tr(Sigma).
    naive = [statistics.fmean(x * 4 for x in c.raw.grad_sq_small) for c in cals]
    mean, se = statistics.fmean(naive), statistics.stdev(naive) / math.sqrt(len(naive))
    assert abs(mean - TRACE) > 4 * se
    # The intervals cover the truth at about their nominal 95% (binomial: >= 20 of 24 with
    # probability 0.99 when coverage really is 95%).
    covered = sum(c.summary.ci_low <= B_TRUE <= c.summary.ci_high for c in cals)
    assert covered >= 20, covered


def test_adams_preconditioned_noise_scale_is_recorded_beside_the_raw_one(cli, linreg_args, tmp_path):
    """With AdamW the file also holds B_simple of P⊙g, P = 1/(√v̂ + ε). At fixed weights v̂ tends to
    E[g_big,i²] = δ_i² + Σ_ii/B, so the closed form is Σ p_i² Σ_ii / Σ p_i² δ_i² (about 1,000 here:
    Adam scales up the coordinates where there is only noise), far above the raw 33; the
    interval holds it. SGD has no preconditioner: nothing is recorded."""
    out = tmp_path / "adam.json"
    argv = ["calibrate", *linreg_args, "--lr", "0", "--steps", "300", "--batch", "64", "--micro-batch", "4",
            "--eval-every", "50", "--seed", "3", "--quiet", "--out", str(out)]
    assert cli(argv) == 0
    cal = json.loads(out.read_text())
    s = cal["summary"]
    d, var = linreg_proxy.D, linreg_proxy.DELTA_NORM**2 + linreg_proxy.SIGMA**2
    delta2 = [linreg_proxy.DELTA_NORM**2] + [0.0] * (d - 1)
    sigma_ii = [var + x for x in delta2]
    p2 = [1.0 / (x + s_ii / 64) for x, s_ii in zip(delta2, sigma_ii)]
    truth = sum(p * s_ii for p, s_ii in zip(p2, sigma_ii)) / sum(p * x for p, x in zip(p2, delta2))
    assert 900 < truth < 1100
    assert s["steps_measured_pre"] == s["steps_measured"] - 1  # Adam has no v before its first step
    assert s["ci_low_pre"] is not None and s["ci_low_pre"] > 3 * s["ci_high"]
    assert s["ci_low_pre"] <= truth <= (s["ci_high_pre"] if s["ci_high_pre"] is not None else math.inf)
    assert cal["raw"]["grad_sq_small_pre"][0] is None and len(cal["raw"]["grad_sq_big_pre"]) == 300
    sgd = tmp_path / "sgd.json"
    assert cli([*argv[:-1], str(sgd), "--optimizer", "sgd"]) == 0
    plain = json.loads(sgd.read_text())
    assert plain["summary"]["steps_measured_pre"] == 0 and plain["raw"]["grad_sq_big_pre"] is None
