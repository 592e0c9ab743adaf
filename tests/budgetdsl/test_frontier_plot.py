"""The frontier picture: the curve is the frontier, the arc is what the limits allow, and the SVG
is byte-for-byte reproducible (it is committed next to plans)."""

import pathlib

import pytest

from budgetdsl.frontier_plot import draw, feasible_batches, frontier_curve
from budgetdsl.plan_loader import load_plan
from budgetdsl.solver import solve

REPO = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def solution():
    return solve(load_plan(REPO / "plans/llama2-7b.yaml"))


def test_the_curve_lies_on_the_frontier(solution):
    curve = frontier_curve(solution)
    fr = solution.frontier
    for b, s, e in zip(curve.batch, curve.steps, curve.tokens):
        # (S/S_min - 1)(E/E_min - 1) = 1 (McCandlish et al. 2018)
        assert (s / fr.s_min - 1) * (e / fr.e_min_tokens - 1) == pytest.approx(1.0, rel=1e-9)
    assert min(curve.batch) <= solution.batch.tokens <= max(curve.batch)
    assert min(curve.batch) <= fr.b_crit_tokens <= max(curve.batch)


def test_the_wall_clock_of_the_run_is_on_the_curve(solution):
    """The curve's W(B) at the run's batch equals the solver's wall clock (up to step rounding)."""
    import bisect

    curve = frontier_curve(solution, points=20001)
    i = bisect.bisect_left(curve.batch, solution.batch.tokens)
    assert curve.wall[i] == pytest.approx(solution.wall_clock_s, rel=2e-3)


def test_the_feasible_batches_contain_the_run(solution):
    lo, hi = feasible_batches(solution)
    assert lo <= solution.batch.tokens <= hi
    assert all(c.allowed_batch is None or (c.allowed_batch[0] <= lo and
               (c.allowed_batch[1] is None or hi <= c.allowed_batch[1])) for c in solution.constraints)


def test_svg_is_deterministic_and_png_is_an_image(solution, tmp_path):
    pytest.importorskip("matplotlib")
    a, b, png = tmp_path / "a.svg", tmp_path / "b.svg", tmp_path / "c.png"
    draw(solution, str(a))
    draw(solution, str(b))
    assert a.read_bytes() == b.read_bytes()
    text = a.read_text()
    assert "llama2-7b: feasible" in text and "B_crit = 3M tokens" in text and "deadline" in text
    draw(solution, str(png), axes="tokens-steps")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_pipelined_run_lies_on_its_curve():
    """With a pipeline the curve carries the 1F1B bubble at the launched micro-batch."""
    import bisect

    sol = solve(load_plan(REPO / "plans/gpt3-175b.yaml"))
    assert sol.batch.pipeline_parallel == 16 and sol.batch.tensor_parallel == 8
    curve = frontier_curve(sol, points=20001)
    i = bisect.bisect_left(curve.batch, sol.batch.tokens)
    assert curve.wall[i] == pytest.approx(sol.wall_clock_s, rel=2e-3)
