"""The frontier picture: the curve is the frontier, the arc is what the limits allow, and the SVG
is byte-for-byte reproducible (it is committed next to plans)."""

import math
import pathlib

import pytest

from budgetdsl.plan.loader import load_plan
from budgetdsl.report.frontier_plot import draw, feasible_batches, frontier_curve
from budgetdsl.solve.solver import solve

REPO = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def solution():
    return solve(load_plan(REPO / "plans/llama2-7b.yaml"))


def test_the_curve_lies_on_the_frontier(solution):
    curve = frontier_curve(solution)
    fr = solution.frontier
    for s, e in zip(curve.steps, curve.tokens):
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


def _tick_labels(svg: str, axis: str) -> list[str]:
    """The labels matplotlib wrote for the `axis` ('x' or 'y') ticks, in order: each label's text
    is kept as a comment in the tick's group."""
    import re

    labels = []
    for chunk in svg.split(f'<g id="{axis}tick_')[1:]:
        chunk = chunk.split("\n    </g>")[0]  # the tick's group, up to its closing tag
        found = re.search(r'<g id="text_\d+">\s*<!-- (.*?) -->', chunk)
        if found:
            labels.append(found.group(1))
    return labels


def _number(label: str) -> float:
    """A tick label read back: 20, 0.5, 4e22, 500k, 2M, 1T."""
    scale = {"k": 1e3, "M": 1e6, "B": 1e9, "T": 1e12}
    return float(label[:-1]) * scale[label[-1]] if label[-1] in scale else float(label)


@pytest.mark.parametrize("plan,axes", [("llama2-7b", "flops-wallclock"), ("7b-h100-choose-gpus", "flops-wallclock"),
                                       ("7b-h100-choose-gpus", "tokens-steps")])
def test_log_axes_are_labelled_with_plain_numbers(plan, axes, tmp_path):
    """Days read 5, 7, 10, 20, 30 (not matplotlib's 2 × 10¹); tokens 500k, 1T; FLOPs 5e22."""
    pytest.importorskip("matplotlib")
    out = tmp_path / "f.svg"
    draw(solve(load_plan(REPO / f"plans/{plan}.yaml")), str(out), axes=axes)
    svg = out.read_text()
    assert "times" not in svg and "mathdefault" not in svg
    for axis in "xy":
        labels = _tick_labels(svg, axis)
        assert len(labels) >= 3, (axis, labels)
        values = [_number(t) for t in labels]
        assert values == sorted(values) and len(set(values)) == len(values)
        for v in values:  # 1, 2, 3, 5 or 7 times a power of ten
            assert round(v / 10 ** math.floor(math.log10(v)), 6) in (1, 2, 3, 5, 7), labels
    if axes == "flops-wallclock":
        days = [_number(t) for t in _tick_labels(svg, "y")]
        assert 20 in days and 30 in days  # both plans span 20-30 days: the 2 × 10¹, 3 × 10¹
        assert all(t.isdigit() for t in _tick_labels(svg, "y"))


def test_the_title_says_pinned_for_a_pinned_run_and_the_legend_says_what_x_is(tmp_path):
    pytest.importorskip("matplotlib")
    pinned = solve(load_plan(REPO / "plans/llama2-7b.yaml"))  # run.batch fixed
    chosen = solve(load_plan(REPO / "plans/7b-h100-choose-gpus.yaml"))  # the objective's batch
    assert pinned.status == "pinned" and chosen.status == "optimal"
    a, b = tmp_path / "a.svg", tmp_path / "b.svg"
    draw(pinned, str(a))
    draw(chosen, str(b))
    assert "<!-- llama2-7b: feasible (pinned run) -->" in a.read_text()
    assert "balanced" not in a.read_text()
    assert f"<!-- 7b-h100-choose-gpus: feasible ({chosen.objective}) -->" in b.read_text()
    for svg in (a.read_text(), b.read_text()):
        assert "x = B/B_crit = " in svg and "(x = 1)" in svg


def test_the_sweep_plot_is_labelled_with_plain_numbers(tmp_path):
    """The sweep picture of the committed calibration: tokens 500k, 1M; steps 100, 200."""
    pytest.importorskip("matplotlib")
    from budgetdsl.plan.calibration_file import load_calibration
    from budgetdsl.report.sweep_plot import draw as draw_sweep

    cal = load_calibration(REPO / "tests/fixtures/calibration/sweep-gpt-micro-stdlib.json")
    out = tmp_path / "s.svg"
    draw_sweep(cal.sweep, str(out))
    svg = out.read_text()
    assert "times" not in svg and "mathdefault" not in svg
    assert {"500k", "1M"} <= set(_tick_labels(svg, "x"))
    assert {"100", "200"} <= set(_tick_labels(svg, "y"))


def test_the_docs_pictures_say_what_the_tool_draws_now(tmp_path):
    """docs/frontier-7b-h100.svg and docs/sweep-gpt-micro.svg carry the words and tick labels a
    fresh drawing has (compared as text, not bytes, so a matplotlib upgrade alone passes).
    Redraw them with `python -m budgetdsl.tui.docs_pictures`."""
    pytest.importorskip("matplotlib")
    import re

    from budgetdsl.plan.calibration_file import load_calibration
    from budgetdsl.report.sweep_plot import draw as draw_sweep

    fresh_frontier, fresh_sweep = tmp_path / "f.svg", tmp_path / "s.svg"
    draw(solve(load_plan(REPO / "plans/7b-h100-choose-gpus.yaml")), str(fresh_frontier))
    draw_sweep(load_calibration(REPO / "tests/fixtures/calibration/sweep-gpt-micro-stdlib.json").sweep,
               str(fresh_sweep))
    for committed, fresh in ((REPO / "docs/frontier-7b-h100.svg", fresh_frontier),
                             (REPO / "docs/sweep-gpt-micro.svg", fresh_sweep)):
        words = [re.findall(r"<!-- (.*?) -->", p.read_text()) for p in (committed, fresh)]
        assert words[0] == words[1], f"{committed.name} is stale: python -m budgetdsl.tui.docs_pictures"
