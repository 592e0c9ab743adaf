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
