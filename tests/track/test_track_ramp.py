"""`budgetdsl track --replan`'s batch ramp (budgetdsl.track.ramp): the fit against a closed form,
each refusal, and a real proxy run that logs its B_simple (conftest.py's `gns_run`)."""

import json
import math
import random

import pytest

from budgetdsl.cli import main
from budgetdsl.plan.loader import load_plan
from budgetdsl.track.ramp import NoRamp, fit
from budgetdsl.track.record import Record
from budgetdsl.track.run import Timeline

BATCH = 256  # tokens per step, as the proxy's
NOW, END = 100, 200  # read at step 100 of a 200-step run
A, ALPHA_D = 19.0, 0.2  # L(E) = A·E^(−α_D): 3.9 nats at step 10 down to 2.5 at step 100
L_REF, B_REF = 4.0, 1000.0  # B_noise at L = 4 nats, in tokens


def rows(k=2.0, sigma=0.1, noise_steps=range(10, NOW + 1, 10), flat=False, seed=0, loss_noise=0.01,
         exact=False):
    """(step, time, tokens, loss, b_noise, low, high) of a run whose B_noise = B*·L^(−k) (Kaplan et al.
    2020 eq. 1.4) scattered by σ in ln B, with 95 % intervals of ±1.96σ; L = A·E^(−α_D)."""
    rng = random.Random(seed)
    b_star = B_REF * L_REF ** k
    out = []
    for step in range(1, NOW + 1):
        tokens = step * BATCH
        loss = A * tokens ** -ALPHA_D
        b = lo = hi = None
        if step in noise_steps:
            b = (B_REF if flat else b_star * loss ** -k) * (1 if exact else math.exp(rng.gauss(0, sigma)))
            lo, hi = b * math.exp(-1.96 * sigma), b * math.exp(1.96 * sigma)
        out.append((step, 1000.0 + 0.05 * step, tokens, loss * math.exp(rng.gauss(0, loss_noise)), b, lo, hi))
    return out


def timeline(data) -> Timeline:
    line = Timeline(file="run.csv")
    for step, time, tokens, loss, b, lo, hi in data:
        line.add(Record(step=step, where=f"line {step}", time=time, tokens=tokens, loss=loss, b_noise=b,
                        b_noise_low=lo, b_noise_high=hi), "run.csv")
    return line


def growth_of(data):
    return fit(timeline(data), NOW * BATCH, END * BATCH)


def test_the_fit_recovers_a_known_law_within_its_interval():
    k = 2.0
    g = growth_of(rows(k=k))
    assert g.k_low < k < g.k_high and g.k_high - g.k_low < 1.5
    truth = ALPHA_D * k  # B_noise ∝ E^(α_D·k)
    assert g.exponent_low < truth < g.exponent_high
    assert g.alpha_d == pytest.approx(ALPHA_D, abs=0.03)
    assert g.b_star == pytest.approx(B_REF * L_REF ** k, rel=0.5)  # B* sits far out, at L = 1
    b_now = B_REF * L_REF ** k * (A * (NOW * BATCH) ** -ALPHA_D) ** -k
    assert g.b_now == pytest.approx(b_now, rel=0.1)
    assert g.growth() == pytest.approx(2.0 ** truth, rel=0.05) and g.points == 10


def test_the_95_percent_interval_covers_the_truth_about_95_percent_of_the_time():
    fits = [growth_of(rows(k=3.0, seed=seed)) for seed in range(40)]
    covered = sum(g.k_low < 3.0 < g.k_high for g in fits)
    assert 34 <= covered <= 40, covered  # binomial(40, 0.95): 34 or more with probability 0.99
    assert sum(g.k_high - g.k_low for g in fits) / len(fits) < 1.5  # and not by being wide


def test_a_flat_b_noise_is_refused():
    """The negative control: B_noise that does not grow as the loss falls carries no ramp."""
    with pytest.raises(NoRamp, match="not distinguishable from zero"):
        growth_of(rows(flat=True))


@pytest.mark.parametrize("data, message", [
    (rows(noise_steps=range(60, NOW + 1, 10)), "5 B_noise points with an interval .*; the fit needs 6"),
    (rows(noise_steps=range(80, NOW + 1, 4)), "more than 2 × the measured span"),
    (rows(k=14.0, sigma=0.6), "an interval wider than ×2"),
    (rows(k=0.5, sigma=0.01), "less than ×1.2: no ramp to follow"),
])
def test_each_refusal_says_why(data, message):
    with pytest.raises(NoRamp, match=message):
        growth_of(data)


def test_k_must_be_above_zero_at_95_percent_with_students_t():
    """Six exact points whose intervals put k 2.3 standard errors from 0: past the normal 1.96, short
    of Student's t with 4 degrees of freedom (2.78)."""
    steps = range(50, NOW + 1, 10)
    x = [math.log(A * (s * BATCH) ** -ALPHA_D) for s in steps]
    spread = math.sqrt(sum((v - sum(x) / len(x)) ** 2 for v in x))
    sigma = 2.0 * spread / 2.3  # se(k) = σ/√Σ(x − x̄)², so k/se = 2.3
    with pytest.raises(NoRamp, match=r"is not > 0 at 95 %"):
        growth_of(rows(k=2.0, sigma=sigma, noise_steps=range(50, NOW + 1, 10), exact=True, loss_noise=0))


def _plan(tmp_path, name="proxy", micro=1) -> str:
    path = tmp_path / f"{name}.yaml"
    path.write_text(
        f"name: {name}\n"
        "model: {params: 100k, layers: 2, d_model: 32, seq_len: 32, flops_per_token: 6e5}\n"
        "hardware: {peak_flops: 1e12, memory_per_device: 8 GiB, gpus: 1, mfu: 0.01}\n"
        f"target: {{tokens: {END * BATCH}, at_batch: {BATCH}}}\n"
        "noise: {b_crit: 512}\n"
        f"run: {{batch: {BATCH}, micro_batch: {micro}}}\n")
    return str(path)


@pytest.mark.parametrize("noise_steps, since, reason, left", [
    (range(60, NOW + 1, 10), [], "5 B_noise points with an interval (a gns log: b_noise, b_noise_low, "
     "b_noise_high); the fit needs 6", END - NOW),
    (range(10, NOW + 1, 10), ["--since-step", "20"], "--since-step counts the tokens from step N, and "
     "B_noise ∝ E^(α_D·k) needs the run's own tokens: replan from the whole run's logs", END - NOW + 20),
])
def test_a_refused_ramp_leaves_the_rest_of_the_replan(tmp_path, capsys, noise_steps, since, reason, left):
    log = tmp_path / "run.csv"
    lines = ["step,time,tokens,loss,b_noise,b_noise_low,b_noise_high"]
    lines += [",".join("" if v is None else repr(v) for v in r) for r in rows(noise_steps=noise_steps)]
    log.write_text("\n".join(lines) + "\n")
    plan = _plan(tmp_path)
    code = main(["track", plan, str(log), "--replan", "--format", "json", *since])
    err = capsys.readouterr().err
    assert code == 0, err
    refusals = [line for line in err.splitlines() if line.startswith("replan: no batch ramp: ")]
    assert refusals == [f"replan: no batch ramp: {reason}"]
    written = load_plan(plan)
    assert written.target.tokens == left * BATCH and written.run.batch_schedule is None


def test_a_real_run_gets_a_ramp_that_plans_and_diffs(gns_run, tmp_path, capsys):
    """The proxy trained on Markov text logs B_simple every 10 steps; read at step 120 of 200, the
    replan fits the growth of B_noise, writes a ramp for the 80 steps left, and the plan prices it."""
    plan = _plan(tmp_path)
    before = tmp_path / "before.yaml"
    before.write_text(open(plan).read())
    code = main(["track", plan, str(gns_run["tb"]), str(gns_run["gns"]), "--until-step", "120", "--replan",
                 "--format", "json"])
    err = capsys.readouterr().err
    assert code == 0, err
    fitted = next(line for line in err.splitlines() if line.startswith("replan: batch ramp: "))
    k = float(fitted.split("k = ")[1].split(" ")[0])
    growth = float(fitted.split("grows ×")[1].split(" ")[0])
    assert k > 0 and growth >= 1.2, fitted
    replanned = load_plan(plan)
    stages = replanned.run.batch_schedule
    assert isinstance(stages, list) and len(stages) >= 2 and all(s.b_noise for s in stages)
    assert [s.batch for s in stages] == sorted(s.batch for s in stages) and stages[-1].batch > stages[0].batch
    assert stages[-1].b_noise / stages[0].b_noise == pytest.approx(growth, rel=0.35)  # stage means, not ends
    assert stages[0].b_noise < replanned.noise.b_crit < stages[-1].b_noise  # the progress-weighted mean
    code = main(["plan", plan, "--format", "json"])
    solved = json.loads(capsys.readouterr().out)
    assert code == 0 and solved["feasible"] and solved["ramp"] is not None
    ramp = solved["ramp"]
    assert ramp["tokens"] == pytest.approx((200 - 120) * BATCH, rel=0.15)
    for stage, written in zip(ramp["stages"], stages):
        assert stage["b_noise_tokens"] == pytest.approx(written.b_noise, rel=0.02)  # priced against it
        assert stage["batch_tokens"] == written.batch  # launchable as written
    code = main(["diff", str(before), plan])
    out = capsys.readouterr().out
    assert "run.batch_schedule.0" in out and "ramp saves steps" in out
    code = main(["diff", str(before), plan, "--format", "json"])
    metrics = {m["name"]: m for m in json.loads(capsys.readouterr().out)["plans"][0]["metrics"]}
    assert metrics["ramp_steps"]["old"] is None and metrics["ramp_steps"]["new"] == ramp["steps"]
    assert metrics["ramp_saves_steps"]["new"] == ramp["saves_steps"]


def test_a_refused_ramp_drops_an_auto_schedule_whose_calibration_the_measurement_replaces(tmp_path, capsys):
    """`batch_schedule: auto` follows noise.calibration; the measured B_noise replaces the calibration,
    so without a ramp of its own the rest runs at a fixed batch (the plan stays valid)."""
    from pathlib import Path

    calibration = Path(__file__).resolve().parents[1] / "fixtures" / "calibration" / "sweep-gpt-micro-stdlib.json"
    log = tmp_path / "run.csv"
    lines = ["step,time,tokens,loss,b_noise,b_noise_low,b_noise_high"]
    lines += [",".join("" if v is None else repr(v) for v in r) for r in rows(noise_steps=range(60, NOW + 1, 10))]
    log.write_text("\n".join(lines) + "\n")
    plan = tmp_path / "auto.yaml"
    plan.write_text(open(_plan(tmp_path)).read().replace(
        "noise: {b_crit: 512}", f"noise: {{calibration: {calibration}, at_loss: 2.4066, source: sweep}}").replace(
        "micro_batch: 1}", "micro_batch: 1, batch_schedule: auto}"))
    assert load_plan(plan).run.batch_schedule == "auto"
    code = main(["track", str(plan), str(log), "--replan", "--format", "json"])
    err = capsys.readouterr().err
    assert code == 0, err
    assert "replan: no batch ramp: " in err and "replan: run.batch_schedule = (removed)" in err
    written = load_plan(plan)
    assert written.run.batch_schedule is None and written.noise.calibration is None and written.noise.b_crit
