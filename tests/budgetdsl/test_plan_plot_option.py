"""`budgetdsl plan --plot`: the picture is written, linked from Markdown, and named safely."""

import pathlib
import re

import pytest

from budgetdsl.cli import main

REPO = pathlib.Path(__file__).resolve().parents[2]
pytest.importorskip("matplotlib")


def test_markdown_links_the_picture(tmp_path, capsys):
    out = tmp_path / "frontier.svg"
    assert main(["plan", str(REPO / "plans/llama2-7b.yaml"), "--format", "markdown", "--plot", str(out)]) == 0
    assert out.read_text().startswith("<?xml")
    assert capsys.readouterr().out.rstrip().endswith(f"![frontier of llama2-7b]({out})")


def test_several_plans_need_a_name_placeholder(tmp_path, capsys):
    plans = [str(REPO / "plans/llama2-7b.yaml"), str(REPO / "plans/gpt3-175b.yaml")]
    assert main(["plan", *plans, "--plot", str(tmp_path / "one.svg")]) == 2
    assert "'{name}'" in capsys.readouterr().err
    assert main(["plan", *plans, "--plot", str(tmp_path / "{name}.png")]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["gpt3-175b.png", "llama2-7b.png"]


def test_a_hostile_plan_name_cannot_escape_the_folder(tmp_path):
    (tmp_path / "base").symlink_to(REPO / "plans/base")
    plan = tmp_path / "p.yaml"
    plan.write_text((REPO / "plans/llama2-7b.yaml").read_text().replace(
        "name: llama2-7b", 'name: "../../x/$(rm -rf)"'))
    (tmp_path / "out").mkdir()
    assert main(["plan", str(plan), "--plot", str(tmp_path / "out" / "{name}.svg")]) == 0
    [picture] = [p.name for p in (tmp_path / "out").iterdir()]
    assert re.fullmatch(r"x-rm--rf--[0-9a-f]{8}\.svg", picture)


def _named(tmp_path, file: str, name: str) -> str:
    plan = tmp_path / file
    plan.write_text((REPO / "plans/minimal.yaml").read_text().replace("name: minimal-1b", f"name: {name}"))
    return str(plan)


def test_names_that_sanitize_alike_draw_two_pictures(tmp_path, capsys):
    """`minimal-1b` and `minimal/1b` once both wrote minimal-1b.svg: one Markdown showed the
    other plan's picture."""
    plans = [_named(tmp_path, "a.yaml", "minimal-1b"), _named(tmp_path, "b.yaml", "minimal/1b")]
    out = tmp_path / "out"
    out.mkdir()
    assert main(["plan", *plans, "--format", "markdown", "--plot", str(out / "{name}.svg")]) == 0
    pictures = sorted(p.name for p in out.iterdir())
    assert len(pictures) == 2 and "minimal-1b.svg" in pictures  # a safe name keeps its own
    other = next(p for p in pictures if p != "minimal-1b.svg")
    assert re.fullmatch(r"minimal-1b-[0-9a-f]{8}\.svg", other)
    links = re.findall(r"!\[frontier of (.*?)\]\((.*?)\)", capsys.readouterr().out)
    assert links == [("minimal-1b", str(out / "minimal-1b.svg")), ("minimal/1b", str(out / other))]
    # deterministic: the same name gives the same file in another run
    (tmp_path / "again").mkdir()
    assert main(["plan", plans[1], "--plot", str(tmp_path / "again" / "{name}.svg")]) == 0
    assert [p.name for p in (tmp_path / "again").iterdir()] == [other]


def test_two_plans_of_one_name_do_not_share_a_picture(tmp_path, capsys):
    plans = [_named(tmp_path, "a.yaml", "same"), _named(tmp_path, "b.yaml", "same")]
    out = tmp_path / "out"
    out.mkdir()
    assert main(["plan", *plans, "--format", "markdown", "--plot", str(out / "{name}.svg")]) == 2
    captured = capsys.readouterr()
    assert captured.out.count("![frontier of same]") == 1  # the second plan links no picture
    assert f"{plans[1]}: error[plot]: not drawn: {out / 'same.svg'} holds the picture of {plans[0]}" in captured.err
    assert [p.name for p in out.iterdir()] == ["same.svg"]


def test_the_picture_is_the_frontier_of_tokens_against_steps_by_default(tmp_path):
    """The default axes are the TUI's: tokens E, optimizer steps S, the hyperbola, S_min and E_min;
    `--plot-axes flops-wallclock` still draws FLOPs against wall clock."""
    out, old = tmp_path / "f.svg", tmp_path / "w.svg"
    assert main(["plan", str(REPO / "plans/llama2-7b.yaml"), "--plot", str(out)]) == 0
    svg = out.read_text()
    for words in ("<!-- tokens E -->", "<!-- optimizer steps S -->", "(S/S_min − 1)(E/E_min − 1) = 1",
                  "S_min = ", "E_min = ", "FLOP budget: E ≤ FLOPs/f", "deadline on 1024 GPUs"):
        assert words in svg, words
    assert "Pareto front" not in svg
    assert main(["plan", str(REPO / "plans/llama2-7b.yaml"), "--plot", str(old),
                 "--plot-axes", "flops-wallclock"]) == 0
    assert "<!-- training compute (FLOP) -->" in old.read_text()
    assert "<!-- wall clock (days) -->" in old.read_text()


def test_a_searched_gpu_count_adds_the_pareto_front(tmp_path):
    from budgetdsl.plan.loader import load_plan
    from budgetdsl.solve.solver import solve

    out = tmp_path / "f.svg"
    assert main(["plan", str(REPO / "plans/7b-h100-choose-gpus.yaml"), "--plot", str(out)]) == 0
    svg = out.read_text()
    sol = solve(load_plan(REPO / "plans/7b-h100-choose-gpus.yaml"))
    assert "<!-- GPU-hours -->" in svg and "Pareto front (one point per GPU count)" in svg
    assert f"this run: {sol.gpus} GPUs" in svg
    for p in sol.front:  # every GPU count of the front is labelled at its point
        assert f"<!-- {p.gpus} -->" in svg
