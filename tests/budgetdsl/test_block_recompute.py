"""Block recomputation (`hardware.recompute_layers`, Megatron-LM --recompute-method block, issue 24):
the first N layers of each stage (chunk) recomputed in full, the rest keeping their activations.
Memory falls and the recompute time rises with N, from no recomputation at N = 0 to full at
N = L_stage; errors located at the key; Megatron's flags; the search's fewest N that fits."""

from __future__ import annotations

from dataclasses import replace

import pytest

from budgetdsl.cost import memory as mem
from budgetdsl.cost.cost_model import Split, build_cost_model
from budgetdsl.exports import export
from budgetdsl.exports.spec import ExportError, launch_spec
from budgetdsl.plan.diagnostics import PlanError
from budgetdsl.plan.loader import load_plan
from budgetdsl.solve.solver import solve

PLAN = """\
name: block
model: {{params: 175e9, layers: 96, d_model: 12288, heads: 96, seq_len: 2048, vocab: 51200}}
hardware:
  gpu: A100-SXM4-80GB
  gpus: 1024
  tensor_parallel: 8
  pipeline_parallel: 16
  zero: 1
  recompute: {recompute}
  virtual_pipeline_stages: {v}
  recompute_layers: {n}
target: {{tokens: 300e9, at_batch: 3145728}}
noise: {{b_crit: 3145728}}
run: {{batch: 3145728}}
launch: {{image: nvcr.io/nvidia/pytorch:24.05-py3, command: [pretrain_gpt.py]}}
"""


def _load(tmp_path, n, recompute="full", v=1):
    path = tmp_path / "block.yaml"
    path.write_text(PLAN.format(n=n, recompute=recompute, v=v))
    return load_plan(path)


def _stages(recompute: str, n: int | None, layers: int = 8, v: int = 1, p: int = 1) -> list[mem.StageMemory]:
    out = mem.stage_memory(params=1.3e9, seq_len=2048, layers=layers, d_model=2048, heads=16, vocab=50304,
                           tensor_parallel=1, pipeline_parallel=p, data_parallel=1, zero=0, recompute=recompute,
                           flash_attention=True, sequence_parallel=False, virtual_stages=v, recompute_layers=n)
    assert out is not None
    return out


def test_memory_falls_with_n_from_none_to_full():
    """N = 0 is no recomputation, N = L_stage is full recomputation, and every further layer
    recomputed keeps less. The first recomputed layer also brings the one layer's full set held while
    it is recomputed (as full recomputation counts it): with one micro-batch in flight that outweighs
    the 32·s·d it saves by 2·s·d; with p in flight on a pipeline's first stage it does not."""
    acts = [_stages("full", n)[0].activations_per_sequence for n in range(9)]
    assert acts[0] == _stages("none", None)[0].activations_per_sequence
    assert acts[8] == _stages("full", None)[0].activations_per_sequence
    assert all(b < a for a, b in zip(acts[1:], acts[2:]))
    assert acts[1] - acts[0] == pytest.approx(2 * 2048.0 * 2048.0, rel=1e-12)
    first = [_stages("full", n, layers=16, p=2)[0].activations_per_sequence for n in range(9)]
    assert all(b < a for a, b in zip(first, first[1:]))


def test_a_hand_computed_stage():
    """s = 2048, d = 2048, flash attention, t = 1: a kept layer is 34·s·d bytes, a recomputed one 2·s·d,
    plus one layer's 34·s·d while it is recomputed: N = 3 of 8 is (3·2 + 5·34 + 34)·s·d."""
    sd = 2048.0 * 2048.0
    assert _stages("full", 3)[0].activations_per_sequence == pytest.approx((3 * 2 + 5 * 34 + 34) * sd, rel=1e-12)


def test_n_counts_per_chunk_with_interleaving():
    """Megatron recomputes the first N layers of every virtual chunk: N = 1 with v = 2 is two of a
    stage's layers, as N = 2 without interleaving (the in-flight factor aside, the same bytes)."""
    assert mem.recomputed_layers(8, "full", 1, 2) == 2
    assert mem.recomputed_layers(8, "full", 5, 2) == 8  # capped at the stage
    assert mem.recomputed_layers(8, "selective", 3) == 0
    assert mem.recomputed_layers(8, "full", None) == 8
    full = [s.activations_per_sequence for s in _stages("full", None, layers=16, v=2, p=2)]
    # stages of 8 layers in two chunks of 4: N = 4 recomputes every layer, N = 3 keeps two
    assert [s.activations_per_sequence for s in _stages("full", 4, layers=16, v=2, p=2)] == full
    assert all(a > f for a, f in zip((s.activations_per_sequence for s in _stages("full", 3, layers=16, v=2, p=2)),
                                     full))


def test_recompute_time_and_flops_are_n_over_the_stage_of_full(tmp_path):
    """The recomputed forward of N of a stage's 6 layers is N/6 of full recomputation's, in seconds
    and in hardware FLOPs; the model FLOPs do not change."""
    plan = _load(tmp_path, 6)
    split = Split(1, 8, 16, "full", True)
    full = build_cost_model(plan, 1024, split).breakdown(3145728, 192)
    for n in (0, 2, 5):
        block = build_cost_model(plan, 1024, replace(split, recompute_layers=n)).breakdown(3145728, 192)
        assert block is not None and full is not None
        assert block.recompute == pytest.approx(full.recompute * n / 6, rel=1e-9, abs=1e-12)
        assert block.hardware_flops - block.model_flops == pytest.approx(
            (full.hardware_flops - full.model_flops) * n / 6, rel=1e-9, abs=1.0)
        assert block.model_flops == full.model_flops


def test_omitted_is_every_layer(tmp_path):
    plan = _load(tmp_path, "null")
    assert plan.hardware.recompute_layers is None
    assert solve(plan).batch.recompute_layers is None


@pytest.mark.parametrize(("n", "recompute", "v", "message", "hint"), [
    (2, "selective", 1, r"recompute_layers \(2\) counts the layers .* recompute: selective",
     r"write recompute: full \(or auto\)"),
    (2, "none", 1, r"recompute: none", r"recompute: full"),
    (7, "full", 1, r"above the 6 layers of a pipeline stage's chunk", r"at most recompute_layers: 6"),
    (4, "full", 2, r"above the 3 layers of a pipeline stage's chunk", r"at most recompute_layers: 3"),
])
def test_a_wrong_recompute_layers_is_located_at_the_key(tmp_path, n, recompute, v, message, hint):
    with pytest.raises(PlanError) as err:
        _load(tmp_path, n, recompute, v)
    (diag,) = err.value.diagnostics
    assert (diag.location.line, diag.location.col) == (11, 3)
    assert diag.location.file.endswith("block.yaml")
    assert __import__("re").search(message, diag.message), diag.message
    assert __import__("re").search(hint, diag.hint or ""), diag.hint


def test_megatron_writes_the_block_method_and_launchers_the_variable(tmp_path):
    plan = _load(tmp_path, 2)
    sol = solve(plan)
    assert sol.batch.recompute_layers == 2
    spec = launch_spec(plan, sol)
    text = export(spec, "megatron")
    assert "--recompute-granularity full" in text and "--recompute-method block" in text
    assert "--recompute-num-layers 2" in text and "uniform" not in text
    assert "BUDGETDSL_RECOMPUTE_LAYERS=2" in export(spec, "slurm")
    none = export(replace(spec, recompute_layers=0), "megatron")  # N = 0: nothing recomputed
    assert "--recompute-granularity" not in none and "--recompute-method" not in none
    every = export(replace(spec, recompute_layers=None), "megatron")
    assert "--recompute-method uniform" in every


@pytest.mark.parametrize("fmt", ["deepspeed", "hf"])
def test_formats_without_block_recomputation_refuse(tmp_path, fmt):
    spec = replace(launch_spec(_load(tmp_path, 2), solve(_load(tmp_path, 2))), tensor_parallel=1,
                   pipeline_parallel=1, data_parallel=1024, nodes=128)
    with pytest.raises(ExportError, match=r"first 2 layers of each pipeline stage .* --recompute-method block"):
        export(spec, fmt)


def test_the_report_names_block_recomputation(tmp_path):
    from budgetdsl.report.text import render_text

    sol = solve(_load(tmp_path, 2))
    assert "recompute full (block, 2 layers per stage)" in render_text(sol)
    assert '"recompute_layers": 2' in sol.model_dump_json(indent=2)


SEARCHED = """\
name: searched-block
model: {params: 70e9, layers: 80, d_model: 8192, heads: 64, kv_heads: 8, ffn_hidden: 28672, mlp: swiglu,
        seq_len: 8192, vocab: 128256}
hardware:
  gpu: H100-SXM5-80GB
  gpus: {min: 64, max: 256, step: 64}
  tensor_parallel: 8
  pipeline_parallel: auto
  zero: 1
  recompute: auto
  recompute_layers: auto
target: {tokens: 2e12, at_batch: 4194304}
noise: {b_crit: 6e6}
"""


def test_the_search_takes_the_fewest_layers_that_fit(tmp_path):
    """Every block pair of the space holds the fewest N that fits one sequence (brute force over N
    with the cost model), and only where neither no recomputation nor... full is needed to fit."""
    from budgetdsl.solve import search_space as ss

    path = tmp_path / "searched.yaml"
    path.write_text(SEARCHED)
    plan = load_plan(path)
    pairs = [p for p in ss.search_space(plan).pairs if p.split.recompute_layers is not None]
    assert pairs, "the search considers block recomputation"

    def fits(pair, n):
        split = replace(pair.split, recompute_layers=n)
        return build_cost_model(plan, pair.gpus, split).micro_batch_max >= 1

    for pair in pairs:
        n = pair.split.recompute_layers
        assert n >= 1 and fits(pair, n) and not fits(pair, n - 1), (pair, n)
    # where one recomputed layer is enough (128 GPUs at t 8, p 8) the pair is there too
    assert (128, 8, 8, 1) in {(p.gpus, p.split.tensor_parallel, p.split.pipeline_parallel, p.split.recompute_layers)
                              for p in pairs}
    sol = solve(plan)
    assert sol.feasible and sol.batch.recompute_layers is not None  # block wins here: full costs more time


def test_a_plans_block_count_is_dropped_when_the_search_recomputes_nothing(tmp_path):
    """`recompute: auto` with `recompute_layers: 2`: on a 1.3B model with memory to spare the search
    launches no recomputation, so the launch carries no block count (a count belongs to `full`)."""
    path = tmp_path / "auto.yaml"
    path.write_text(PLAN.replace("175e9, layers: 96, d_model: 12288, heads: 96", "1.3e9, layers: 24, d_model: 2048, "
                                 "heads: 16").replace("gpus: 1024", "gpus: 8").replace("tensor_parallel: 8", "")
                    .replace("pipeline_parallel: 16", "").format(n=2, recompute="auto", v=1))
    plan = load_plan(path)
    sol = solve(plan)
    assert sol.batch.recompute == "none" and sol.batch.recompute_layers is None
    spec = launch_spec(plan, sol)
    assert spec.recompute == "none" and spec.recompute_layers is None
    assert "--recompute" not in export(spec, "megatron")
