"""Issue 25 item 3: a calibration measured at one context (tokens per example) read for a model of
another seq_len: B_crit × (s/c)^γ, its uncertainty widened by |ln(s/c)|·σ_γ, and a located warning
that shows the factor; nothing changes at equal context or where the file records no context.

The calibration is the committed real output of `budgetdsl calibrate` (gpt-micro at 64 tokens per
example, schema 1: written before the context field existed)."""

import json
import math
import pathlib

import pytest

from budgetdsl.plan.calibration_file import SCHEMA_VERSION, load_calibration
from budgetdsl.plan.loader import load_plan
from budgetdsl.plan.noise import noise_estimate
from budgetdsl.theory.context_scaling import (
    CONTEXT_GAMMA,
    CONTEXT_GAMMA_SIGMA,
    fit_context_exponent,
)

REPO = pathlib.Path(__file__).resolve().parents[2]
FIXTURE = REPO / "tests/fixtures/calibration/gpt-micro-stdlib.json"
EVIDENCE = REPO / "docs/noise-evidence.csv"
AT_LOSS = 2.5  # inside the fixture's fitted range (2.432-3.011)


def _calibration(tmp_path, edit=None) -> pathlib.Path:
    data = json.loads(FIXTURE.read_text())
    if edit:
        edit(data)
    path = tmp_path / "cal.json"
    path.write_text(json.dumps(data))
    return path


def _plan(tmp_path, cal, seq_len, extra="") -> pathlib.Path:
    plan = tmp_path / "p.yaml"
    plan.write_text(f"""name: context
model: {{params: 25M, layers: 6, d_model: 512, heads: 8, seq_len: {seq_len}}}
hardware: {{gpu: H100-SXM5-80GB, gpus: 8}}
target: {{min_tokens: 2B}}
noise:
  calibration: {cal}
  at_loss: {AT_LOSS}
{extra}""")
    return plan


def _codes(est) -> dict[str, object]:
    return {w.code: w for w in est.warnings}


def test_a_calibration_at_another_context_is_scaled_widened_and_warned_at_its_key(tmp_path):
    cal = _calibration(tmp_path)
    same = noise_estimate(load_plan(_plan(tmp_path, cal, 64)))
    longer = noise_estimate(load_plan(_plan(tmp_path, cal, 1024)))
    factor = 16.0**CONTEXT_GAMMA  # (1024/64)^γ
    assert longer.b_crit == pytest.approx(same.b_crit * factor, rel=1e-12)
    widening = math.log(16.0) * CONTEXT_GAMMA_SIGMA
    assert longer.uncertainty == pytest.approx(math.hypot(same.uncertainty, widening), rel=1e-12)
    assert longer.uncertainty > same.uncertainty
    w = _codes(longer)["calibration-context"]
    assert w.severity == "warning"
    assert w.location.file.endswith("p.yaml") and w.location.line == 6  # noise.calibration
    assert f"({1024}/{64})^γ = × {factor:.3g}" in w.message
    assert "64 tokens per example" in w.message and "seq_len is 1024" in w.message
    assert f"= {widening:.0%}" in w.message and "budgetdsl calibrate --plan" in w.hint
    assert f"× {factor:.3g} from its 64-token context to seq_len 1024" in longer.source


def test_a_shorter_model_context_scales_b_crit_down(tmp_path):
    cal = _calibration(tmp_path)
    same = noise_estimate(load_plan(_plan(tmp_path, cal, 64)))
    shorter = noise_estimate(load_plan(_plan(tmp_path, cal, 32)))
    assert shorter.b_crit == pytest.approx(same.b_crit * 0.5**CONTEXT_GAMMA, rel=1e-12)
    assert "calibration-context" in _codes(shorter)


def test_equal_context_changes_nothing_and_warns_nothing(tmp_path):
    cal = _calibration(tmp_path)
    est = noise_estimate(load_plan(_plan(tmp_path, cal, 64)))
    b, rel = load_calibration(cal).b_crit_tokens_at(AT_LOSS)
    assert (est.b_crit, est.uncertainty) == (b, rel)
    assert "calibration-context" not in _codes(est)
    assert "from its" not in est.source


def test_a_declared_uncertainty_is_kept_and_said_so(tmp_path):
    cal = _calibration(tmp_path)
    est = noise_estimate(load_plan(_plan(tmp_path, cal, 1024, "  uncertainty: 30%\n")))
    assert est.uncertainty == pytest.approx(0.3)
    assert "noise.uncertainty (30%) is kept" in _codes(est)["calibration-context"].message


def test_an_old_file_without_a_context_field_reads_its_tokens_per_example(tmp_path):
    """Schema 1 (the fixture) has no `context`: the tokens per example of its sequences stand for
    it. One whose examples are single tokens (a factory's default) has none: no correction."""
    old = load_calibration(FIXTURE)
    assert old.schema_version == 1 and old.provenance.batch.context is None and old.context == 64

    def single_token_examples(data):
        data["provenance"]["batch"]["tokens_per_example"] = 1

    cal = _calibration(tmp_path, single_token_examples)
    assert load_calibration(cal).context is None
    est_64 = noise_estimate(load_plan(_plan(tmp_path, cal, 64)))
    est_1024 = noise_estimate(load_plan(_plan(tmp_path, cal, 1024)))
    assert "calibration-context" not in _codes(est_1024)
    assert est_1024.b_crit == est_64.b_crit


def test_a_new_file_records_its_context_and_a_recorded_none_means_none(tmp_path):
    def version_2(data, context):
        data["schema_version"] = SCHEMA_VERSION
        data["provenance"]["batch"]["context"] = context

    recorded = _calibration(tmp_path, lambda d: version_2(d, 128))
    assert load_calibration(recorded).context == 128
    est = noise_estimate(load_plan(_plan(tmp_path, recorded, 128)))
    assert "calibration-context" not in _codes(est)
    unknown = _calibration(tmp_path, lambda d: version_2(d, None))
    assert load_calibration(unknown).context is None  # not derived from tokens_per_example in schema 2


def test_a_context_outside_the_physical_range_is_a_located_file_error(tmp_path):
    from budgetdsl.plan.calibration_file import CalibrationFileError

    def bad(data):
        data["schema_version"] = SCHEMA_VERSION
        data["provenance"]["batch"]["context"] = 0

    with pytest.raises(CalibrationFileError, match=r"provenance.batch.context is 0"):
        load_calibration(_calibration(tmp_path, bad))


def test_the_exponent_fit_against_closed_forms():
    """Two contexts per group: each slope is ln(B2/B1)/ln(c2/c1); the mean and the sample spread."""
    groups = [[(64, 1000.0, 0.1), (128, 2000.0, 0.1)], [(64, 1000.0, 0.1), (128, 1000.0, 0.1)]]
    fit = fit_context_exponent(groups)
    assert fit.per_pair == pytest.approx((1.0, 0.0))
    assert fit.gamma == pytest.approx(0.5) and fit.spread == pytest.approx(math.sqrt(0.5))
    one = fit_context_exponent(groups[:1])  # one group: its slope's error from the fits' errors
    assert one.sigma == pytest.approx(math.hypot(0.1, 0.1) / math.log(2))
    with pytest.raises(ValueError, match="two different contexts"):
        fit_context_exponent([[(64, 1000.0, 0.1)]])
