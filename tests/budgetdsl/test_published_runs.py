"""Published runs (tests/budgetdsl/published_runs.yaml, with sources and FLOP conventions): declared
MFU rows must land within 5 % of the published GPU-hours, predicted rows within 15 % of the
published per-GPU TFLOP/s in the source's convention, and every published layout must fit its
GPUs. No row is tuned: the A100's one fitted number is shared by all."""

import importlib.util
import pathlib
import sys

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("published_runs", REPO / "bench" / "published_runs.py")
pr = importlib.util.module_from_spec(_spec)
sys.modules.setdefault("published_runs", pr)
_spec.loader.exec_module(pr)
TABLE = pr.load_rows()


@pytest.mark.parametrize("row", TABLE["runs"], ids=[r["name"] for r in TABLE["runs"]])
def test_published_run(row):
    res = pr.evaluate(row)
    tol = TABLE["tolerance_declared"] if row["mode"] == "declared" else TABLE["tolerance_predicted"]
    assert abs(res.error) <= tol, f"{row['name']}: {res.value:,.1f} vs {res.published:,.1f} {res.unit}"
    assert res.fits, f"{row['name']}: the published layout does not fit its GPUs"
    assert res.solution.throughput.source == row["mode"]


def test_predicted_mode_is_not_the_declared_number():
    """A negative control: predicted rows do not just echo a declared MFU (there is none), and a
    worse layout predicts less (a pipeline bubble with fewer micro-batches)."""
    row = next(r for r in TABLE["runs"] if r["name"] == "Megatron 145.6B")
    assert "mfu" not in row["hardware"]
    small = dict(row, batch_sequences=row["batch_sequences"] // 8)
    assert pr.evaluate(small).value < pr.evaluate(row).value


def test_the_preset_efficiencies_are_the_fits_they_cite():
    """gpus.py's kernel efficiencies are what bench/published_runs.py --fit computes (freshness):
    A100 from Narayanan et al. 2021 Table 1, H100 from MosaicML's H100 benchmarks."""
    from budgetdsl.gpus import PRESETS

    assert PRESETS["A100-SXM4-80GB"].kernel_efficiency == pytest.approx(pr.fit_efficiency(), abs=0.002)
    assert PRESETS["H100-SXM5-80GB"].kernel_efficiency == pytest.approx(pr.fit_efficiency(pr.MOSAIC_H100), abs=0.002)
