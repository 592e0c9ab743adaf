"""The what-if state: changes on top of the files, validated by the plan loader itself."""

import pytest
from budgetdsl.tui.state import WhatIf
from tui_helpers import PLAN

from budgetdsl.plan.diagnostics import PlanError
from budgetdsl.plan.loader import load_plan


def test_changes_build_the_plan_the_file_would_give(plans):
    state = WhatIf.load(plans / "llama2-7b.yaml")
    assert not state.dirty
    what_if = state.with_changes({"hardware.gpus": 512, "budget.deadline": "14 days", "objective": "min_time"})
    assert what_if.dirty and what_if.changed_keys() == ["budget.deadline", "hardware.gpus", "objective"]
    assert what_if.plan.hardware.gpus == 512 and what_if.plan.budget.deadline == 14 * 86400
    assert str(what_if.plan.objective) == "min_time"
    assert state.plan.hardware.gpus == 1024  # the state is immutable
    what_if.save()
    saved = load_plan(plans / "llama2-7b.yaml")
    assert saved.model_dump() == what_if.plan.model_dump()
    assert saved.hardware.model_fields_set == what_if.plan.hardware.model_fields_set


def test_a_change_back_to_the_file_value_is_no_change():
    state = WhatIf.load(PLAN).with_changes({"hardware.gpus": 512})
    back = state.with_changes({"hardware.gpus": 1024})
    assert not back.dirty
    assert not WhatIf.load(PLAN).with_changes({"budget.nonexistent_key": None}).dirty


def test_removing_a_limit_and_unpinning_the_batch():
    state = WhatIf.load(PLAN).with_changes({"budget.flops": None, "run.batch": None})
    assert state.plan.budget.flops is None and state.plan.run.batch is None
    assert state.plan.run.micro_batch == 1


def test_an_invalid_change_raises_the_loaders_diagnostic():
    state = WhatIf.load(PLAN)
    with pytest.raises(PlanError) as err:
        state.with_changes({"hardware.gpus": 1001})
    assert "do not fill whole nodes of 8" in err.value.diagnostics[0].message
    with pytest.raises(PlanError) as err:
        state.with_changes({"budget.deadline": "14 GiB"})
    assert err.value.diagnostics[0].message == "expected a duration, got a data size"


def test_the_plan_keeps_its_source_for_located_errors():
    state = WhatIf.load(PLAN).with_changes({"hardware.gpus": 512})
    assert state.plan.source is not None
    line = next(i for i, text in enumerate(PLAN.read_text().splitlines(), 1) if text.startswith("  gpus:"))
    assert state.plan.source.locate(("hardware", "gpus")).line == line


def test_nothing_to_save_writes_nothing(plans):
    assert WhatIf.load(plans / "llama2-7b.yaml").save() == []
