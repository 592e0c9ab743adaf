"""The sweep's up-front estimate counts every row's own search space (issue 23): a sweep whose
first row is tiny and a later row searches thousands of layout × GPU-count pairs is refused before
any row is solved, not estimated at the first row's size and then run for hours."""

import pathlib

import pytest

from budgetdsl.cli import main
from budgetdsl.plan.loader import load_plan, read_merged
from budgetdsl.solve.search_space import search_space
from budgetdsl.solve.sweep import SLOW_SECONDS, estimate, parse_setting

PLANS = pathlib.Path(__file__).resolve().parents[2] / "plans"


@pytest.fixture
def searched(tmp_path) -> pathlib.Path:
    """plans/7b-h100-choose-gpus.yaml with every layout key searched on 8–2,048 GPUs (~16,000 pairs)."""
    text = (PLANS / "7b-h100-choose-gpus.yaml").read_text()
    assert "  mfu: 0.40\n" in text and "  zero: 1\n" in text and "step: 64}" in text
    path = tmp_path / "searched.yaml"
    path.write_text(text.replace("  mfu: 0.40\n", "").replace("  zero: 1\n", "").replace(
        "gpus: {min: 64, max: 2048, step: 64}", "gpus: {min: 8, max: 2048, step: 8}"))
    return path


@pytest.mark.parametrize("widening", [
    "hardware.gpus.max=16,2048",  # a later row widens the GPU range
    "hardware.tensor_parallel=1,auto",  # a later row searches more layouts
])
def test_a_later_wider_row_sets_the_estimate(searched, widening):
    deadlines = "budget.deadline=" + ",".join(f"{d} d" for d in range(10, 410))  # 400 rows a space
    settings = [parse_setting(widening), parse_setting(deadlines)]
    est = estimate(read_merged(searched), settings, full=True)
    first_row = estimate(read_merged(searched), [parse_setting(widening.split(",")[0]), settings[1]], full=True)
    assert est is not None and first_row is not None
    assert est.rows == 800 and not est.uniform
    assert est.pairs > 2 * first_row.pairs  # the widest row's space, not the first row's
    assert first_row.seconds < SLOW_SECONDS < est.seconds
    # each space weighs by its own rows: half the rows tiny, half wide
    assert est.seconds == pytest.approx(first_row.seconds + 400 * (5e-3 + est.pairs * 1e-4), rel=1e-9)


def test_the_sweep_is_refused_at_its_widest_row_not_its_first(searched, capsys, monkeypatch):
    """Two rows, the first a 16-GPU range: counted at the 2,048-GPU row, past the limit (lowered
    here so that today's limit is not needed to show it), refused with nothing solved."""
    monkeypatch.setattr("budgetdsl.solve.sweep.SLOW_SECONDS", 1.0)
    assert main(["sweep", str(searched), "--set", "hardware.gpus.max=16,2048", "--format", "csv"]) == 2
    out = capsys.readouterr()
    assert out.out == "" and "too-slow" in out.err
    assert f"2 rows × up to {len(search_space(load_plan(searched)).pairs):,} layout" in out.err, out.err


def test_a_sweep_of_limits_counts_its_one_space_once(searched):
    """Settings outside model and hardware leave the space as it is: one space, every row alike."""
    est = estimate(read_merged(searched), [parse_setting("budget.deadline=10 d,20 d,30 d")], full=True)
    assert est is not None and est.uniform and est.pairs == len(search_space(load_plan(searched)).pairs)


def test_a_row_whose_plan_does_not_load_costs_a_row_only(searched):
    """A row whose plan is refused is reported, not solved: it costs the row's own time and no
    pairs, so a sweep of such rows beside valid ones is estimated by the valid ones' spaces."""
    deadlines = parse_setting("budget.deadline=" + ",".join(f"{d} d" for d in range(10, 410)))
    both = estimate(read_merged(searched), [parse_setting("hardware.gpus.max=0,2048"), deadlines], full=True)
    valid = estimate(read_merged(searched), [parse_setting("hardware.gpus.max=2048"), deadlines], full=True)
    assert both is not None and valid is not None and both.rows == 800 and not both.uniform
    assert both.seconds == pytest.approx(valid.seconds + 400 * 5e-3, rel=1e-9)
