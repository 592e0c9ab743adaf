"""The GEMM-shape curves (budgetdsl.hardware.gemm_curves) and how the throughput model uses them
(budgetdsl.cost.gemm_shape): fitted to OpenXLA's measured tables, the closed form's split into a
per-row and a per-micro-batch part exact, Megatron's sharding conserving the FLOPs, and parts with
no table priced as before."""

from __future__ import annotations

import math
import pathlib
import sys

import pytest

from budgetdsl.cost.flops import layer_matmuls
from budgetdsl.cost.gemm_shape import gemm_time, sharded_matmuls
from budgetdsl.cost.stacks import STACKS
from budgetdsl.cost.throughput import Device, Layout, Shape, step_time
from budgetdsl.hardware.gemm_curves import BLACKWELL_GEMM, HOPPER_GEMM
from budgetdsl.hardware.gpus import PRESETS

REPO = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench"))
import gemm_fit  # noqa: E402

CURVES = {"sm_90": HOPPER_GEMM, "sm_100_B200": BLACKWELL_GEMM}


def test_the_curves_are_the_fit_of_the_vendored_tables():
    """gemm_curves' constants are what bench/gemm_fit.py fits (freshness: a new table or a changed
    fit must change the code too)."""
    for chip, coef in gemm_fit.fits().items():
        curve = CURVES[chip]
        got = (curve.c_inf, curve.c_k, curve.c_area, curve.c_launch)
        assert got == pytest.approx(coef, rel=2e-4), chip


@pytest.mark.parametrize("chip,rms_at_most,worst_at_most", [("sm_90", 0.05, 0.11), ("sm_100_B200", 0.05, 0.22)])
def test_the_curve_reproduces_the_measured_gemms_of_training_shapes(chip, rms_at_most, worst_at_most):
    """On the tables' training-sized shapes (M ≥ 2,048, N and K ≥ 512) the curve's η is within a
    few per cent of the measured FLOP/s: the H100's rms 4.1 %, worst 10 %."""
    preset = gemm_fit.CHIPS[chip][1]
    rows = gemm_fit.read_table()[chip]
    assert len(rows) == 375
    curve = CURVES[chip]
    peak = PRESETS[preset].peak_flops
    errors = [math.log(curve.relative(m, n, k) / curve.c_inf / (flops / peak)) for m, n, k, flops in rows
              if m >= 2048 and n >= 512 and k >= 512]
    assert len(errors) == 144
    assert math.sqrt(sum(e * e for e in errors) / len(errors)) <= rms_at_most
    assert max(abs(e) for e in errors) <= worst_at_most


def test_narrow_and_short_gemms_reach_less_and_large_ones_approach_the_limit():
    rel = HOPPER_GEMM.relative
    assert rel(1e9, 1e9, 1e9) == pytest.approx(1.0, abs=1e-6)
    assert rel(16384, 4096, 512) < rel(16384, 4096, 4096) < rel(16384, 4096, 16384) < 1.0  # K
    assert rel(2048, 512, 4096) < rel(16384, 512, 4096)  # too few output tiles
    # the measured table: at M = 16,384 K = 512 reaches 0.63 of peak, K = 4,096 0.80 (within the fit's worst 10 %)
    assert rel(16384, 4096, 512) / rel(16384, 4096, 4096) == pytest.approx(0.63 / 0.80, rel=0.1)


def _direct_seconds(curve, matmuls, rows, rate):
    """Each GEMM of a micro-batch of `rows` rows timed by the curve itself (forward, input and
    weight gradients), over the large-GEMM `rate`."""
    total = 0.0
    for i, o in matmuls:
        for m, n, k in ((rows, o, i), (rows, i, o), (i, o, rows)):
            total += 2.0 * m * n * k / (rate * curve.relative(m, n, k))
    return total


@pytest.mark.parametrize("t,fused", [(1, True), (8, False), (4, True)])
def test_per_row_and_fixed_parts_add_up_to_the_curve_at_every_micro_batch(t, fused):
    """The closed form T(b) = b·K + fixed (linear in the micro-batch) holds exactly: the per-row
    factor and the fixed part reproduce the curve's own time of every GEMM at 1, 3 and 12
    sequences."""
    mats = sharded_matmuls(4096, 32, 8, 14336, "swiglu", t, fused)
    g = gemm_time(HOPPER_GEMM, mats)
    rate, s = 500e12, 8192
    flops_per_row = 6.0 * sum(i * o for i, o in mats)
    for b in (1, 3, 12):
        closed = (b * s * flops_per_row * g.per_row + g.fixed) / rate
        assert closed == pytest.approx(_direct_seconds(HOPPER_GEMM, mats, b * s, rate), rel=1e-12)


def test_megatron_sharding_conserves_the_flops_and_fuses_as_the_stack_runs():
    full = layer_matmuls(4096, 32, 8, 14336, "swiglu")
    work = sum(i * o for i, o in full)
    for t in (1, 2, 8):
        for fused in (True, False):
            assert sum(i * o for i, o in sharded_matmuls(4096, 32, 8, 14336, "swiglu", t, fused)) == \
                pytest.approx(work / t)
    # Megatron-Core: one QKV GEMM of d + 2·d_kv and one gate+up GEMM of 2·ffn, each split over t
    assert sharded_matmuls(4096, 32, 8, 14336, "swiglu", 8, True) == (
        (4096.0, 6144.0 / 8), (4096.0 / 8, 4096.0), (4096.0, 28672.0 / 8), (14336.0 / 8, 4096.0))
    assert STACKS["megatron-core"].fused and not STACKS["fsdp2"].fused and not STACKS["fsdp2-compile"].fused
    # torchtitan's separate key projection is d_kv/t = 128 wide at t 8, and slower per FLOP
    apart = gemm_time(HOPPER_GEMM, sharded_matmuls(4096, 32, 8, 14336, "swiglu", 8, False))
    fused = gemm_time(HOPPER_GEMM, sharded_matmuls(4096, 32, 8, 14336, "swiglu", 8, True))
    assert apart.per_row > fused.per_row > gemm_time(HOPPER_GEMM, sharded_matmuls(4096, 32, 8, 14336, "swiglu",
                                                                                     1, True)).per_row > 1.0


def test_latent_attention_keeps_its_down_projections_whole():
    from budgetdsl.plan.model import LatentAttention

    mla = LatentAttention(kv_lora_rank=512, q_lora_rank=1536, qk_nope_head_dim=128, qk_rope_head_dim=64,
                          v_head_dim=128)
    mats = sharded_matmuls(7168, 128, None, 18432, "swiglu", 4, True, mla)
    assert (7168.0, 1536.0) in mats and (7168.0, 512.0 + 64) in mats  # replicated on every TP rank
    assert (1536.0, 128 * 192 / 4) in mats  # the query up-projection split by heads


def _shape():
    return Shape(8.0e9, 32, 4096, 8192, 6 * 8.0e9 + 12 * 32 * 4096 * 8192, heads=32, vocab=128256, kv_heads=8,
                 ffn_hidden=14336, mlp="swiglu", tied_embeddings=False)


def test_a_part_without_a_table_is_priced_as_before_and_one_with_a_table_slower_on_narrow_shards():
    """No curve: every step exactly as a curve of ideal GEMMs (c_k = c_a = c_t = 0) prices it, the
    model's pricing before GEMM shapes; the H100 curve slows the compute only, more on TP 8 shards."""
    from budgetdsl.hardware.gemm_curves import GemmCurve

    shape = _shape()
    plain = Device(312e12, 2.0e12, 0.652, 300e9, 25e9)
    ideal = Device(312e12, 2.0e12, 0.652, 300e9, 25e9, gemm=GemmCurve(1.0, 0.0, 0.0, 0.0, "ideal"))
    hopper = Device(312e12, 2.0e12, 0.652, 300e9, 25e9, gemm=HOPPER_GEMM)
    for t, stack in ((1, "megatron-core"), (8, "fsdp2"), (4, "default")):
        for recompute in ("none", "selective", "full"):
            lay = Layout(8 * t, t, 1, recompute=recompute, stack=STACKS[stack])
            a, i, b = (step_time(shape, dev, lay, 2, 16) for dev in (plain, ideal, hopper))
            assert i == a
            assert b.compute > a.compute and b.tp_comm == a.tp_comm and b.optimizer == a.optimizer
            assert (b.recompute > a.recompute) == (recompute == "full" or (recompute, stack) == ("selective", "fsdp2"))
    slower = [step_time(shape, hopper, Layout(8 * t, t, 1, stack=STACKS["fsdp2"]), 2, 16).compute
              / step_time(shape, plain, Layout(8 * t, t, 1, stack=STACKS["fsdp2"]), 2, 16).compute for t in (1, 8)]
    assert slower[1] > slower[0] > 1.0
