"""model.dropout (issue 24): with dropout p > 0 each layer stores two 1-byte dropout masks (2·s·d, in
the 10 that tensor parallelism keeps whole) and, where the attention scores are kept, a mask and the
dropout output beside the softmax output (5·a·s² bytes); at p = 0 none of them (Korthikanti et al.
2022 section 4.1; PyTorch's dropout returns its input at p = 0). Only zero against nonzero matters,
and the default (0.1, Megatron-LM's) keeps every plan's estimate as it was."""

import json
import pathlib

import pytest
from plan_rules import assert_refused_located
from solver_plans import make_plan

from budgetdsl.cost import memory as mem
from budgetdsl.cost.cost_model import build_cost_model, cost_model_key
from budgetdsl.cost.memory import activation_bytes_per_layer, layer_activation_split, stage_memory
from budgetdsl.cost.throughput import Layout, Shape, _activation_traffic_per_token

REPO = pathlib.Path(__file__).resolve().parents[2]
S, D, A = 4096, 4096, 32


def test_without_dropout_the_layer_keeps_8_and_scores_of_2():
    """The closed forms: s·d·(8 + split + 2·a·s/d) with sequence parallelism (÷ t), s·d·(8 + split/t
    + 2·a·s/(d·t)) without; the split part is the shape's as with dropout."""
    assert activation_bytes_per_layer(S, D, A, "none", False, dropout=False) == S * D * (32 + 2 * A * S / D)
    assert activation_bytes_per_layer(S, D, A, "none", True, dropout=False) == 32 * S * D
    assert activation_bytes_per_layer(S, D, None, "selective", False, dropout=False) == 32 * S * D
    assert activation_bytes_per_layer(S, D, A, "full", False, dropout=False) == 2 * S * D
    for t, sp in ((8, False), (8, True), (1, False)):
        got = activation_bytes_per_layer(S, D, A, "none", False, t, sp, dropout=False)
        want = S * D * (8 + 24 / t + 2 * A * S / (D * t)) if not sp and t > 1 else S * D * (32 + 2 * A * S / D) / t
        assert got == pytest.approx(want, rel=1e-12)
    # grouped-query attention and SwiGLU: the split part follows the shape, the 8 stays
    kv, ffn = 8, 14336
    split = layer_activation_split(D, A, kv, ffn, "swiglu")
    assert split == pytest.approx((4 * D + 4 * D * kv / A + 6 * ffn) / D)
    got = activation_bytes_per_layer(S, D, A, "none", False, 4, False, kv_heads=kv, ffn_hidden=ffn, mlp="swiglu",
                                     dropout=False)
    assert got == pytest.approx(S * D * (8 + split / 4 + 2 * A * S / (D * 4)), rel=1e-12)
    # with dropout: the 10 and the 5 of Korthikanti et al. Table 2, as before
    assert activation_bytes_per_layer(S, D, A, "none", False) == S * D * (34 + 5 * A * S / D)
    assert mem.layer_activation_whole(D) - mem.layer_activation_whole(D, None, False) == mem.DROPOUT_MASKS == 2
    assert (mem.attention_score_bytes(), mem.attention_score_bytes(False)) == (5, 2)


def test_fp8_and_dropout_each_take_their_own_bytes():
    both = activation_bytes_per_layer(S, D, A, "none", True, 1, True, fp8=True, dropout=False)
    assert both == pytest.approx(S * D * (34 - 2 - mem.FP8_SAVED_WHOLE - mem.fp8_saved_split(D)), rel=1e-12)


def test_a_plan_without_dropout_stores_no_masks_on_any_stage():
    """Zero against nonzero only: 0.5 is 0.1 is the default; 0 takes 2·s·d a layer (and, with the
    scores kept, 3·a·s²) off every layer a stage holds, in flight as the 1F1B schedule keeps them."""
    hw = {"gpus": 1024, "tensor_parallel": 2, "pipeline_parallel": 4, "sequence_parallel": True}
    default = build_cost_model(make_plan(hardware=hw), 1024)
    assert make_plan().model.dropout == 0.1
    half = build_cost_model(make_plan(model={"dropout": 0.5}, hardware=hw), 1024)
    none = build_cost_model(make_plan(model={"dropout": 0}, hardware=hw), 1024)
    assert half.stages == default.stages
    # 8 layers on the first stage, 4 micro-batches in flight, over t = 2
    assert default.stages[0].activations_per_sequence == pytest.approx(34 * S * D * 8 * 4 / 2, rel=1e-12)
    assert none.stages[0].activations_per_sequence == pytest.approx(32 * S * D * 8 * 4 / 2, rel=1e-12)
    scores = {**hw, "flash_attention": False}
    kept = build_cost_model(make_plan(model={"dropout": 0}, hardware=scores), 1024)
    assert kept.stages[0].activations_per_sequence == pytest.approx(
        S * D * (32 + 2 * A * S / D) * 8 * 4 / 2, rel=1e-12)
    detail = kept.coefficients["activation_bytes_per_sequence"].detail
    assert "s·d·(32 + 2·a·s/d)" in detail and "model.dropout 0" in detail
    assert "model.dropout" not in default.coefficients["activation_bytes_per_sequence"].detail


def test_stage_memory_passes_it_to_the_recomputed_layer_too():
    shape = dict(params=6.74e9, seq_len=S, layers=32, d_model=D, heads=A, vocab=32000, tensor_parallel=1,
                 pipeline_parallel=1, data_parallel=8, zero=1, recompute="full", flash_attention=False,
                 sequence_parallel=False)
    (masks,) = stage_memory(**shape)
    (none,) = stage_memory(**shape, dropout=False)
    # full recomputation keeps 2·s·d a layer either way; the layer being recomputed holds its full set
    assert masks.activations_per_sequence - none.activations_per_sequence == pytest.approx(
        S * D * (2 + 3 * A * S / D), rel=1e-12)


def test_the_memory_bound_kernels_stream_what_is_stored():
    base = Shape(6.74e9, 32, D, S, 6 * 6.74e9, A, 32000)
    lay = Layout(8, 1, 1, 1, 1, "none", False, False, 4.0)
    off = Shape(6.74e9, 32, D, S, 6 * 6.74e9, A, 32000, dropout=False)
    assert _activation_traffic_per_token(base, lay) - _activation_traffic_per_token(off, lay) == pytest.approx(
        2 * D + 3 * A * S, rel=1e-12)


def test_the_cost_model_key_tells_dropout_from_none():
    assert cost_model_key(make_plan(model={"dropout": 0})) != cost_model_key(make_plan())


@pytest.mark.parametrize("value, message", [
    ("1", "error[out-of-range]: must be less than 1, got 1"),
    ("-0.1", "error[out-of-range]: must be at least 0, got -0.1"),
])
def test_a_probability_outside_0_1_is_a_located_error(tmp_path, capsys, value, message):
    model = f"model: {{params: 7B, layers: 32, d_model: 4096, heads: 32, dropout: {value}, seq_len: 4096}}"
    assert_refused_located(tmp_path, capsys, model, "hardware: {gpu: H100-SXM5-80GB, gpus: 64}",
                           f"plan.yaml:2:68: {message}", "")


def test_the_schema_states_the_range_and_the_default():
    schema = json.loads((REPO / "budgetdsl.schema.json").read_text())
    field = schema["$defs"]["ModelShape"]["properties"]["dropout"]
    number = field["anyOf"][0]
    assert number == {"type": "number", "minimum": 0, "exclusiveMaximum": 1}
    assert field["default"] == 0.1 and "zero against nonzero" in field["description"]
