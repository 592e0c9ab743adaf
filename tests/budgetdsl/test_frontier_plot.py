"""The frontier picture: the hyperbola of tokens against steps with its asymptotes, the limits
where the plan puts them, the run where the solver put it, the Pareto front where the GPU count
was searched; the SVG is byte-for-byte reproducible (it is committed next to plans)."""

import math
import pathlib

import pytest

from budgetdsl.plan.loader import load_plan
from budgetdsl.report.frontier_plot import (
    draw,
    feasible_batches,
    frontier_curve,
    frontier_panel,
    pareto_front,
)
from budgetdsl.solve.solver import solve

REPO = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def solution():
    return solve(load_plan(REPO / "plans/llama2-7b.yaml"))


@pytest.fixture(scope="module")
def searched():
    return solve(load_plan(REPO / "plans/7b-h100-choose-gpus.yaml"))


def test_the_curve_lies_on_the_frontier(solution):
    curve = frontier_curve(solution)
    fr = solution.frontier
    for s, e in zip(curve.steps, curve.tokens):
        # (S/S_min - 1)(E/E_min - 1) = 1 (McCandlish et al. 2018, eq. 2.11)
        assert (s / fr.s_min - 1) * (e / fr.e_min_tokens - 1) == pytest.approx(1.0, rel=1e-9)
    assert min(curve.batch) <= solution.batch.tokens <= max(curve.batch)
    assert min(curve.batch) <= fr.b_crit_tokens <= max(curve.batch)


@pytest.mark.parametrize("plan", ["llama2-7b", "7b-h100-choose-gpus", "gpt3-175b", "minimal"])
def test_the_panel_draws_the_hyperbola_the_limits_and_the_run(plan):
    """Tokens E on x, steps S on y: every point on the hyperbola, the asymptotes at E_min and
    S_min, the FLOP budget at flops/f tokens, the deadline at the steps where it cuts the frontier
    on the chosen GPU count, the run at the solution's (tokens, steps), B_crit at S = 2 S_min."""
    sol = solve(load_plan(REPO / f"plans/{plan}.yaml"))
    fr, f = sol.frontier, sol.assumptions["flops_per_token"].value
    p = frontier_panel(sol)
    for e, s in p.curve:
        assert (s / fr.s_min - 1) * (e / fr.e_min_tokens - 1) == pytest.approx(1.0, rel=1e-9)
        assert e > p.asymptote_x and s > p.asymptote_y
    assert (p.asymptote_x, p.asymptote_y) == pytest.approx((fr.e_min_tokens, fr.s_min))
    assert p.b_crit == pytest.approx((2 * fr.e_min_tokens, 2 * fr.s_min), rel=0.02)  # x = 1
    assert p.run == (sol.tokens, sol.steps)
    budget = sol.constraint("flops")
    assert p.budget_x == (None if budget is None else pytest.approx(budget.limit / f))
    if budget is not None:  # the arc of allowed batches stays left of the budget
        assert all(e <= p.budget_x * (1 + 1e-9) for (e, _), ok in zip(p.curve, p.feasible) if ok)
    deadline = sol.constraint("deadline")
    if deadline is None:
        assert p.deadline_y == []
    else:  # each cut is where the chosen GPU count's wall clock reaches the deadline
        ends = [b for b in deadline.allowed_batch if b is not None and 0 < b < math.inf]
        assert p.deadline_y == pytest.approx([fr.s_min * (1 + fr.b_crit_tokens / b) for b in ends])
        assert all(s >= min(p.deadline_y) * (1 - 1e-9) for (_, s), ok in zip(p.curve, p.feasible) if ok)
    assert any(p.feasible) == sol.feasible


def test_the_flops_wallclock_panel_keeps_the_deadline_and_budget_as_lines(solution):
    p = frontier_panel(solution, "flops-wallclock")
    assert p.budget_x == pytest.approx(solution.constraint("flops").limit)
    assert p.deadline_y == [solution.constraint("deadline").limit / 86400]
    assert p.run == pytest.approx((solution.flops, solution.wall_clock_s / 86400))
    assert p.asymptote_y is None  # the wall clock grows without bound at both ends


def test_the_pareto_front_is_drawn_only_where_the_gpu_count_was_searched(solution, searched):
    assert pareto_front(solution) == []
    front = pareto_front(searched)
    assert len({gpus for *_, gpus, _ in front}) == len(front) > 1
    assert [h for h, *_ in front] == sorted(h for h, *_ in front)
    [chosen] = [p for p in front if p[3]]
    assert chosen[2] == searched.gpus
    assert chosen[:2] == pytest.approx((searched.gpu_hours, searched.wall_clock_s / 86400))
    # along the front, more GPU-hours buy a shorter wall clock
    assert [d for _, d, *_ in front] == sorted((d for _, d, *_ in front), reverse=True)


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


def test_svg_is_deterministic_and_png_is_an_image(solution, searched, tmp_path):
    pytest.importorskip("matplotlib")
    a, b, png = tmp_path / "a.svg", tmp_path / "b.svg", tmp_path / "c.png"
    draw(solution, str(a))
    draw(solution, str(b))
    assert a.read_bytes() == b.read_bytes()
    text = a.read_text()
    assert "llama2-7b: feasible" in text and "B_crit = 3M tokens" in text and "deadline on 1024 GPUs" in text
    assert "S_min = " in text and "E_min = " in text and "FLOP budget" in text
    assert "Pareto front" not in text  # one GPU count: one panel
    draw(searched, str(a))
    draw(searched, str(b))
    assert a.read_bytes() == b.read_bytes()
    assert "Pareto front" in a.read_text() and "this run: 64 GPUs" in a.read_text()
    draw(solution, str(png), axes="flops-wallclock")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_pipelined_run_lies_on_its_curve():
    """With a pipeline the curve carries the 1F1B bubble at the launched micro-batch."""
    import bisect

    sol = solve(load_plan(REPO / "plans/gpt3-175b.yaml"))
    assert sol.batch.pipeline_parallel == 16 and sol.batch.tensor_parallel == 8
    curve = frontier_curve(sol, points=20001)
    i = bisect.bisect_left(curve.batch, sol.batch.tokens)
    assert curve.wall[i] == pytest.approx(sol.wall_clock_s, rel=2e-3)


def _tick_labels(svg: str, axis: str, panel: int = 1) -> list[str]:
    """The labels matplotlib wrote for the `axis` ('x' or 'y') ticks of `panel` (1: the frontier,
    2: the Pareto front), in order: each label's text is kept as a comment in the tick's group."""
    import re

    svg = svg.split('<g id="axes_')[panel]
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


@pytest.mark.parametrize("plan,axes,panel", [("llama2-7b", "flops-wallclock", 1),
                                             ("7b-h100-choose-gpus", "flops-wallclock", 1),
                                             ("7b-h100-choose-gpus", "tokens-steps", 1),
                                             ("7b-h100-choose-gpus", "tokens-steps", 2)])
def test_log_axes_are_labelled_with_plain_numbers(plan, axes, panel, tmp_path):
    """Days read 5, 10, 20 (not matplotlib's 2 × 10¹); tokens 500k, 1T; FLOPs 5e22; GPU-hours 50k."""
    pytest.importorskip("matplotlib")
    out = tmp_path / "f.svg"
    draw(solve(load_plan(REPO / f"plans/{plan}.yaml")), str(out), axes=axes)
    svg = out.read_text()
    assert "times" not in svg and "mathdefault" not in svg
    for axis in "xy":
        labels = _tick_labels(svg, axis, panel)
        assert len(labels) >= 3, (axis, labels)
        values = [_number(t) for t in labels]
        assert values == sorted(values) and len(set(values)) == len(values)
        for v in values:  # 1, 2, 3, 5 or 7 times a power of ten
            assert round(v / 10 ** math.floor(math.log10(v)), 6) in (1, 2, 3, 5, 7), labels
    if axes == "flops-wallclock" or panel == 2:
        days = [_number(t) for t in _tick_labels(svg, "y", panel)]
        assert 20 in days  # both plans' runs take about 20 days: the issue's 2 × 10¹


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
