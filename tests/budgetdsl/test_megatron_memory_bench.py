"""bench/megatron_memory.py's own pieces, without Megatron-Bridge: the row → config mapping its
memory functions read, the applicability gate of their activation formula, the stand-ins for the
file's two package imports, budgetdsl's side of a row, and the table, against Megatron-Bridge's
weight formula re-derived here by hand (18 bytes a parameter, the first stage's parameters from
the shape). Where megatron-bridge is installed, the hand derivation is checked against its file."""

from __future__ import annotations

import sys
import types
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench"))

import megatron_memory as mm  # noqa: E402
from published_runs import TABLE1_ALL, load_rows  # noqa: E402

SILU, GELU = object(), object()
FUNCTIONAL = types.SimpleNamespace(silu=SILU, gelu=GELU)  # stands for torch.nn.functional


def _row(name: str) -> dict:
    return next(r for r in load_rows()["runs"] + TABLE1_ALL if r["name"] == name)


def _layout(**kw) -> mm.Layout:
    base = dict(tensor_parallel=1, pipeline_parallel=1, virtual_stages=1, context_parallel=1, data_parallel=32,
                zero=0, recompute="full", recompute_layers=None, sequence_parallel=False, micro_batch=16,
                micro_batches=1, fp8=False)
    return mm.Layout(**{**base, **kw})


def _hand_weights_and_optimizer(h: int, layers: int, vocab: int, t: int = 1) -> float:
    """Megatron-Bridge's rule for a multi-head GeLU model with F = 4h, tied embedding, p = 1, no
    distributed optimizer: per layer Q, K, V and the output projection 4h², the MLP 8h², two
    layer norms 4h (weight and bias); the final norm 2h; the embedding V·h once; ÷ t; 18 bytes each
    (bf16 weight 2, fp32 gradient 4, Adam's fp32 master, m and v 12)."""
    params = layers * (12 * h * h + 4 * h) + 2 * h + vocab * h
    return 18.0 * params / t


def test_mapping_grouped_query_swiglu_row():
    row = _row("NeMo 24.07 Llama 2 70B, 64 H100 FP8")
    lay = _layout(tensor_parallel=4, pipeline_parallel=4, virtual_stages=20, data_parallel=4, zero=1,
                  recompute="selective", sequence_parallel=True, micro_batch=1, micro_batches=32, fp8=True)
    cfg = mm.megatron_config(row["model"], lay, FUNCTIONAL)
    m = cfg.model
    assert (m.hidden_size, m.num_attention_heads, m.kv_channels, m.num_query_groups, m.ffn_hidden_size) == \
        (8192, 64, 128, 8, 28672)
    assert m.gated_linear_unit and m.activation_func is SILU
    assert (m.num_layers, m.vocab_size, m.seq_length) == (80, 32000, 4096)
    assert not m.share_embeddings_and_output_weights and not m.should_pad_vocab and m.num_moe_experts is None
    assert (m.tensor_model_parallel_size, m.pipeline_model_parallel_size, m.virtual_pipeline_model_parallel_size) == \
        (4, 4, 20)
    assert m.sequence_parallel and m.recompute_granularity == "selective"
    assert cfg.train.micro_batch_size == 1 and cfg.optimizer.use_distributed_optimizer and cfg.data_parallel_size == 4
    assert mm.activation_gate(lay) is None


def test_mapping_multi_head_gelu_row_and_gate():
    row = _row("Megatron 1.7B")
    lay = _layout()
    m = mm.megatron_config(row["model"], lay, FUNCTIONAL).model
    assert (m.hidden_size, m.num_attention_heads, m.kv_channels, m.num_query_groups, m.ffn_hidden_size) == \
        (2304, 24, 96, 24, 4 * 2304)
    assert not m.gated_linear_unit and m.activation_func is GELU
    assert m.share_embeddings_and_output_weights and m.virtual_pipeline_model_parallel_size is None
    assert m.recompute_granularity == "full"
    assert mm.activation_gate(lay) == "recompute full"
    assert mm.activation_gate(_layout(recompute="none")) == "recompute none"
    assert mm.activation_gate(_layout(recompute="selective", tensor_parallel=8)) == "no sequence parallelism"
    assert mm.activation_gate(_layout(recompute="selective")) is None  # t = 1: SP changes nothing


def test_stubs_stand_in_only_while_the_file_runs():
    before = {name: sys.modules.get(name) for name in mm.STUBBED}
    with mm._stubs():
        assert sys.modules[mm.STUBBED[0]].ConfigContainer is object
        with pytest.raises(RuntimeError):
            sys.modules[mm.STUBBED[1]].calculate_padded_vocab_size(32000, 128, 1)
    assert {name: sys.modules.get(name) for name in mm.STUBBED} == before


def test_budgetdsl_side_and_table_against_the_hand_rule():
    row = _row("Megatron 1.7B")
    lay, ours = mm.budgetdsl_side(row)
    assert (lay.tensor_parallel, lay.pipeline_parallel, lay.zero, lay.recompute) == (1, 1, 0, "full")
    # budgetdsl's own terms, one stage holding everything: 2 + 4 + 12 bytes a parameter of the row's N
    assert ours.weights == pytest.approx(2.0 * 1.7e9) and ours.grads == pytest.approx(4.0 * 1.7e9)
    assert ours.optimizer == pytest.approx(12.0 * 1.7e9) and ours.fp8_copies == 0.0
    theirs_static = _hand_weights_and_optimizer(2304, 24, 51200)
    assert theirs_static / 2**30 == pytest.approx(27.61, abs=0.005)  # the doc's figure
    line = mm.table_row(row["name"], lay, mm.Theirs(theirs_static, None, mm.activation_gate(lay)), ours)
    cells = [c.strip() for c in line.strip("|").split("|")]
    assert cells[0] == "Megatron 1.7B" and cells[1].startswith("t 1, p 1, dp 32, ZeRO-0, full")
    assert cells[2:5] == ["27.61", f"{ours.static / 2**30:.2f}", f"{ours.static / theirs_static:.2f}"]
    assert cells[5] == "— (recompute full)" and cells[7] == cells[8] == cells[10] == "—"
    assert len(mm.table([(row["name"], lay, mm.Theirs(theirs_static, 1.0, None), ours)])[1].split("|")) == \
        len(mm.HEADER.split("|"))


def test_fp8_copies_are_named_beside_the_ratio_without_them():
    lay = _layout(fp8=True)
    line = mm.table_row("r", lay, mm.Theirs(10 * 2**30, 2 * 2**30, None),
                        mm.Ours(4 * 2**30, 4 * 2**30, 4 * 2**30, 2**30, 2 * 2**30))
    cells = [c.strip() for c in line.strip("|").split("|")]
    assert cells[3] == "12.00 (2.00 FP8 copies)" and cells[4] == "1.20 (1.00)"
    assert cells[5:8] == ["2.00", "1.00", "0.50"] and cells[8:] == ["12.00", "13.00", "1.08"]


def test_the_hand_rule_is_megatron_bridges_where_installed():
    try:
        path, _ = mm.locate()
    except LookupError:
        pytest.skip("megatron-bridge is not installed (the bench also takes --module PATH)")
    pytest.importorskip("torch")
    module = mm.load(path)
    row = _row("Megatron 7.5B")
    cfg = mm.megatron_config(row["model"], _layout(tensor_parallel=4), module.F)
    assert module.compute_weight_and_optimizer_memory(cfg) == pytest.approx(
        _hand_weights_and_optimizer(4096, 36, 51200, t=4))
