"""The controls' fields: typed text is the plan language; `+`/`-` step to plan-language text."""

import pytest
from budgetdsl.tui.fields import (
    FIELDS,
    FieldError,
    changes_for,
    next_objective,
    parse,
    shown_text,
    stepped,
)
from budgetdsl.tui.state import WhatIf
from tui_helpers import PLAN

from budgetdsl.solve.solver import solve


@pytest.fixture(scope="module")
def state():
    return WhatIf.load(PLAN)


@pytest.fixture(scope="module")
def solution(state):
    return solve(state.plan)


@pytest.mark.parametrize("key,text,value", [
    ("gpus", "2048", 2048), ("gpus", "2^11", 2048), ("deadline", "14 days", 14 * 86400),
    ("deadline", "36h", 36 * 3600), ("deadline", "1209600", 1209600), ("flops", "1.2e23", 1.2e23),
    ("flops", "120 ZFLOP", 1.2e23), ("batch", "4Mi", 4 * 2**20), ("batch", "1024 * model.seq_len", 4 * 2**20),
    ("b_crit", "3M", 3e6), ("deadline", "", None), ("batch", "  ", None),
])
def test_typed_text_is_the_plan_language(state, key, text, value):
    assert parse(FIELDS[key], text, state.plan) == pytest.approx(value) if value else \
        parse(FIELDS[key], text, state.plan) is None


@pytest.mark.parametrize("key,text,message", [
    ("deadline", "14 GiB", "deadline: expected a duration, got a data size"),
    ("gpus", "10.5", "GPUs must be a whole number, got 10.5"),
    ("gpus", "", "GPUs needs a value"),
    ("flops", "0", "FLOP budget must be greater than 0, got 0"),
    ("flops", "1.2e23 FLOP/s", "FLOP budget: expected a FLOP count, got a FLOP rate"),
    ("deadline", "14 dayz", "deadline: unknown unit 'dayz'"),
    ("batch", "2 * model.nonsense", "batch: 'model.nonsense' is not a numeric value of this plan"),
])
def test_a_bad_value_says_why(state, key, text, message):
    with pytest.raises(FieldError) as err:
        parse(FIELDS[key], text, state.plan)
    assert err.value.message.startswith(message)


def test_the_unknown_unit_error_carries_a_hint(state):
    with pytest.raises(FieldError) as err:
        parse(FIELDS["deadline"], "14 dayz", state.plan)
    assert err.value.hint == "did you mean 'day'?"


def test_gpus_and_batch_step_by_powers_of_two(state, solution):
    assert stepped(FIELDS["gpus"], state, solution, 1) == "2048"
    assert stepped(FIELDS["gpus"], state, solution, -1) == "512"
    assert stepped(FIELDS["batch"], state, solution, 1) == "2048 * model.seq_len"
    assert stepped(FIELDS["batch"], state, solution, -1) == "512 * model.seq_len"
    odd = state.with_changes({"hardware.gpus": 24})
    assert stepped(FIELDS["gpus"], odd, solution, 1) == "32"
    assert stepped(FIELDS["gpus"], odd, solution, -1) == "16"


def test_an_optimized_batch_is_pinned_by_a_step(state, solution):
    free = state.with_changes({"run.batch": None})
    sol = solve(free.plan)
    assert shown_text(FIELDS["batch"], free, sol) == ""
    seqs = sol.batch.sequences
    up = int(stepped(FIELDS["batch"], free, sol, 1).split()[0])
    assert up > seqs and up & (up - 1) == 0


def test_deadline_flops_and_b_crit_steps(state, solution):
    assert stepped(FIELDS["deadline"], state, solution, 1) == "22 days"
    assert stepped(FIELDS["deadline"], state, solution, -1) == "20 days"
    two = state.with_changes({"budget.deadline": "2 days"})
    assert stepped(FIELDS["deadline"], two, solution, -1) == "47 h"
    assert stepped(FIELDS["flops"], state, solution, 1) == "1.5e23"
    assert stepped(FIELDS["flops"], state, solution, -1) == "1e23"
    assert stepped(FIELDS["b_crit"], state, solution, 1) == "4M"
    assert stepped(FIELDS["b_crit"], state, solution, -1) == "2.5M"
    # Every stepped text reads back in the plan language to the stepped value.
    for key in ("deadline", "flops", "b_crit", "batch", "gpus"):
        for d in (1, -1):
            assert parse(FIELDS[key], stepped(FIELDS[key], state, solution, d), state.plan) > 0


def test_no_deadline_steps_from_the_wall_clock(state, solution):
    none = state.with_changes({"budget.deadline": None})
    assert shown_text(FIELDS["deadline"], none, solution) == ""
    assert stepped(FIELDS["deadline"], none, solution, 1) == "8 days"  # 7.55 days, up to a day


def test_changes_map_to_plan_keys(state):
    assert changes_for(FIELDS["gpus"], "2048", state) == {"hardware.gpus": 2048}
    assert changes_for(FIELDS["deadline"], " 14 days ", state) == {"budget.deadline": "14 days"}
    assert changes_for(FIELDS["batch"], "", state) == {"run.batch": None}
    b = changes_for(FIELDS["b_crit"], "4M", state)
    assert b["noise.b_crit"] == "4M" and b["noise.kaplan_loss"] is None and b["noise.calibration"] is None


def test_a_gpu_range_is_fixed_as_min_equal_max(plans):
    path = plans / "ranged.yaml"
    path.write_text((plans / "llama2-7b.yaml").read_text().replace(
        "  gpus: 1024", "  gpus: {min: 512, max: 2048, step: 512}"))
    state = WhatIf.load(path)
    assert changes_for(FIELDS["gpus"], "1024", state) == {"hardware.gpus.min": 1024, "hardware.gpus.max": 1024}
    fixed = state.with_changes(changes_for(FIELDS["gpus"], "1024", state))
    assert solve(fixed.plan).gpus == 1024


def test_objectives_cycle_through_the_solvers_own_list():
    from budgetdsl.solve.objectives import OBJECTIVES

    seen, current = [], "balanced"
    for _ in OBJECTIVES:  # `+` visits every objective the solver knows, once, and comes back
        seen.append(current)
        current = next_objective(current, 1)
    assert seen == list(OBJECTIVES) and current == "balanced"
    assert next_objective("balanced", -1) == OBJECTIVES[-1]
    for name in OBJECTIVES:
        assert next_objective(next_objective(name, 1), -1) == name
