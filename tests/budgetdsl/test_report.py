"""Rendering: numbers for people, deterministic bytes, golden files (UPDATE_GOLDEN=1 rewrites them)."""

import json
import os
import pathlib

import pytest

from budgetdsl.plan.loader import load_plan
from budgetdsl.quantities.humanize import data, duration, human, si
from budgetdsl.report.text import render, render_json, render_markdown, render_text
from budgetdsl.solve.solver import solve

REPO = pathlib.Path(__file__).resolve().parents[2]
GOLDEN = pathlib.Path(__file__).parent / "golden"


@pytest.mark.parametrize("unit, value, text", [
    ("tokens", 4194304.0, "4.19M tokens"),
    ("tokens", 2e12, "2T tokens"),
    ("tokens", 8.34e11, "834B tokens"),
    ("s", 3.1 * 86400, "3.1 days"),
    ("s", 12.34, "12.3 s"),
    ("s", 5400, "90 min"),
    ("s", 7.5 * 3600, "7.5 h"),
    ("FLOP", 1.2e23, "1.2e23 FLOP"),
    ("B", 80 * 2**30, "80 GiB"),
    ("FLOP/s", 312e12, "312 TFLOP/s"),
    ("B/s", 25e9, "200 Gb/s"),
    ("GPU-h", 184320, "184k GPU-h"),
    ("USD", 478773.9, "$479k"),
    ("1", 0.42, "0.42"),
])
def test_numbers_for_people(unit, value, text):
    assert human(unit, value) == text


def test_helpers():
    assert si(96) == "96" and si(812_000) == "812k"
    assert duration(float("inf")) == "∞" and data(512) == "512 B"
    assert human("tokens", None) == "—"


@pytest.mark.parametrize("value, text", [
    (999_999.99, "1M"), (999.7, "1k"), (-999_999.99, "-1M"), (999_499, "999k"), (1e15 - 1, "1e3T"),
])
def test_a_count_that_rounds_up_takes_the_next_prefix(value, text):
    # 3 significant digits round 999,999.99 to 1.00e6: "1M", never "1e3k"; past T there is no prefix left
    assert si(value) == text


def test_binary_units_print_1000_to_1023_without_an_exponent():
    assert data(1010 * 2**10) == "1010 KiB" and data(1000 * 2**30) == "1000 GiB"
    assert human("FLOP/s", 999.9e12) == "1 PFLOP/s"


def _solution(name):
    return solve(load_plan(REPO / "plans" / name))


@pytest.mark.parametrize("fmt, suffix", [("text", "txt"), ("markdown", "md"), ("json", "json")])
def test_golden(fmt, suffix, monkeypatch):
    monkeypatch.chdir(REPO)  # locations in b_crit sources and notes are relative
    got = render(_solution("llama2-7b.yaml"), fmt)
    path = GOLDEN / f"llama2-7b.{suffix}"
    if os.environ.get("UPDATE_GOLDEN"):
        path.write_text(got, encoding="utf-8")
    assert got == path.read_text(encoding="utf-8"), f"run with UPDATE_GOLDEN=1 to accept: {path}"


@pytest.mark.parametrize("name", sorted(p.name for p in (REPO / "plans").glob("*.yaml")))
def test_every_example_plans_json_is_its_golden(name, monkeypatch):
    """Every example plan's `budgetdsl plan --format json`, byte for byte as committed: the answer a
    pull request's reviewer reads changes only on purpose (UPDATE_GOLDEN=1 rewrites them, and the
    diff of tests/budgetdsl/golden/plans shows what moved)."""
    monkeypatch.chdir(REPO)
    got = render(_solution(name), "json")
    path = GOLDEN / "plans" / f"{pathlib.Path(name).stem}.json"
    if os.environ.get("UPDATE_GOLDEN"):
        path.parent.mkdir(exist_ok=True)
        path.write_text(got, encoding="utf-8")
    assert got == path.read_text(encoding="utf-8"), f"run with UPDATE_GOLDEN=1 to accept: {path}"


def test_deterministic_bytes():
    a, b = _solution("gpt3-175b.yaml"), _solution("gpt3-175b.yaml")
    for fn in (render_text, render_markdown, render_json):
        assert fn(a) == fn(b)


def test_json_has_the_issue_keys():
    doc = json.loads(render_json(_solution("llama2-7b.yaml")))
    for key in ("feasible", "objective", "batch", "steps", "tokens", "flops", "wall_clock_s", "gpu_hours",
                "frontier", "constraints", "relaxations", "assumptions"):
        assert key in doc, key
    assert set(doc["batch"]) >= {"tokens", "sequences", "micro_batch", "grad_accum", "data_parallel"}
    assert set(doc["frontier"]) >= {"b_crit_tokens", "b_crit_source", "s_min", "e_min_tokens", "x",
                                    "s_over_smin", "e_over_emin"}
    for c in doc["constraints"]:
        assert set(c) >= {"name", "limit", "value", "slack", "binding"}
    assert {c["name"] for c in doc["constraints"]} == {"deadline", "flops", "gpu_hours", "usd", "memory",
                                                       "min_batch"}
    assert doc["assumptions"]["flops_per_token"]["origin"] == "derived"


def test_text_shows_the_launch_and_every_limit():
    text = render_text(_solution("llama2-7b.yaml"))
    assert "global batch  4.19M tokens = 1,024 sequences" in text
    for name in ("deadline", "flops", "gpu_hours", "usd", "memory", "min_batch"):
        assert f"\n  {name}" in text


def test_infeasible_rendering_names_conflicts_and_changes():
    from solver_plans import DAY, make_plan

    sol = solve(make_plan(budget={"deadline": 7.5 * DAY, "flops": 1.2e23, "gpu_hours": None}))
    text, md = render_text(sol), render_markdown(sol)
    assert "INFEASIBLE" in text and "Conflicts" in text and "deadline ≥ " in text
    assert md.startswith("### ❌") and "**Relaxations**" in md


def _limit(name="deadline", sense="<=", limit=100.0, value=90.0, binding=False):
    from budgetdsl.solve.solution import Constraint
    slack = None if value is None else (limit - value if sense == "<=" else value - limit)
    return Constraint(name=name, sense=sense, limit=limit, value=value, slack=slack, binding=binding,
                      satisfied=None if value is None else (value <= limit if sense == "<=" else value >= limit),
                      unit="s")


@pytest.mark.parametrize("kw, state, use", [
    # issue 16: "binds" only on the limit; a limit that decided the run with slack says what it capped
    (dict(value=99.5, binding=True), "binds", "100%"),
    (dict(name="memory", limit=80.0, value=59.4, binding=True), "caps micro-batch", "74%"),
    (dict(value=60.0, binding=True), "caps batch", "60%"),
    (dict(value=60.0), "ok", "60%"),
    (dict(value=120.0, binding=True), "VIOLATED", "120%"),
    (dict(value=None), "—", "—"),
    # a lower bound: how far above the minimum, never "400 %"
    (dict(name="min_batch", sense=">=", value=400.0), "ok", "4× min"),
    (dict(name="min_batch", sense=">=", value=100.0, binding=True), "binds", "at min"),
    (dict(name="min_batch", sense=">=", value=50.0), "VIOLATED", "0.5× min"),
])
def test_limit_words_read_right_for_slack_and_lower_bounds(kw, state, use):
    from budgetdsl.report.text import limit_state, limit_use
    c = _limit(**kw)
    assert (limit_state(c), limit_use(c)) == (state, use)


def test_memory_that_caps_the_micro_batch_with_free_memory_does_not_say_binds(tmp_path):
    """The published 7B on 128 GPUs with an 8 GiB reserve declared: micro-batch 1 × 8 accumulation;
    a second sequence (17 GiB of activations) does not fit in the ~16 GiB left, so memory decided the
    micro-batch: it caps it. (The default reserve, 1.3 GiB + 5 % on this layout, leaves room for 2.)"""
    path = tmp_path / "p.yaml"
    path.write_text(f"extends: {REPO / 'plans' / 'llama2-7b.yaml'}\nhardware: {{gpus: 128, memory_reserve: 8 GiB}}\n")
    sol = solve(load_plan(path))
    mem = next(c for c in sol.constraints if c.name == "memory")
    assert mem.binding and mem.slack > 0.1 * mem.limit  # the solver's flag: decided, with slack
    row = next(line for line in render_text(sol).splitlines() if line.strip().startswith("memory"))
    assert row.rstrip().endswith("caps micro-batch") and "binds" not in row
