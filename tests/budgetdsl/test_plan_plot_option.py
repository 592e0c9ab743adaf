"""`budgetdsl plan --plot`: the picture is written, linked from Markdown, and named safely."""

import pathlib

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
    assert [p.name for p in (tmp_path / "out").iterdir()] == ["x-rm--rf-.svg"]
