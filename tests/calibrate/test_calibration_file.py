"""The calibration file schema and the planner-facing API (no torch needed)."""

import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from budgetdsl.plan.calibration_file import (
    CalibrationFile,
    CalibrationFileError,
    load_calibration,
    write_calibration,
)

REPO = Path(__file__).resolve().parents[2]
FIXTURE = REPO / "tests" / "fixtures" / "calibration" / "gpt-micro-stdlib.json"


@pytest.fixture
def cal() -> CalibrationFile:
    return load_calibration(FIXTURE)


def test_fixture_is_a_complete_calibration(cal):
    assert cal.schema_version == 1 and not cal.interrupted and cal.sweep is None
    assert cal.fit is not None and cal.fit.n_points >= 3 and cal.fit.alpha > 0
    assert len(cal.raw.step) == len(cal.raw.grad_sq) == len(cal.raw.trace_sigma) == cal.summary.steps_measured
    assert cal.provenance.model.name == "gpt-micro" and len(cal.provenance.data.sha256) == 64
    tpe = cal.provenance.batch.tokens_per_example
    assert cal.summary.b_simple_tokens == pytest.approx(cal.summary.b_simple * tpe)
    assert "gpt-micro" in cal.describe()


def test_b_crit_inside_the_measured_range_follows_the_fit(cal):
    f = cal.fit
    mid = (f.loss_min + f.loss_max) / 2
    b, rel = cal.b_crit_tokens_at(mid)
    assert b == pytest.approx(f.b_star_tokens / mid ** (1 / f.alpha))
    assert 0 < rel < 1
    # B_crit grows as the loss falls; the uncertainty grows away from the measured losses
    assert cal.b_crit_tokens_at(f.loss_min)[0] > cal.b_crit_tokens_at(f.loss_max)[0]
    far, far_rel = cal.b_crit_tokens_at(f.loss_min - 0.9 * (f.loss_max - f.loss_min), extrapolate=True)
    assert far > b and far_rel > rel
    # agrees with the measured trajectory where both exist (within the fit's uncertainty)
    last = cal.trajectory[-1]
    b_last, rel_last = cal.b_crit_tokens_at(last.loss_smoothed)
    assert abs(math.log(b_last / last.b_simple_tokens)) < 3 * rel_last


def test_far_outside_the_range_is_an_error_unless_extrapolating(cal):
    f = cal.fit
    measured = f"({f.loss_min:.4g} to {f.loss_max:.4g} nats, {f.n_points} points)"
    message = f"at_loss 1 is outside the losses this calibration measured {measured}"
    with pytest.raises(ValueError, match=re.escape(message)):
        cal.b_crit_tokens_at(1.0)
    with pytest.raises(ValueError, match="set `extrapolate: true`"):
        cal.b_crit_tokens_at(5.0)
    # extrapolation reaches one measured range's width past the range, and no further
    width = f.loss_max - f.loss_min
    assert cal.b_crit_tokens_at(f.loss_min - 0.9 * width, extrapolate=True)[0] > 0
    assert cal.b_crit_tokens_at(f.loss_max + 0.9 * width, extrapolate=True)[0] > 0
    for beyond in (f.loss_min - 1.1 * width, f.loss_max + 1.1 * width, 1.0):
        with pytest.raises(ValueError, match="beyond what `extrapolate: true` reads"):
            cal.b_crit_tokens_at(beyond, extrapolate=True)
    cal.b_crit_tokens_at(cal.fit.loss_min * 0.99)  # a small margin is not "far"
    for bad in (0.0, -1.0, math.nan, math.inf):
        with pytest.raises(ValueError, match="at_loss must be a positive number"):
            cal.b_crit_tokens_at(bad)


def test_without_a_fit_only_the_measured_loss_is_answered(cal):
    point = cal.model_copy(update={"fit": None, "fit_error": "loss hardly changed"})
    s = cal.summary
    b, rel = point.b_crit_tokens_at(s.loss)
    assert b == s.b_simple_tokens and 0 < rel < 1
    with pytest.raises(ValueError, match="no fit \\(loss hardly changed\\); it measured B_simple only at loss"):
        point.b_crit_tokens_at(s.loss * 1.5)


def test_load_errors_name_the_file(tmp_path):
    with pytest.raises(CalibrationFileError, match="no such calibration file .*budgetdsl calibrate --out"):
        load_calibration(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(CalibrationFileError, match=r"bad\.json:1:2: not JSON"):
        load_calibration(bad)
    data = json.loads(FIXTURE.read_text())
    bad.write_text(json.dumps({**data, "schema_version": 99}))
    with pytest.raises(CalibrationFileError, match="schema_version 99 is not supported"):
        load_calibration(bad)
    del data["summary"]["b_simple"]
    data["hardware"]["gpu_count"] = 3
    bad.write_text(json.dumps(data))
    with pytest.raises(CalibrationFileError, match=r"invalid calibration file at .*\(2 error\(s\)\)"):
        load_calibration(bad)
    assert issubclass(CalibrationFileError, ValueError)  # the planner catches ValueError


def test_write_is_atomic_and_round_trips(cal, tmp_path):
    out = tmp_path / "sub" / "c.json"
    write_calibration(out, cal)
    assert load_calibration(out) == cal
    assert [p.name for p in out.parent.iterdir()] == ["c.json"]
    assert oct(out.stat().st_mode & 0o777) == oct(0o666 & ~_umask())

    class Boom(Exception):
        pass

    broken = cal.model_copy()
    object.__setattr__(broken, "model_dump_json", lambda **kw: (_ for _ in ()).throw(Boom()))
    with pytest.raises(Boom):
        write_calibration(out, broken)
    assert load_calibration(out) == cal  # the previous file is intact, no temp file left
    assert [p.name for p in out.parent.iterdir()] == ["c.json"]


def _umask():
    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_planner_side_imports_neither_torch_nor_numpy():
    code = (
        "import sys, budgetdsl.plan.calibration_file as c; "
        f"c.load_calibration({str(FIXTURE)!r}).b_crit_tokens_at(2.5); "
        "print(sorted(m for m in ('torch', 'numpy') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO)
    assert out.stdout.strip() == "[]"
