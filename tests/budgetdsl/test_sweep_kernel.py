"""The sweep kernel (budgetdsl.solve.sweep_kernel) against the scalar path: every row of a random grid
of limits, B_crit and objectives equals `solve()` of that row's plan (the summary a table or CSV
shows: status, GPUs, batch, micro-batch, accumulation, layout, steps, wall clock, GPU-hours,
cost, FLOPs, x, binding limits) and the CSV and table lines the command writes; grids reach limit
edges and infeasible rows, on searched and pinned layouts, fixed and free GPU counts, with and
without a price."""

from __future__ import annotations

import dataclasses
import pathlib
import random
import shutil

import pytest

pytest.importorskip("numpy")  # the kernel's; without it a sweep takes the scalar path (tested below)

from budgetdsl.commands.sweep import render_csv, render_table
from budgetdsl.plan.loader import load_merged, read_merged
from budgetdsl.solve.solver import solve
from budgetdsl.solve.sweep import Setting, sweep

REPO = pathlib.Path(__file__).resolve().parents[2]
MINIMAL = (REPO / "plans" / "minimal.yaml").read_text()

# name -> plan text (the example plans, and variants of minimal.yaml written here)
PLANS = {
    "minimal (searched layout, 64 GPUs)": MINIMAL,
    "searched layout, GPU range, price": MINIMAL.replace("  gpus: 64", "  gpus: {min: 32, max: 96, step: 32}")
    + "budget:\n  usd_per_gpu_hour: 2.5\n",
    "pinned layout, predicted, micro-batch pinned": MINIMAL.replace(
        "  gpus: 64", "  gpus: 64\n  tensor_parallel: 2\n  pipeline_parallel: 2\n  zero: 1\n  recompute: selective")
    + "run:\n  micro_batch: 2\n",
    # ZeRO-2 on a slow network: each micro-batch's reduction outlasts its backward (the m − 1 extra
    # reductions of throughput.StepCost.total), with accumulation from a pinned micro-batch
    "ZeRO-2, slow network, micro-batch pinned": MINIMAL.replace(
        "  gpus: 64", "  gpus: 64\n  zero: 2\n  tensor_parallel: 1\n  pipeline_parallel: 1\n  recompute: none\n"
        "  network: 10 Gb/s") + "run:\n  micro_batch: 1\n",
    # hardware.stack: the weights' all-gather hidden behind a share of the micro-batch (gather_share),
    # the TP and pipeline latency per micro-batch (StepCost.latency), on a slow network
    "megatron-core stack, ZeRO-1, pipeline, slow network": MINIMAL.replace(
        "  gpus: 64", "  gpus: 64\n  stack: megatron-core\n  zero: 1\n  tensor_parallel: 2\n  pipeline_parallel: 2\n"
        "  recompute: none\n  network: 10 Gb/s"),
    "fsdp2 stack, ZeRO-1 searched micro-batch, slow network": MINIMAL.replace(
        "  gpus: 64", "  gpus: 64\n  stack: fsdp2\n  zero: 1\n  tensor_parallel: 1\n  pipeline_parallel: 1\n"
        "  recompute: none\n  network: 10 Gb/s"),
    "7b-h100-choose-gpus (declared MFU, GPU range, usd)": (REPO / "plans" / "7b-h100-choose-gpus.yaml").read_text(),
    "llama2-70b (declared MFU, pinned layout)": (REPO / "plans" / "llama2-70b.yaml").read_text(),
}


def _grid(text: str, tmp_path: pathlib.Path, seed: int) -> tuple:
    """A random grid around the plan's own answer: deadlines and GPU-hour limits at 0.5–2× and
    within a hair of the chosen run's (limit edges), B_crit log-uniform over two decades around
    the plan's, every objective."""
    path = tmp_path / "plan.yaml"
    path.write_text(text)
    if not (tmp_path / "base").exists():
        shutil.copytree(REPO / "plans" / "base", tmp_path / "base")  # what example plans extend
    source = read_merged(path)
    base = solve(load_merged(source))
    rng = random.Random(seed)
    wall, hours = base.wall_clock_s, base.gpu_hours
    edges = [1 - 1e-9, 1.0, 1 + 1e-9, 0.999, 1.001]
    deadlines = sorted({f"{wall * f:.17g} s" for f in [*rng.sample(edges, 3), rng.uniform(0.5, 3.0)]})
    b_crit = base.frontier.b_crit_tokens
    settings = [
        Setting("budget.deadline", tuple(deadlines)),
        Setting("noise.b_crit", (f"{b_crit:.17g}", f"{b_crit * 10 ** rng.uniform(-0.7, 0.7):.6g}")),
        Setting("objective", tuple(rng.sample(["balanced", "min_time", "min_cost", "min_flops"], 2))),
    ]
    if base.usd is not None:
        settings.append(Setting("budget.usd", (f"{base.usd * rng.choice(edges):.17g}", f"{base.usd * 3:.6g}")))
    elif rng.random() < 0.5:
        settings.append(Setting("budget.gpu_hours", (f"{hours * rng.choice(edges):.17g}", f"{hours * 3:.6g}")))
    return source, settings


def differences(kernel_rows, scalar_rows, settings) -> list[str]:
    """Where the kernel's rows differ from the scalar path's: each summary field, and the CSV and
    table the command writes."""
    out = []
    assert len(kernel_rows) == len(scalar_rows)
    for k, s in zip(kernel_rows, scalar_rows):
        assert k.values == s.values
        if (k.error is None) != (s.error is None):
            out.append(f"{k.values}: valid in one path only")
        elif k.summary is not None:
            for f in dataclasses.fields(k.summary):
                a, b = getattr(k.summary, f.name), getattr(s.summary, f.name)
                if a != b or type(a) is not type(b):
                    out.append(f"{k.values}: {f.name} {a!r} (kernel) != {b!r} (solve)")
    if render_csv(kernel_rows, settings) != render_csv(scalar_rows, settings):
        out.append("CSV differs")
    if render_table(kernel_rows, settings) != render_table(scalar_rows, settings):
        out.append("table differs")
    return out


_RUNS: dict = {}


def _run(name: str, tmp_path_factory) -> tuple:
    """(settings, kernel rows, scalar rows) of a plan's grid, computed once per test session."""
    if name not in _RUNS:
        source, settings = _grid(PLANS[name], tmp_path_factory.mktemp("plan"), seed=sum(map(ord, name)))
        with pytest.MonkeyPatch.context() as mp:  # the kernel whatever the grid's size (< 32 rows: solve())
            mp.setenv("BUDGETDSL_SWEEP_SCALAR", "0")
            kernel = sweep(source, settings, full=False)
        _RUNS[name] = settings, kernel, sweep(source, settings, full=True)
    return _RUNS[name]


@pytest.mark.parametrize("name", list(PLANS))
def test_kernel_rows_equal_solve(name, tmp_path_factory):
    settings, kernel, scalar = _run(name, tmp_path_factory)
    assert differences(kernel, scalar, settings) == []
    decided = [r for r in kernel if r.solution is None and r.summary is not None]
    feasible = [r for r in scalar if r.summary is not None and r.summary.feasible]
    assert decided and len(decided) >= len(feasible) // 2, \
        f"the kernel decided only {len(decided)} of {len(feasible)} feasible rows"
    statuses = {r.summary.status for r in scalar if r.summary is not None}
    assert "optimal" in statuses


def test_infeasible_rows_and_limit_edges_are_reached(tmp_path_factory):
    """The grids above are not all easy: over the plans, some rows are infeasible and some have a
    binding time limit (so the comparison covers the interval's edges and the fallback)."""
    binding, infeasible = set(), 0
    for name in PLANS:
        for r in _run(name, tmp_path_factory)[1]:
            if r.summary is not None:
                binding |= set(r.summary.binding)
                infeasible += not r.summary.feasible
    assert infeasible > 0
    assert binding & {"deadline", "gpu_hours"}


def test_negative_control_a_perturbed_kernel_row_is_caught(tmp_path_factory):
    settings, kernel, scalar = _run("minimal (searched layout, 64 GPUs)", tmp_path_factory)
    i = next(i for i, r in enumerate(kernel) if r.solution is None and r.summary is not None)
    for change in (dict(steps=kernel[i].summary.steps + 1), dict(zero=(kernel[i].summary.zero + 1) % 4),
                   dict(binding=())):
        if change == dict(binding=()) and not kernel[i].summary.binding:
            change = dict(binding=("memory",))
        bad = list(kernel)
        bad[i] = dataclasses.replace(kernel[i], summary=dataclasses.replace(kernel[i].summary, **change))
        assert differences(bad, scalar, settings), change


def test_invalid_values_are_invalid_rows_with_the_scalar_diagnostics(tmp_path):
    path = tmp_path / "plan.yaml"
    path.write_text(MINIMAL)
    source = read_merged(path)
    settings = [Setting("budget.deadline", ("5 days", "-1 day", "3 parsecs")),
                Setting("noise.b_crit", ("1M", "0"))]
    kernel = sweep(source, settings, full=False)
    scalar = sweep(source, settings, full=True)
    assert differences(kernel, scalar, settings) == []
    assert [r.error is None for r in kernel] == [True, False, False, False, False, False]
    for k, s in zip(kernel, scalar):
        if s.error is not None:
            assert [str(d) for d in k.error.diagnostics] == [str(d) for d in s.error.diagnostics]


def test_a_sweep_of_the_hardware_is_left_to_the_scalar_path(tmp_path):
    path = tmp_path / "plan.yaml"
    path.write_text(MINIMAL)
    settings = [Setting("hardware.gpus", ("32", "64")), Setting("budget.deadline", ("1 day",))]
    rows = sweep(read_merged(path), settings, full=False)
    assert all(r.solution is not None for r in rows)  # solved by solve(), whole


def test_without_numpy_every_row_takes_the_scalar_path(tmp_path, monkeypatch):
    import sys

    path = tmp_path / "plan.yaml"
    path.write_text(MINIMAL)
    monkeypatch.setitem(sys.modules, "numpy", None)  # `import numpy` raises ImportError
    monkeypatch.delitem(sys.modules, "budgetdsl.solve.sweep_kernel", raising=False)
    rows = sweep(read_merged(path), [Setting("budget.deadline", ("1 day", "2 days"))], full=False)
    assert [r.solution is not None for r in rows] == [True, True]


def test_divisors_equal_the_scalar_scan():
    """The kernel's largest divisor ≤ cap (sieve for small n, vectorized scan beyond, the scan's
    reach of _DIVISOR_SCAN) equals placement.largest_divisor_at_most, which _configs_for uses."""
    import numpy as np

    from budgetdsl.solve.placement import largest_divisor_at_most
    from budgetdsl.solve.sweep_kernel import _Divisors

    rng = random.Random(3)
    n = [rng.choice([rng.randint(1, 5000), rng.randint(1, 10 ** 7), 2 * 3 * 5 * 7 * 11 * 13 * 17, 999_983])
         for _ in range(3000)]
    cap = [rng.choice([1, 2, 7, 33, 300, 5000, 10_000]) for _ in n]
    got = _Divisors()(np.array(n), np.array(cap))
    assert got.tolist() == [largest_divisor_at_most(a, c) for a, c in zip(n, cap)]


def _infeasible_grid(text: str, tmp_path: pathlib.Path) -> tuple:
    """Limits at fractions of the plan's own answer, so most rows are infeasible and for varied
    reasons (no batch meets one limit, two limits exclude each other, integer steps): deadlines,
    FLOPs and GPU-hours (or USD with a price) below what the plan needs, B_crit over a decade,
    every objective."""
    path = tmp_path / "plan.yaml"
    path.write_text(text)
    if not (tmp_path / "base").exists():
        shutil.copytree(REPO / "plans" / "base", tmp_path / "base")
    source = read_merged(path)
    base = solve(load_merged(source))
    b_crit = base.frontier.b_crit_tokens
    money = ("budget.usd", base.usd) if base.usd is not None else ("budget.gpu_hours", base.gpu_hours)
    return source, [
        Setting("budget.deadline", tuple(f"{base.wall_clock_s * f:.17g} s" for f in (0.3, 0.9, 1.5))),
        Setting("budget.flops", tuple(f"{base.flops * f:.17g}" for f in (0.7, 2.0))),
        Setting(money[0], tuple(f"{money[1] * f:.17g}" for f in (0.6, 3.0))),
        Setting("noise.b_crit", tuple(f"{b_crit * f:.6g}" for f in (0.3, 3.0))),
        Setting("objective", ("balanced", "min_time", "min_cost", "min_flops")),
    ]


@pytest.mark.parametrize("name", list(PLANS))
def test_infeasible_rows_are_diagnosed_by_the_kernel_as_by_solve(name, tmp_path, monkeypatch):
    """A row with no feasible configuration on any pair is answered by the kernel (the layout
    solve() diagnoses, the least conflicting in the search's order, and its binding limits),
    equal to solve() row by row: the diagnosed layout, GPUs and binding names vary over the grid."""
    monkeypatch.setenv("BUDGETDSL_SWEEP_SCALAR", "0")
    source, settings = _infeasible_grid(PLANS[name], tmp_path)
    kernel, scalar = sweep(source, settings, full=False), sweep(source, settings, full=True)
    assert differences(kernel, scalar, settings) == []
    infeasible = [k for k, s in zip(kernel, scalar) if s.summary is not None and not s.summary.feasible]
    by_kernel = [k for k in infeasible if k.solution is None]
    assert len(infeasible) >= len(kernel) // 4, "the grid should be mostly infeasible"
    assert len(by_kernel) >= 0.9 * len(infeasible), f"{len(by_kernel)} of {len(infeasible)} diagnosed"
    print(name, len(kernel), "rows", len(infeasible), "infeasible", len(by_kernel), "by the kernel",
          {(k.summary.gpus, k.summary.data_parallel, k.summary.tensor_parallel, k.summary.pipeline_parallel,
            k.summary.zero, k.summary.recompute, k.summary.binding) for k in by_kernel})


def test_rows_where_nothing_fits_are_diagnosed_as_by_solve(tmp_path, monkeypatch):
    """A searched space where not one sequence fits on any pair (70B on 8 H100s: every layout
    names memory, some the deadline too): solve() diagnoses the first layout of the search's walk
    among the least conflicting, which differs with B_crit and the objective (the walk's order);
    the kernel's rows equal solve()'s."""
    monkeypatch.setenv("BUDGETDSL_SWEEP_SCALAR", "0")
    path = tmp_path / "plan.yaml"
    path.write_text("name: nothing-fits\nmodel:\n  params: 70.0e9\n  layers: 80\n  d_model: 8192\n  heads: 64\n"
                    "  seq_len: 4096\nhardware:\n  gpu: H100-SXM5-80GB\n  gpus: 8\ntarget:\n  tokens: 100B\n"
                    "  at_batch: 4Mi\nnoise:\n  b_crit: 4M\n")
    source = read_merged(path)
    settings = [Setting("budget.deadline", ("1 day", "300 days")), Setting("noise.b_crit", ("1M", "4M", "20M")),
                Setting("objective", ("balanced", "min_time", "min_cost", "min_flops"))]
    kernel, scalar = sweep(source, settings, full=False), sweep(source, settings, full=True)
    assert differences(kernel, scalar, settings) == []
    assert all(k.solution is None and not k.summary.feasible for k in kernel)  # every row by the kernel
    assert len({(k.summary.tensor_parallel, k.summary.pipeline_parallel, k.summary.binding) for k in kernel}) > 2


# layouts whose step time is not linear in the batch across accumulation boundaries (ZeRO-3's
# per-micro-batch gathers, ZeRO-2's per-micro-batch reductions on a slow network, a pipeline's
# bubble): the wall-clock objectives' best split lies away from the walk's pick
SPLIT_PLANS = {
    "ZeRO-3, L40S": MINIMAL.replace("  gpu: H100-SXM5-80GB", "  gpu: L40S").replace(
        "  gpus: 64", "  gpus: 32\n  zero: 3\n  tensor_parallel: 1\n  pipeline_parallel: 1\n  recompute: none"),
    "ZeRO-2, slow network": MINIMAL.replace(
        "  gpus: 64", "  gpus: 64\n  zero: 2\n  tensor_parallel: 1\n  pipeline_parallel: 1\n  recompute: none\n"
        "  network: 10 Gb/s"),
    "pipeline 4, ZeRO-1": MINIMAL.replace(
        "  gpus: 64", "  gpus: 64\n  zero: 1\n  tensor_parallel: 1\n  pipeline_parallel: 4\n  recompute: selective"),
    # every layout searched: a few of the 91 pairs (TP·PP = 64, a per-micro-batch collective
    # latency) leave thousands of splits below the pick's wall until the search's first split
    "layout searched, H100": MINIMAL,
    "ZeRO-3, micro-batch pinned": MINIMAL.replace("  gpu: H100-SXM5-80GB", "  gpu: L40S").replace(
        "  gpus: 64", "  gpus: 32\n  zero: 3\n  tensor_parallel: 1\n  pipeline_parallel: 1\n  recompute: none")
    + "run:\n  micro_batch: 3\n",
}


@pytest.mark.parametrize("name", list(SPLIT_PLANS))
def test_wall_clock_splits_are_decided_by_the_kernel_as_by_solve(name, tmp_path, monkeypatch):
    """min_time and min_cost over deadlines, FLOP budgets and two decades of B_crit on layouts
    where the best split is not the walk's: every row equals solve(), and the kernel decides
    nearly all feasible rows itself (its vectorized split search), not solve() row by row."""
    monkeypatch.setenv("BUDGETDSL_SWEEP_SCALAR", "0")
    path = tmp_path / "plan.yaml"
    path.write_text(SPLIT_PLANS[name] + "budget:\n  usd_per_gpu_hour: 1.5\n")
    shutil.copytree(REPO / "plans" / "base", tmp_path / "base")
    source = read_merged(path)
    base = solve(load_merged(source))
    b_crit = base.frontier.b_crit_tokens
    settings = [
        Setting("budget.deadline", tuple(f"{base.wall_clock_s * f:.17g} s" for f in (0.8, 1.0, 2.0, 6.0))),
        Setting("budget.flops", (f"{base.flops * 1.2:.17g}", f"{base.flops * 50:.17g}")),
        Setting("noise.b_crit", tuple(f"{b_crit * 10 ** (k / 4 - 1):.6g}" for k in range(9))),
        Setting("objective", ("min_time", "min_cost")),
    ]
    kernel, scalar = sweep(source, settings, full=False), sweep(source, settings, full=True)
    assert differences(kernel, scalar, settings) == []
    feasible = [k for k, s in zip(kernel, scalar) if s.summary is not None and s.summary.feasible]
    by_kernel = [k for k in feasible if k.solution is None]
    assert len(feasible) >= len(kernel) // 3
    assert len(by_kernel) >= 0.9 * len(feasible), f"{len(by_kernel)} of {len(feasible)} decided by the kernel"


@pytest.mark.parametrize("objective", ["balanced", "min_time", "min_cost", "min_flops"])
def test_a_grid_of_one_objective_equals_solve(objective, tmp_path, monkeypatch):
    """A sweep whose rows all share the plan's own objective (not swept), on a searched layout over
    a GPU range with a price: the kernel's pair bounds are built for that objective alone, and
    every row still equals `solve()` of it."""
    text = PLANS["searched layout, GPU range, price"] + f"objective: {objective}\n"
    source, settings = _grid(text, tmp_path, seed=7)
    settings = [s for s in settings if s.path != "objective"]
    monkeypatch.setenv("BUDGETDSL_SWEEP_SCALAR", "0")
    kernel = sweep(source, settings, full=False)
    assert differences(kernel, sweep(source, settings, full=True), settings) == []
