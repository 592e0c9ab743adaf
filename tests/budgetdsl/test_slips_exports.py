"""`python -m budgetdsl.exports.shape`, which sizes the CI's Slurm test cluster: the largest node
count and the largest GPUs per node over the plans (each maximum on its own), nothing for a plan
with nothing to schedule."""

from __future__ import annotations

import pathlib

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
