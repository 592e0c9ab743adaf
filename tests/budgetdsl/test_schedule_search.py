"""`sequence_parallel: auto` and `virtual_pipeline_stages: auto` (issue 24): what the layout search
offers (SP exactly where tensor parallelism runs; v the powers of two up to 8 whose stages hold whole
v-layer chunks, one per distinct split), what the answer and the Megatron export carry, and that a
plan without the keys is solved as before. The brute-force oracle (test_solver_oracle.py,
"fixed-sp-v-auto", "free-split-v-auto") checks the pruning against the whole space."""

from __future__ import annotations

import pathlib
import sys

import pytest
from solver_plans import DAY, make_plan

from budgetdsl.exports import export
from budgetdsl.exports.spec import ExportError, launch_spec
from budgetdsl.solve.layout_search import candidates, virtual_degrees
from budgetdsl.solve.solver import solve

LLAMA3_405B = {"params": None, "layers": 126, "d_model": 16384, "heads": 128, "kv_heads": 8, "ffn_hidden": 53248,
               "mlp": "swiglu", "tied_embeddings": False, "vocab": 128256, "seq_len": 8192}


def _plan(model=None, **hardware):
    hw = {"gpu": "H100-SXM5-80GB", "gpus": 16, "mfu": None, "zero": 1, "tensor_parallel": "auto",
          "pipeline_parallel": 4, "recompute": "none", "sequence_parallel": "auto", "virtual_pipeline_stages": "auto"}
    return make_plan(model=model or {"params": 30e9, "layers": 48, "d_model": 7168, "heads": 56, "seq_len": 4096},
                     hardware={**hw, **hardware}, budget={"deadline": 60 * DAY, "flops": None, "gpu_hours": None},
                     target={"tokens": 6e10, "at_batch": 2e6}, noise={"b_crit": 2e6},
                     launch={"image": "nvcr.io/nvidia/pytorch:24.05-py3", "command": ["pretrain_gpt.py"]})


def test_sequence_parallelism_is_offered_exactly_with_tensor_parallelism():
    by_t = {c.tensor_parallel: c.sequence_parallel for c in candidates(_plan())}
    assert by_t == {1: False, 2: True, 4: True, 8: True}
    pinned = {c.sequence_parallel for c in candidates(_plan(sequence_parallel=False))}
    assert pinned == {None}  # the plan's own value: not searched, not reported


def test_interleavings_follow_the_split():
    """126 layers on 16 stages (Llama 3 405B): 2 is the only interleaving whose chunks fill the
    stages ([8, ..., 8, 6]); 4 and 8 do not divide 126. A pinned split decides alone."""
    llama = _plan(model=LLAMA3_405B, gpus=8192, tensor_parallel=8, pipeline_parallel=16)
    assert virtual_degrees(llama, 16) == [1, 2] and virtual_degrees(llama, 1) == [1]
    meta = _plan(model=LLAMA3_405B, gpus=8192, tensor_parallel=8, pipeline_parallel=16,
                 stage_layers=[7] + [8] * 14 + [7])
    assert virtual_degrees(meta, 16) == [1]  # 7 and 8 share no factor
    even = _plan(stage_layers=[12] * 4)
    assert virtual_degrees(even, 4) == [1, 4] and virtual_degrees(_plan(virtual_pipeline_stages=2), 4) == [None]


def test_the_answer_and_the_megatron_export_carry_the_chosen_schedule():
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "exports"))
    from export_validators import check_megatron_invariants, megatron_args, megatron_source

    plan = _plan()
    sol = solve(plan)
    assert (sol.batch.sequence_parallel, sol.batch.virtual_pipeline_stages) == (True, 4)
    dumped = sol.model_dump(mode="json")["batch"]
    assert dumped["sequence_parallel"] is True and dumped["virtual_pipeline_stages"] == 4
    spec = launch_spec(plan, sol)
    text = export(spec, "megatron")
    args = megatron_args(text)
    assert "--sequence-parallel" in args and args["--num-virtual-stages-per-pipeline-rank"] == "4"
    check_megatron_invariants(args, megatron_source(text)[1], spec.gpus)  # megatron-core's TransformerConfig
    assert "BUDGETDSL_VIRTUAL_STAGES=4" in export(spec, "torchrun")
    with pytest.raises(ExportError, match="4 interleaved stages per GPU"):
        export(spec, "deepspeed")


def test_a_plan_that_writes_neither_key_reports_neither():
    plan = _plan(sequence_parallel=None, virtual_pipeline_stages=None)
    batch = solve(plan).model_dump(mode="json")["batch"]
    assert "sequence_parallel" not in batch and "virtual_pipeline_stages" not in batch


def test_the_sweep_prices_each_pair_with_its_own_searched_layout():
    """The sweep kernel's pairs (`sweep_kernel.plan_pairs`) carry every searched degree of their
    layout — SP and v here, and context and expert parallelism alike — not the plan's `auto` read
    as off and 1: the same cost model the search built for the pair."""
    from budgetdsl.solve.cache import SolveCache
    from budgetdsl.solve.search_space import search_space
    from budgetdsl.solve.sweep_kernel import plan_pairs

    plan, cache = _plan(), SolveCache()
    pairs = plan_pairs(plan, cache)
    space = search_space(plan, cache).pairs
    assert pairs is not None and [p.split for p in pairs] == [p.split for p in space]
    assert {(p.split.sequence_parallel, p.split.virtual_stages) for p in pairs} >= {(True, 4), (False, 1)}
