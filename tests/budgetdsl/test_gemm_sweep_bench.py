"""bench/gemm_sweep.py, the device machine's GEMM-shape measurement (issue 24 item 6): the shapes it
times are the layers' own under tensor parallelism, and its CSV has every column a fit needs. Run
on CPU here with tiny counts (its figures mean nothing on a CPU; the path is the GPU's)."""

import csv
import importlib.util
import pathlib
import sys

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("gemm_sweep", REPO / "bench" / "gemm_sweep.py")
gs = importlib.util.module_from_spec(_spec)
sys.modules.setdefault("gemm_sweep", gs)  # its dataclass looks its module up
_spec.loader.exec_module(gs)


def test_the_shapes_are_a_layers_matmuls_sharded_as_megatron_shards_them():
    """Llama 3 8B at t = 8, 8,192 tokens: q, k, v and the gate/up projections split their outputs
    (4096/8, 1024/8, 14336/8 columns), the output and down projections their inputs; each GEMM
    three ways (forward, input gradient, weight gradient) with the same FLOPs."""
    gemms = gs.layer_gemms("llama3-8b", gs.MODELS["llama3-8b"], 8, 8192)
    fwd = [(g.m, g.n, g.k) for g in gemms if g.kind == "fwd"]
    assert fwd == [(8192, 512, 4096), (8192, 128, 4096), (8192, 128, 4096), (8192, 4096, 512),
                   (8192, 1792, 4096), (8192, 1792, 4096), (8192, 4096, 1792)]
    for i in range(7):
        trio = [g for g in gemms if g.matmul == i]
        assert [g.kind for g in trio] == ["fwd", "dgrad", "wgrad"]
        assert len({g.m * g.n * g.k for g in trio}) == 1
    gelu = gs.layer_gemms("gpt3-175b", gs.MODELS["gpt3-175b"], 1, 2048)
    assert [(g.n, g.k) for g in gelu if g.kind == "fwd"][-2:] == [(4 * 12288, 12288), (12288, 4 * 12288)]


def test_a_cpu_smoke_run_writes_the_csv(tmp_path):
    pytest.importorskip("torch")
    out = tmp_path / "gemm.csv"
    assert gs.main(["--device", "cpu", "--quick", "--repeats", "1", "--peak", "1e12", "--out", str(out)]) == 0
    rows = list(csv.DictReader(out.open()))
    model, tps, tokens = gs.QUICK
    assert len(rows) == len(gs.sweep_shapes({model: gs.MODELS[model]}, tps, tokens)) > 0
    for r in rows:
        flops = 2.0 * int(r["m"]) * int(r["n"]) * int(r["k"])
        assert float(r["seconds"]) > 0 and float(r["tflops"]) == pytest.approx(flops / float(r["seconds"]) / 1e12,
                                                                                rel=1e-3)
        assert float(r["efficiency"]) == pytest.approx(float(r["tflops"]) * 1e12 / 1e12, rel=1e-3)
        assert r["curve"] == ""  # --peak names no part, so no curve
    # with a preset: the curve's share of peak beside the measured one, for the fit's check on a GPU
    assert gs.main(["--device", "cpu", "--quick", "--repeats", "1", "--gpu", "H100-SXM5-80GB", "--out", str(out)]) == 0
    from budgetdsl.hardware.gemm_curves import HOPPER_GEMM

    for r in csv.DictReader(out.open()):
        m, n, k = int(r["m"]), int(r["n"]), int(r["k"])
        assert float(r["curve"]) == pytest.approx(HOPPER_GEMM.relative(m, n, k) / HOPPER_GEMM.c_inf, rel=1e-3)
    assert gs.main(["--device", "cpu", "--quick", "--gpu", "no-such-gpu", "--out", str(out)]) == 2
