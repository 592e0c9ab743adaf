"""`hardware.stage_layers` pins the pipeline split (issue 24): Megatron-Core's uneven-pipeline rules,
each broken one located at its entry with a split that runs; memory on the heaviest stage, the step
on the slowest; the Megatron export's first/last flags, checked by megatron-core's own
TransformerConfig (tests/exports/export_validators.py), and a refusal where the middle stages differ."""

from __future__ import annotations

import pathlib
import re
import sys

import pytest

from budgetdsl.cost.cost_model import build_cost_model
from budgetdsl.exports import export
from budgetdsl.exports.spec import ExportError, launch_spec
from budgetdsl.hardware.layout import split_problem
from budgetdsl.plan.diagnostics import PlanError
from budgetdsl.plan.loader import load_plan
from budgetdsl.solve.solver import solve

PLAN = """\
name: split
model: {{params: 175e9, layers: 96, d_model: 12288, heads: 96, seq_len: 2048, vocab: 51200}}
hardware:
  gpu: A100-SXM4-80GB
  gpus: 1024
  tensor_parallel: 8
  pipeline_parallel: 16
  zero: 1
  recompute: full
  virtual_pipeline_stages: {v}
  stage_layers: {split}
target: {{tokens: 300e9, at_batch: 3145728}}
noise: {{b_crit: 3145728}}
run: {{batch: 3145728}}
launch: {{image: nvcr.io/nvidia/pytorch:24.05-py3, command: [pretrain_gpt.py]}}
"""
EVEN = [6] * 16


def _load(tmp_path, split, v=1):
    path = tmp_path / "split.yaml"
    path.write_text(PLAN.format(split=split, v=v))
    return load_plan(path)


@pytest.mark.parametrize(("split", "v", "column", "message", "hint"), [
    ([6] * 3, 1, 3, r"3 entries for pipeline_parallel = 16 stages", r"stage_layers: \[6, 6, .*6\]"),
    ([5] + [6] * 15, 1, 3, r"the stages hold 95 layers and the model has 96", r"stage_layers: \[6, "),
    ([0] + [6] * 14 + [12], 1, 18, r"stage 1 holds 0 layers: every stage holds at least one", r"e\.g\."),
    ([5] + [6] * 14 + [7], 2, 18, r"stage 1 holds 5 layers, not a multiple of virtual_pipeline_stages = 2",
     r"stage_layers: \[6, 6,"),
])
def test_a_split_megatron_cannot_run_is_located_at_its_entry_with_one_that_runs(tmp_path, split, v, column,
                                                                                   message, hint):
    with pytest.raises(PlanError) as err:
        _load(tmp_path, split, v)
    (diag,) = err.value.diagnostics
    assert (diag.location.line, diag.location.col) == (11, column)  # the key, or the entry
    assert re.search(message, diag.message), diag.message
    assert re.search(hint, diag.hint or ""), diag.hint


def test_the_suggested_split_is_one_the_rules_accept():
    """The hint is not decoration: the split it names passes the same rules (v = 2 on 96 layers)."""
    from budgetdsl.hardware.layout import split_hint

    text = split_hint(96, 16, 2)
    split = [int(n) for n in text.split("[")[1].split("]")[0].split(",")]
    assert split_problem(split, 96, 16, 2) is None and split_problem([7] * 15 + [-9], 96, 16) is not None


def test_a_pinned_split_needs_a_pinned_pipeline(tmp_path):
    path = tmp_path / "auto.yaml"
    path.write_text(PLAN.format(split=EVEN, v=1).replace("pipeline_parallel: 16", "pipeline_parallel: auto"))
    with pytest.raises(PlanError, match="pipeline_parallel is searched"):
        load_plan(path)


def test_memory_follows_the_heaviest_stage_and_the_step_the_slowest(tmp_path):
    """Moving a layer from the first stage to the last: the first stage (16 micro-batches in flight
    under 1F1B) holds one layer less of activations, so the room grows; the last stage (with the LM
    head) runs 7 layers, so the step grows by one layer's share of a micro-batch on every one of
    them, and the cost model reports the split it used."""
    even, shifted = _load(tmp_path, EVEN), _load(tmp_path, [5] + [6] * 14 + [7])
    a, b = build_cost_model(even, 1024), build_cost_model(shifted, 1024)
    assert [st.layers for st in b.stages] == [5] + [6] * 14 + [7]
    # one layer's activations leave the first stage (16 micro-batches in flight) and join the last (1)
    lost = a.stages[0].activations_per_sequence - b.stages[0].activations_per_sequence
    gained = b.stages[-1].activations_per_sequence - a.stages[-1].activations_per_sequence
    assert lost > 0 and lost == pytest.approx(16 * gained)
    # the first stage lightened, the second (6 layers, 15 in flight) is now the heaviest, and sets the memory
    assert (a.heaviest_stage.stage, b.heaviest_stage.stage) == (0, 1)
    assert b.memory_at(1) == pytest.approx(b.stages[1].at(1) * (1 + b.fragmentation) + b.reserve_bytes)
    assert b.memory_at(1) < a.memory_at(1)
    assert b.micro_batch_max >= a.micro_batch_max
    sa, sb = solve(even), solve(shifted)
    assert sb.throughput.stage_layers == [5] + [6] * 14 + [7]
    ratio = sb.throughput.breakdown["compute"] / sa.throughput.breakdown["compute"]
    assert 7 / 6 * 0.9 < ratio < 7 / 6 * 1.05  # the head's share dilutes the 7/6 a little
    assert sb.throughput.mfu < sa.throughput.mfu


def test_megatron_writes_the_first_and_last_stages_and_refuses_unequal_middles(tmp_path):
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "exports"))
    from export_validators import check_megatron_invariants, megatron_args, megatron_source

    plan = _load(tmp_path, [5] + [6] * 14 + [7])
    spec = launch_spec(plan, solve(plan))
    text = export(spec, "megatron")
    args = megatron_args(text)
    assert (args["--decoder-first-pipeline-num-layers"], args["--decoder-last-pipeline-num-layers"]) == ("5", "7")
    check_megatron_invariants(args, megatron_source(text)[1], spec.gpus)  # megatron-core's TransformerConfig
    even = _load(tmp_path, EVEN)
    assert "pipeline-num-layers" not in export(launch_spec(even, solve(even)), "megatron")
    odd = _load(tmp_path, [6, 5, 7] + [6] * 13)
    with pytest.raises(ExportError, match=r"unequal middle stages.*--pipeline-model-parallel-layout"):
        export(launch_spec(odd, solve(odd)), "megatron")
    with pytest.raises(ExportError, match=r"deepspeed export .* no setting for it"):
        export(spec, "deepspeed")


def test_a_two_stage_pipeline_launches_its_uneven_split(tmp_path):
    """Two stages are the first and the last: a pinned [46, 50] of 96 layers launches with
    --decoder-first/last-pipeline-num-layers 46 and 50 (megatron-core's TransformerConfig accepts
    them), not as Megatron's even 48 and 48 the costed split is not."""
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "exports"))
    from export_validators import check_megatron_invariants, megatron_args, megatron_source

    path = tmp_path / "split.yaml"
    path.write_text(PLAN.format(split=[46, 50], v=1).replace("pipeline_parallel: 16", "pipeline_parallel: 2"))
    plan = load_plan(path)
    spec = launch_spec(plan, solve(plan))
    assert spec.stage_layers == (46, 50)
    text = export(spec, "megatron")
    args = megatron_args(text)
    assert (args["--decoder-first-pipeline-num-layers"], args["--decoder-last-pipeline-num-layers"]) == ("46", "50")
    check_megatron_invariants(args, megatron_source(text)[1], spec.gpus)


def test_megatron_core_itself_refuses_what_the_export_refuses():
    """The negative control of the refusal: megatron-core's TransformerConfig, given the first and
    last stages of a split with unequal middles, cannot place the rest evenly either."""
    pytest.importorskip("megatron.core")
    import torch
    from megatron.core.transformer import TransformerConfig

    kw = dict(num_layers=96, hidden_size=256, num_attention_heads=8, pipeline_model_parallel_size=16,
              params_dtype=torch.bfloat16, pipeline_dtype=torch.bfloat16, bf16=True)
    TransformerConfig(**kw, num_layers_in_first_pipeline_stage=5, num_layers_in_last_pipeline_stage=7)
    with pytest.raises(ValueError, match="middle"):
        TransformerConfig(**kw, num_layers_in_first_pipeline_stage=6, num_layers_in_last_pipeline_stage=5)


def test_a_plan_without_the_key_writes_nothing_new(tmp_path):
    plan = _load(tmp_path, EVEN)
    assert "stage_layers" in plan.hardware.model_fields_set
    bare = plan.model_copy(update={"hardware": plan.hardware.model_copy(update={"stage_layers": None})})
    assert solve(bare).throughput.step_time_s == solve(plan).throughput.step_time_s  # an even pin = the default


def test_a_plan_with_a_pinned_split_hashes_and_takes_whole_numbers_only(tmp_path):
    """A plan's sections are hashed (LoadedPlan.__hash__, caches): the split is kept as a tuple.
    Its entries are integers as written, not strings or fractions coerced."""
    plan = _load(tmp_path, [5] + [6] * 14 + [7])
    assert plan.hardware.stage_layers == (5,) + (6,) * 14 + (7,) and isinstance(hash(plan.hardware), int)
    for bad in (['"5"'] + [6] * 15, [5.5] + [6] * 15):
        with pytest.raises(PlanError, match="expected a number"):
            _load(tmp_path, "[" + ", ".join(str(n) for n in bad) + "]")


def test_interleaving_that_no_split_of_the_layers_can_run_is_refused(tmp_path):
    """126 layers (Llama 3 405B) in chunks of 4: no stage split runs it, so a pinned v = 4 is
    refused at the key, with the largest v that divides the layers; auto searches what runs."""
    path = tmp_path / "v4.yaml"
    text = PLAN.format(split=EVEN, v=4).replace(f"  stage_layers: {EVEN}\n", "")
    path.write_text(text.replace("layers: 96", "layers: 126").replace("params: 175e9", "params: 405e9"))
    with pytest.raises(PlanError) as err:
        load_plan(path)
    (diag,) = err.value.diagnostics
    assert "virtual_pipeline_stages (4) does not divide the 126 layers" in diag.message
    assert diag.hint == "e.g. virtual_pipeline_stages: 3, or auto" and diag.location.line == 10
