"""The layout & Pareto front box (issue 13): what it shows is the solver's own answer for the plan,
`+`/`-` on GPUs re-search the layout the plan leaves to the solver (and keep what it pins), and
Save writes only the GPU count. Compared against `solve()` of the plan file with that count."""

import difflib

import pytest
from budgetdsl.tui.app import make_app
from budgetdsl.tui.widgets.frontier.canvas import render_plot
from budgetdsl.tui.widgets.frontier.curve import plot_data
from tui_helpers import PLAN, REPO, headless, notifications, ready, shown, type_into

from budgetdsl.plan.loader import load_plan
from budgetdsl.quantities.humanize import human, si
from budgetdsl.solve.solver import solve
from budgetdsl.theory.frontier import Frontier

MINIMAL = REPO / "plans" / "minimal.yaml"  # silent layout: searched


async def settle(pilot) -> None:
    """Until every re-solve (inline or in the worker) is drawn."""
    await pilot.pause()
    await ready(pilot)


def plan_with(path, tmp_path, old: str, new: str):
    """The plan file with one line changed, as a person would write it."""
    text = path.read_text()
    assert old in text
    out = tmp_path / path.name
    out.write_text(text.replace(old, new))
    return out


def layout_of(b) -> str:
    return f"TP {b.tensor_parallel} · PP {b.pipeline_parallel} · ZeRO {b.zero} · recompute {b.recompute}"


def short(o) -> str:
    rc = {"none": ""}.get(o.recompute, " sel" if o.recompute == "selective" else f" {o.recompute}")
    return f"TP{o.tensor_parallel} PP{o.pipeline_parallel} Z{o.zero}{rc}"


def line_with(text: str, *parts: str) -> str:
    """The one line of `text` that holds every part (in order)."""
    def holds(line: str) -> bool:
        at = 0
        for p in parts:
            at = line.find(p, at)
            if at < 0:
                return False
            at += len(p)
        return True

    hits = [line for line in text.splitlines() if holds(line)]
    assert len(hits) == 1, (parts, text)
    return hits[0]


def assert_box_shows(box: str, sol) -> None:
    """The box shows the solution's layout search and front, row by row."""
    b = sol.batch
    assert layout_of(b) in box
    assert f"{sol.gpus:,} GPUs · micro-batch {b.micro_batch}" in box
    ls = sol.layout
    if ls is None:
        assert "layout from the plan: no key searched" in box
    else:
        assert f"({ls.feasible} feasible layouts of {ls.considered}" in " ".join(box.split())
        line_with(box, short(ls.chosen), human("s", ls.chosen.wall_clock_s), "chosen")
        for o in ls.runners_up:
            vs = "dominated" if o.dominated else f"{o.objective_ratio:.3g}×"
            line_with(box, short(o), human("s", o.wall_clock_s), si(o.gpu_hours), vs)
        assert " ".join(ls.reason.split()[:8]) in " ".join(box.split())
    for p in sol.front:
        objectives = " ".join(p.objectives) if len(p.objectives) < 4 else "every objective"
        line = line_with(box, si(p.batch_tokens), f"{p.gpus:,}", human("s", p.wall_clock_s), si(p.gpu_hours),
                         human("FLOP", p.flops).removesuffix(" FLOP"), objectives or "—")
        assert line.lstrip().startswith("●" if p.chosen else "○")
    assert sum(p.chosen for p in sol.front) == 1


@headless
async def test_the_box_shows_the_searched_layout_and_front_and_plus_researches_it(plans):
    path = plans / "minimal.yaml"
    before = path.read_text()
    app = make_app(path)
    async with app.run_test(size=(160, 48)) as pilot:  # wide: the limits and the layout box both
        await pilot.pause()
        expected = solve(load_plan(MINIMAL))
        assert expected.layout is not None and len(expected.front) > 1  # the plan searches its layout
        assert app.solution == expected
        assert_box_shows(shown(app.query_one("#layout")), expected)

        await pilot.press("tab")  # from the plot, where the app opens, into the GPU count
        await pilot.pause()
        assert app.focused.id == "gpus"
        await pilot.press("plus")  # 64 -> 128 GPUs, the layout searched again
        await settle(pilot)
        again = solve(load_plan(plan_with(MINIMAL, plans.parent, "gpus: 64", "gpus: 128")))
        assert app.solution == again and again.layout is not None
        assert_box_shows(shown(app.query_one("#layout")), again)
        assert dict(app.state.changes) == {"hardware.gpus": 128}

        # Far enough that the search picks another layout: the box follows.
        await type_into(pilot, "gpus", "4096")
        await settle(pilot)
        far = solve(load_plan(plan_with(MINIMAL, plans.parent, "gpus: 64", "gpus: 4096")))
        assert layout_of(far.batch) != layout_of(expected.batch)
        assert app.solution == far
        assert_box_shows(shown(app.query_one("#layout")), far)
        await type_into(pilot, "gpus", "128")
        await settle(pilot)

        await pilot.press("ctrl+s")
        await pilot.pause()
        assert "saved 1 value" in notifications(app)[-1]
    # Only the GPU count is written: the searched layout stays the solver's.
    assert [line for line in difflib.unified_diff(before.splitlines(), path.read_text().splitlines(),
                                                  lineterm="", n=0)
            if line[:1] in "+-" and not line.startswith(("+++", "---"))] == ["-  gpus: 64", "+  gpus: 128"]
    assert solve(load_plan(path)) == again


@headless
async def test_a_pinned_key_stays_pinned_when_the_gpus_change(tmp_path):
    path = plan_with(MINIMAL, tmp_path, "  gpus: 64\n", "  gpus: 64\n  tensor_parallel: 2\n")
    app = make_app(path)
    async with app.run_test(size=(160, 48)) as pilot:
        await ready(pilot)
        await pilot.pause()
        await type_into(pilot, "gpus", "4096")
        await settle(pilot)
        (tmp_path / "by-hand").mkdir()
        expected = solve(load_plan(plan_with(path, tmp_path / "by-hand", "gpus: 64", "gpus: 4096")))
        assert app.solution == expected
        assert app.solution.batch.tensor_parallel == 2 and "tensor_parallel" not in app.solution.layout.searched
        assert_box_shows(shown(app.query_one("#layout")), expected)
        assert dict(app.state.changes) == {"hardware.gpus": 4096}


@headless
async def test_a_pinned_plan_shows_its_layout_and_one_point_front_under_f5():
    app = make_app(PLAN)  # llama2-7b declares its MFU: the layout is pinned
    async with app.run_test(size=(100, 40)) as pilot:  # narrow: F5 switches the box under the plot
        await pilot.pause()
        sol = app.solution
        assert sol.layout is None and len(sol.front) == 1
        assert app.query_one("#limits-box").display and not app.query_one("#layout-box").display
        assert app.query_one("#limits-box").border_subtitle == "F5 layout"
        await pilot.press("f5")
        await pilot.pause()
        assert app.query_one("#layout-box").display and not app.query_one("#limits-box").display
        box = shown(app.query_one("#layout"))
        assert_box_shows(box, sol)
        assert "every objective" in box
        await pilot.press("f5")
        await pilot.pause()
        assert app.query_one("#limits-box").display and not app.query_one("#layout-box").display
        await pilot.resize_terminal(160, 40)  # wide: both, and no F5 to name
        await pilot.pause()
        assert app.query_one("#limits-box").display and app.query_one("#layout-box").display
        assert app.query_one("#limits-box").border_subtitle == ""


@headless
async def test_a_slow_solve_moves_to_the_worker_and_only_the_newest_request_is_drawn(plans, monkeypatch):
    import time

    from budgetdsl.tui import app as app_module

    solved = []

    def slow(plan, cache=None):  # a search that takes 0.3 s: the keys come faster than the answers
        time.sleep(0.3)
        solved.append(plan.hardware.gpus)
        return solve(plan, cache)

    path = plans / "minimal.yaml"
    app = make_app(path)
    monkeypatch.setattr(app_module, "solve", slow)
    app.SOLVE_INLINE_S = 0.0  # every re-solve in the worker thread
    async with app.run_test(size=(100, 32)) as pilot:
        await ready(pilot)
        assert solved == [64]  # the plan as loaded, solved in the worker at launch
        solved.clear()
        await pilot.press("tab", "plus", "plus", "plus")  # into the GPU count; 64 -> 512
        assert app.query_one("#gpus").value == "512"  # the control follows the keys at once
        assert "solving…" in shown(app.query_one("#status"))
        await settle(pilot)
        assert solved == [128, 512]  # the one under way when the keys came, then the newest only
        assert app.query_one("#gpus").value == "512"
        assert app.solution == solve(load_plan(plan_with(MINIMAL, plans.parent, "gpus: 64", "gpus: 512")))
        assert "solving" not in shown(app.query_one("#status"))
        assert not [n for n in notifications(app) if "not" in n]


def test_the_fronts_other_points_are_drawn_on_the_frontier():
    plan = load_plan(MINIMAL)
    sol = solve(plan)
    data = plot_data(plan, sol, "steps", "tokens")
    others = [p for p in sol.front if not p.chosen]
    assert len(data.front) == len(others) > 0
    fr = Frontier(sol.frontier.b_crit_tokens, sol.frontier.e_min_tokens)
    for (steps, tokens), p in zip(data.front, others):
        # Each point's steps and tokens sit on S(B), E(B) at its batch (steps rounded up to whole ones).
        assert steps == pytest.approx(fr.steps(p.batch_tokens), rel=1e-3)
        assert tokens == pytest.approx(fr.examples(p.batch_tokens), rel=1e-3)
    wall = plot_data(plan, sol, "wall", "flops")
    assert list(wall.front) == [(p.wall_clock_s, p.flops) for p in others]
    for markers, glyph in (("braille", "○"), ("ascii", "*")):
        picture = render_plot(data, 80, 24, markers).plain
        assert glyph in picture and "Pareto front" in picture
    # A one-point front (llama2-7b: all pinned) is the run itself: no front marks, no legend entry.
    pinned = load_plan(PLAN)
    assert plot_data(pinned, solve(pinned)).front == ()
    assert "Pareto front" not in render_plot(plot_data(pinned, solve(pinned)), 80, 24).plain


@headless
async def test_a_solve_the_solver_refuses_in_the_worker_is_not_applied(plans, monkeypatch):
    from budgetdsl.tui import app as app_module

    from budgetdsl.plan.diagnostics import Diagnostic, Location, PlanError

    def refusing(plan, cache=None):
        if plan.hardware.gpus == 128:
            raise PlanError([Diagnostic(Location("minimal.yaml", 12, 9), "test", "no run on 128 GPUs")])
        return solve(plan, cache)

    monkeypatch.setattr(app_module, "solve", refusing)
    app = make_app(plans / "minimal.yaml")
    app.SOLVE_INLINE_S = 0.0
    async with app.run_test(size=(100, 32)) as pilot:
        await ready(pilot)
        shown_before = app.solution
        await pilot.press("tab", "plus")  # into the GPU count; 64 -> 128
        await settle(pilot)
        assert "no run on 128 GPUs" in notifications(app)[-1]
        gpus = app.query_one("#gpus")
        assert gpus.has_class("error") and gpus.value == "64"  # back to the values shown
        assert app.solution == shown_before and not app.state.dirty
