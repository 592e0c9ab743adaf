"""`python -m budgetdsl.exports.shape`, which sizes the CI's Slurm test cluster: the largest node
count and the largest GPUs per node over the plans (each maximum on its own), nothing for a plan
with nothing to schedule."""

from __future__ import annotations

import pathlib

import pytest

from budgetdsl.exports.shape import main

REPO = pathlib.Path(__file__).resolve().parents[2]
MINIMAL = (REPO / "plans" / "minimal.yaml").read_text()


def _plan(tmp_path: pathlib.Path, name: str, hardware: str, extra: str = "") -> str:
    path = tmp_path / f"{name}.yaml"
    path.write_text(MINIMAL.replace("  gpus: 64", hardware) + extra)
    return str(path)


def test_the_cluster_shape_is_the_largest_node_count_and_node_size(tmp_path, capsys):
    wide = _plan(tmp_path, "wide", "  gpus: 16\n  gpus_per_node: 8")  # 2 nodes of 8
    narrow = _plan(tmp_path, "narrow", "  gpus: 12\n  gpus_per_node: 4")  # 3 nodes of 4
    assert main([wide, narrow]) == 0
    assert capsys.readouterr().out.split() == ["3", "8"]
    single = _plan(tmp_path, "single", "  gpus: 2\n  gpus_per_node: 8")  # 1 node, 2 of its GPUs
    assert main([single]) == 0
    assert capsys.readouterr().out.split() == ["1", "2"]


def test_only_infeasible_plans_give_no_shape(tmp_path, capsys):
    late = _plan(tmp_path, "late", "  gpus: 16", "budget:\n  deadline: 1 s\n")
    assert main([late]) == 1 and capsys.readouterr().out == ""


def _megatron_ffn(args: dict[str, str | None], hidden: int) -> int:
    """The MLP width Megatron-LM runs with these flags (megatron/training/arguments.py: without
    --ffn-hidden-size, 4·h, or with --swiglu int(4·h·2/3 / 64)·64)."""
    if args.get("--ffn-hidden-size") is not None:
        return int(str(args["--ffn-hidden-size"]))
    return int(4 * hidden * 2 / 3 / 64) * 64 if "--swiglu" in args else 4 * hidden


@pytest.mark.parametrize("mlp, ffn_hidden", [("gelu", None), ("gelu", 5632), ("swiglu", None), ("swiglu", 5632)])
def test_megatron_runs_the_mlp_width_the_plan_describes(mlp, ffn_hidden, tmp_path):
    """The Megatron-LM export trains the layer the plan costed: the MLP width is model.ffn_hidden,
    else 4·d_model (the plan's convention), whatever Megatron's own default for the activation."""
    from budgetdsl.exports.megatron import arguments
    from budgetdsl.exports.spec import launch_spec
    from budgetdsl.plan.loader import load_plan
    from budgetdsl.solve.solver import solve

    extra = f"  mlp: {mlp}\n" + (f"  ffn_hidden: {ffn_hidden}\n" if ffn_hidden else "")
    path = tmp_path / "plan.yaml"
    path.write_text(MINIMAL.replace("  seq_len: 2048", "  seq_len: 2048\n  heads: 16\n  vocab: 50304\n" + extra))
    plan = load_plan(str(path))
    args = dict(arguments(launch_spec(plan, solve(plan))))
    assert ("--swiglu" in args) == (mlp == "swiglu")
    assert _megatron_ffn(args, plan.model.d_model) == (ffn_hidden or 4 * plan.model.d_model)
