"""A sweep of a plan that pins its batch (run.batch) or ramps it (run.batch_schedule) answers each
row as `solve()` of that row's plan: the sweep kernel places free batches only, so such rows must
reach the scalar path, and their rows keep the pinned batch."""

from __future__ import annotations

import pytest

pytest.importorskip("numpy")

from budgetdsl.plan.loader import load_merged, read_merged
from budgetdsl.solve.sweep import Setting, sweep
from tests.budgetdsl.test_sweep_kernel import MINIMAL, differences

PINNED = {
    "batch pinned": "run:\n  batch: 2Mi\n",
    "batch pinned, micro-batch pinned": "run:\n  batch: 2Mi\n  micro_batch: 2\n",
    "batch schedule": "run:\n  batch_schedule:\n    - {until: 25%, batch: 512Ki}\n    - {until: 100%, batch: 2Mi}\n",
}


@pytest.mark.parametrize("name", list(PINNED))
def test_a_sweep_keeps_the_pinned_batch_of_every_row(name, tmp_path, monkeypatch):
    path = tmp_path / "plan.yaml"
    path.write_text(MINIMAL + PINNED[name])
    source = read_merged(path)
    settings = [Setting("budget.deadline", ("1 day", "3 days", "1 hour")), Setting("noise.b_crit", ("1M", "4M")),
                Setting("objective", ("min_time", "min_cost"))]
    monkeypatch.setenv("BUDGETDSL_SWEEP_SCALAR", "0")  # the kernel whatever the grid's size
    kernel = sweep(source, settings, full=False)
    monkeypatch.delenv("BUDGETDSL_SWEEP_SCALAR")
    scalar = sweep(source, settings, full=True)
    assert differences(kernel, scalar, settings) == []
    batch = load_merged(source).run
    pinned = [r.summary for r in kernel if r.summary is not None and r.summary.feasible]
    assert pinned
    if batch.batch is not None:
        assert {s.batch_tokens for s in pinned} == {batch.batch}


def test_a_sweep_of_the_money_budget_and_the_price_together_answers_as_solve(tmp_path, monkeypatch):
    """budget.usd needs budget.usd_per_gpu_hour (a rule between the two): swept together, every
    combination is the plan `solve()` gets, whichever path the sweep takes."""
    path = tmp_path / "plan.yaml"
    path.write_text(MINIMAL + "budget:\n  usd_per_gpu_hour: 2.5\n  usd: 40000\n")
    source = read_merged(path)
    settings = [Setting("budget.usd", ("20000", "40000", "10")), Setting("budget.usd_per_gpu_hour", ("1", "2.5"))]
    monkeypatch.setenv("BUDGETDSL_SWEEP_SCALAR", "0")
    kernel = sweep(source, settings, full=False)
    monkeypatch.delenv("BUDGETDSL_SWEEP_SCALAR")
    scalar = sweep(source, settings, full=True)
    assert differences(kernel, scalar, settings) == []
    assert {r.summary.feasible for r in scalar if r.summary is not None} == {True, False}


def test_a_swept_value_that_reads_another_swept_path_takes_that_rows_value(tmp_path, monkeypatch):
    """`--set budget.gpu_hours='budget.deadline / 1 h * 0.3'` beside swept deadlines: each row's
    GPU-hour limit follows that row's deadline, not the file's (the kernel hands such sweeps to the
    scalar path); with the file's 30 days every row would be feasible."""
    path = tmp_path / "plan.yaml"
    path.write_text(MINIMAL + "budget:\n  deadline: 30 days\n")
    source = read_merged(path)
    settings = [Setting("budget.deadline", ("1 day", "1000 days")),
                Setting("budget.gpu_hours", ("budget.deadline / 1 h * 0.3",))]
    monkeypatch.setenv("BUDGETDSL_SWEEP_SCALAR", "0")
    kernel = sweep(source, settings, full=False)
    monkeypatch.delenv("BUDGETDSL_SWEEP_SCALAR")
    scalar = sweep(source, settings, full=True)
    assert differences(kernel, scalar, settings) == []
    assert [r.summary.feasible for r in kernel] == [False, True]
