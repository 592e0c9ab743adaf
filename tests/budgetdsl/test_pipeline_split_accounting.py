"""The embedding and the loss counted as layers in the pipeline split (issue 24; Megatron-Core's
--account-for-embedding-in-pipeline-split and --account-for-loss-in-pipeline-split, Dubey et al.
2024 section 3.3.2): the split Megatron-Core makes, its divisibility rules located in the plan with
what would divide, the memory and bubble the cost model prices on it, the search's depths and chunk
counts, and the Megatron flags."""

from __future__ import annotations

import pathlib
import sys

import pytest

from budgetdsl.cost import memory as mem
from budgetdsl.cost.cost_model import build_cost_model
from budgetdsl.exports import export
from budgetdsl.exports.spec import ExportError, launch_spec
from budgetdsl.hardware.layout import accounted_hint, accounted_problem, accounted_split
from budgetdsl.plan.diagnostics import PlanError
from budgetdsl.plan.loader import load_plan
from budgetdsl.solve.layout_search import candidates, virtual_degrees
from budgetdsl.solve.solver import solve

PLAN = """\
name: accounted
model: {{params: 1.2e9, layers: {layers}, d_model: 2048, heads: 16, seq_len: 2048, vocab: 32000}}
hardware:
  gpu: A100-SXM4-80GB
  gpus: {gpus}
  tensor_parallel: 1
  pipeline_parallel: {p}
  zero: 0
  recompute: none
  virtual_pipeline_stages: {v}
  embedding_in_pipeline_split: {e}
  loss_in_pipeline_split: {l}
target: {{tokens: 20e9, at_batch: 1048576}}
noise: {{b_crit: 1048576}}
run: {{batch: 1048576}}
launch: {{image: nvcr.io/nvidia/pytorch:24.05-py3, command: [pretrain_gpt.py]}}
"""


def _load(tmp_path, layers=6, p=4, v=1, e="true", loss="true", gpus=None, extra=""):
    path = tmp_path / "accounted.yaml"
    text = PLAN.format(layers=layers, p=p, v=v, e=e, l=loss, gpus=gpus or (p if p != "auto" else 8))
    path.write_text(text.replace("  loss_in_pipeline_split", extra + "  loss_in_pipeline_split"))
    return load_plan(path)


def test_the_first_and_the_last_stage_give_their_slot_to_the_embedding_and_the_loss():
    assert accounted_split(126, 16, True, True) == (7,) + (8,) * 14 + (7,)  # Llama 3 405B, 128 slots
    assert accounted_split(127, 16, True, False) == (7,) + (8,) * 15  # the embedding alone: the first stage
    assert accounted_split(127, 16, False, True) == (8,) * 15 + (7,)  # the loss alone: the last stage
    assert accounted_split(6, 4, True, True) == (1, 2, 2, 1)
    assert accounted_split(30, 1, True, True) == (30,)  # one stage holds every layer
    assert accounted_split(30, 2, True, True) == (15, 15)


@pytest.mark.parametrize(("layers", "p", "v", "e", "loss", "problem"), [
    (126, 16, 8, True, True, None),  # 8 slots a stage, one a chunk: the paper's
    (126, 16, 16, True, True, "8 slots of each of the 16 stages"),
    (126, 16, 1, False, True, "127 slots do not divide into pipeline_parallel = 16"),
    (126, 12, 1, True, True, "128 slots do not divide into pipeline_parallel = 12"),
    (126, 16, 3, True, True, "virtual_pipeline_stages = 3"),
    (14, 16, 1, True, True, "would hold no transformer layer"),
    (126, 16, 4, False, False, None),  # nothing accounted: not this rule's business
])
def test_megatron_cores_divisibility_rule(layers, p, v, e, loss, problem):
    got = accounted_problem(layers, p, v, e, loss)
    assert (got is None) == (problem is None) and (problem is None or problem in got), got


def test_the_hints_name_what_divides():
    assert "pipeline_parallel: 8 or 16 (dividing 128)" in accounted_hint(126, 12, 1, True, True)
    assert "account for only one" in accounted_hint(127, 16, 1, True, True)  # 128 = 127 + 1 divides
    assert "virtual_pipeline_stages: 8" in accounted_hint(126, 16, 16, True, True)
    for text, fix in ((accounted_hint(126, 12, 1, True, True), (16, 1)),
                      (accounted_hint(126, 16, 16, True, True), (16, 8))):
        assert accounted_problem(126, *fix, True, True) is None, text  # what the hint names runs


@pytest.mark.parametrize(("over", "key", "message"), [
    (dict(p=3), "embedding_in_pipeline_split", "8 slots do not divide into pipeline_parallel = 3"),
    (dict(layers=14, v=3), "virtual_pipeline_stages", "4 slots of each of the 4 stages"),
    (dict(e="false", layers=7, p=3), "loss_in_pipeline_split", "7 layers + the loss = 8 slots do not divide"),
])
def test_a_split_megatron_refuses_is_located_at_its_key(tmp_path, over, key, message):
    args = dict(layers=6, p=4, v=1, e="true", loss="true") | over
    with pytest.raises(PlanError) as err:
        _load(tmp_path, **args)
    (diag,) = err.value.diagnostics
    text = (tmp_path / "accounted.yaml").read_text().splitlines()
    line = next(i for i, s in enumerate(text, 1) if s.strip().startswith(key + ":"))
    assert (diag.location.line, diag.location.col) == (line, 3), diag
    assert message in diag.message and diag.hint, diag


def test_stage_layers_beside_the_accounting_is_refused(tmp_path):
    with pytest.raises(PlanError, match=r"stage_layers pins the split.*Megatron-Core") as err:
        _load(tmp_path, extra="  stage_layers: [1, 2, 2, 1]\n")
    assert err.value.diagnostics[0].hint.startswith("leave stage_layers out")


def test_interleaving_the_unaccounted_split_cannot_run_is_accepted_with_the_accounting(tmp_path):
    """6 layers on 4 stages cannot interleave 2 ways (3 chunks of 2 for 4 stages); 8 slots can."""
    with pytest.raises(PlanError):
        _load(tmp_path, v=2, e="false", loss="false")
    assert _load(tmp_path, v=2).hardware.split_slots() == (True, True)


def test_memory_and_the_bubble_by_hand(tmp_path):
    """6 layers + 2 slots on 4 stages of 2 chunks ([1, 2, 2, 1], one slot a chunk), no recomputation:
    stage i holds its layers × (4 − i) micro-batches × (1 + 3/(4·2)) (interleaving, Korthikanti et al.
    section 4.2.3) of one layer's activations, the last stage the fp32 logits too; the bubble is
    (p − 1)/v = 3/2 micro-batch times of the slowest (2-layer) stage. Against the same split pinned
    (stage_layers) without interleaving, the cost model prices the same stages."""
    plan = _load(tmp_path, v=2)
    cm = build_cost_model(plan, 4)
    per_layer = mem.activation_bytes_per_layer(2048, 2048, 16, "none", True, 1, False, ffn_hidden=None)
    assert [st.layers for st in cm.stages] == [1, 2, 2, 1]
    interleave = 1 + 3 / 8
    for st, (n, in_flight) in zip(cm.stages, [(1, 4), (2, 3), (2, 2), (1, 1)]):
        assert st.activations_per_sequence == pytest.approx(per_layer * n * in_flight * interleave)
    assert cm.stages[-1].logits_per_sequence == pytest.approx(4 * 2048 * 32000)
    assert cm.heaviest_stage.stage == 1  # 2 layers × 3 in flight beat 1 × 4
    bd = cm.breakdown(1048576, grad_accum=512)
    micro = (bd.compute + bd.recompute + bd.tp_comm + bd.pp_comm) / bd.micro_batches
    assert bd.bubble == pytest.approx(3 / 2 * micro)
    assert bd.stage_layers == (1, 2, 2, 1)
    flat = build_cost_model(_load(tmp_path, v=1), 4)
    pinned = build_cost_model(_load(tmp_path, v=1, e="false", loss="false", extra="  stage_layers: [1, 2, 2, 1]\n"), 4)
    assert [st.at(1) for st in flat.stages] == [st.at(1) for st in pinned.stages]
    assert flat.step_time(1048576, 512) == pinned.step_time(1048576, 512)
    fb = flat.breakdown(1048576, grad_accum=512)
    assert fb.bubble == pytest.approx(3 * (fb.compute + fb.recompute + fb.tp_comm + fb.pp_comm) / fb.micro_batches)


def test_the_search_tries_the_depths_and_chunks_the_slots_allow(tmp_path):
    """22 layers + 2 = 24 slots: depths 1, 2, 4, 8 (16 does not divide 24, though 22 layers fill 16
    stages unaccounted); on 4 stages (6 slots) v 1 or 2, on 8 (3 slots) v 1."""
    plan = _load(tmp_path, layers=22, p="auto", v="auto", gpus=8)
    assert sorted({c.pipeline_parallel for c in candidates(plan)}) == [1, 2, 4, 8]
    assert (virtual_degrees(plan, 4), virtual_degrees(plan, 8)) == ([1, 2], [1])
    bare = _load(tmp_path, layers=22, p="auto", v="auto", gpus=8, e="false", loss="false")
    assert 16 in {c.pipeline_parallel for c in candidates(bare)}
    sol = solve(plan)
    p = sol.batch.pipeline_parallel
    assert accounted_problem(22, p, sol.batch.virtual_pipeline_stages or 1, True, True) is None


def test_megatron_writes_the_two_flags_and_no_uneven_split(tmp_path):
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "exports"))
    from export_validators import check_megatron_invariants, megatron_args, megatron_source

    plan = _load(tmp_path, v=2)
    spec = launch_spec(plan, solve(plan))
    assert (spec.split_slots, spec.stage_layers, spec.virtual_stages) == (("embedding", "loss"), (1, 2, 2, 1), 2)
    text = export(spec, "megatron")
    args = megatron_args(text)
    assert "--account-for-embedding-in-pipeline-split" in args and "--account-for-loss-in-pipeline-split" in args
    assert args["--num-virtual-stages-per-pipeline-rank"] == "2"
    assert "--decoder-first-pipeline-num-layers" not in args and "--decoder-last-pipeline-num-layers" not in args
    check_megatron_invariants(args, megatron_source(text)[1], spec.gpus)
    loss_only = _load(tmp_path, layers=7, e="false")
    args = megatron_args(export(launch_spec(loss_only, solve(loss_only)), "megatron"))
    assert "--account-for-loss-in-pipeline-split" in args and "--account-for-embedding-in-pipeline-split" not in args
    for fmt in ("deepspeed", "hf"):
        with pytest.raises(ExportError, match=r"counting the embedding and the loss as layers.*no setting"):
            export(spec, fmt)
    assert "BUDGETDSL_SPLIT_SLOTS=embedding,loss" in export(spec, "torchrun")


def test_the_invariants_catch_a_split_megatron_refuses():
    """The validator's own negative control: 6 layers + 2 on 3 stages does not divide."""
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "exports"))
    from export_validators import check_megatron_invariants

    args = {"--num-layers": "6", "--hidden-size": "2048", "--num-attention-heads": "16",
            "--max-position-embeddings": "2048", "--micro-batch-size": "1", "--seq-length": "2048",
            "--tensor-model-parallel-size": "1", "--pipeline-model-parallel-size": "3", "--bf16": None,
            "--account-for-embedding-in-pipeline-split": None, "--account-for-loss-in-pipeline-split": None}
    with pytest.raises(AssertionError, match="not divisible by the pipeline"):
        check_megatron_invariants(args, {}, 3)
    args["--pipeline-model-parallel-size"] = "4"
    check_megatron_invariants(args, {}, 4)


def test_reports_name_the_accounted_split(tmp_path):
    from budgetdsl.report.text import render_markdown, render_text

    sol = solve(_load(tmp_path, v=2))
    assert sol.batch.pipeline_split_slots == ["embedding", "loss"]
    assert "split counts embedding + loss" in render_text(sol)
    assert "split counts embedding + loss" in render_markdown(sol)
    assert '"pipeline_split_slots"' in sol.model_dump_json()
    bare = solve(_load(tmp_path, e="false", loss="false"))
    assert "pipeline_split_slots" not in bare.model_dump_json() and "split counts" not in render_text(bare)


def test_the_stages_coefficient_counts_the_slots_of_a_chunk(tmp_path):
    """The assumption the report shows for the pipeline (`pipeline_stages`) names the slots a chunk
    holds: 6 layers + the embedding and the loss = 8 slots over p·v chunks, 2 a stage on 4 stages
    without interleaving, 1 a chunk with 2 chunks a stage (Llama 3 405B's 128 slots on 16 stages of
    8 chunks: one slot a chunk, Dubey et al. 2024 section 3.3.2)."""
    for v, per in ((1, "2 slots"), (2, "1 slot")):
        detail = build_cost_model(_load(tmp_path, v=v), 4).coefficients["pipeline_stages"].detail
        assert detail == ("layers per stage 1, 2, 2, 1 (the embedding and the loss counted as layers, "
                          f"Megatron-Core's accounted split: {per} per chunk)"), detail
