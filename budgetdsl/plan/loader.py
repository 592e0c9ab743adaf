"""Load a plan file: resolve `extends`, evaluate values, validate, and locate every problem.

    load_plan(path) -> Plan            raises PlanError with every diagnostic of the file

The steps, each reporting all of its problems before giving up:
1. read each file of the `extends` chain (`yaml_source`), detect cycles, deep-merge mappings
   (this file's keys win), keeping for every path the file and position that set it;
2. evaluate every quantity field (`expressions`) against the merged document, so a value in a
   base plan may refer to a field the child sets (late binding), with reference cycles reported;
3. validate with the pydantic models (`plan_model`) and map each error's `loc` back to the file,
   line and column of the value (closest ancestor as fallback; a missing key points at its parent),
   rewriting messages by pydantic's error type, never by its message text.

One module per step: `plan_source` (1), `plan_values` (2), `plan_errors` (3); `plan_schema`
answers what the models say stands at a path. This module is the front door.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from pydantic import ValidationError

from budgetdsl.plan.diagnostics import Diagnostic, PlanError
from budgetdsl.plan.model import Plan
from budgetdsl.plan.schema import field_info, field_spec, numeric_paths
from budgetdsl.plan.source import FRAGMENT_KEY, MergedSource, is_fragment, read_merged
from budgetdsl.plan.values import evaluate_document
from budgetdsl.plan.yaml_source import read_bytes

__all__ = ["MergedSource", "check_fragment", "field_info", "field_spec", "is_fragment", "load_merged",
           "load_plan", "numeric_paths", "read_merged"]


def load_merged(source: MergedSource) -> Plan:
    """Evaluate and validate a merged document; raise PlanError with every problem."""
    if is_fragment(source.data):
        raise PlanError([Diagnostic(source.locate((FRAGMENT_KEY,), key=True), "fragment",
                                    "this file is a base fragment (fragment: true), not a whole plan",
                                    "plan a file that extends it; `budgetdsl check` checks a fragment")])
    data, problems = evaluate_document(source)
    try:
        plan = Plan.model_validate(data)
    except ValidationError as exc:
        from budgetdsl.plan.errors import (
            validation_diagnostics,  # only a plan that fails needs it
        )

        problems.extend(validation_diagnostics(exc, source, data))
        if not problems:  # pragma: no cover - every error maps to a diagnostic
            raise
        raise PlanError(problems) from None
    if problems:
        raise PlanError(problems)
    plan._source = source  # where every value came from (located errors, the calibration's path)
    from budgetdsl.plan.noise import resolve_noise

    plan._noise = resolve_noise(plan)  # the calibration is read here, once: solve() reads no file
    return plan


def check_fragment(source: MergedSource) -> None:
    """Check a base fragment (`fragment: true`, read by `read_merged`) for what it says alone;
    raise PlanError with every problem.

    A fragment needs none of the whole-plan keys, so it is checked for its YAML, its keys, and each
    value it sets (type, unit, range, expressions). A missing key, a reference to a field that it
    does not set, and a rule relating several keys of a section are left to the plans that extend
    it: `budgetdsl check --dependents` checks those whole, merged plans.
    """
    data, problems = evaluate_document(source, partial=True)
    try:
        Plan.model_validate(data)
    except ValidationError as exc:
        from budgetdsl.plan.errors import validation_diagnostics

        problems.extend(validation_diagnostics(exc, source, data, partial=True))
    if problems:
        raise PlanError(problems)


def load_plan(path: str | os.PathLike[str], text: str | None = None,
              opener: Callable[[str], bytes] = read_bytes, root: str | os.PathLike[str] | None = None) -> Plan:
    """Load, evaluate and validate a plan file; raise PlanError with every problem found.

    `text`, `opener` and `root` (the directory `extends` must stay in) are as for `read_merged`."""
    source = read_merged(path, text, opener, root)
    plan = load_merged(source)
    plan._source = source  # where every value came from (for reports, the TUI's save)
    return plan
