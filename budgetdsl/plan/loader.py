"""Load a plan file: resolve `extends`, evaluate values, validate, and locate every problem.

    load_plan(path) -> LoadedPlan      raises PlanError with every diagnostic of the file

The steps, each reporting all of its problems before giving up:
1. read each file of the `extends` chain (`yaml_source`), detect cycles, deep-merge mappings
   (this file's keys win), keeping for every path the file and position that set it;
2. evaluate every quantity field (`expressions`) against the merged document, so a value in a
   base plan may refer to a field the child sets (late binding), with reference cycles reported;
3. validate with the pydantic models (`plan_model`) and map each error's `loc` back to the file,
   line and column of the value (closest ancestor as fallback; a missing key points at its parent),
   rewriting messages by pydantic's error type, never by its message text.

One module per step: `plan_source` (1), `plan_values` (2), `plan_errors` (3); `plan_schema`
answers what the models say stands at a path. This module is the front door. The plan it returns
carries what loading resolved (`LoadedPlan`: the merged source, the noise source as read), so
solving needs nothing else and reads no file.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from pydantic import ConfigDict, Field, InstanceOf, ValidationError

from budgetdsl.plan.diagnostics import Diagnostic, PlanError
from budgetdsl.plan.model import Plan
from budgetdsl.plan.noise import ResolvedNoise, resolve_noise
from budgetdsl.plan.schema import field_info, field_spec, numeric_paths
from budgetdsl.plan.source import FRAGMENT_KEY, MergedSource, is_fragment, read_merged
from budgetdsl.plan.values import evaluate_document
from budgetdsl.plan.yaml_source import read_bytes

__all__ = ["LoadedPlan", "MergedSource", "check_fragment", "field_info", "field_spec", "is_fragment",
           "load_merged", "load_plan", "numeric_paths", "read_merged"]


class LoadedPlan(Plan):
    """A plan as the loader built it, with what loading resolved as declared fields, set when it is
    built (`loaded`) and never written in a plan file (left out of dumps; the schema is `Plan`'s):
    `source`, where every value was written (located errors, the calibration's path, an export's
    files); `resolved_noise`, the noise source as read then (`noise.resolve_noise`), so that
    `solve` reads no file. A copy (`model_copy`) keeps both."""

    # built only by `loaded` (model_construct): no validator is needed, so none is built at import
    # unless something validates or serializes one (pydantic's defer_build)
    model_config = ConfigDict(defer_build=True)

    source: InstanceOf[MergedSource] = Field(exclude=True, repr=False)
    resolved_noise: InstanceOf[ResolvedNoise] | None = Field(None, exclude=True, repr=False)

    def __hash__(self) -> int:  # the plan's own fields: the source holds dicts
        return hash(tuple(getattr(self, name) for name in Plan.model_fields))


def loaded(plan: Plan, source: MergedSource, noise: ResolvedNoise | None) -> LoadedPlan:
    """`plan` as a `LoadedPlan` with `source` and `noise` (validated already: nothing is checked again)."""
    fields = {name: getattr(plan, name) for name in Plan.model_fields}
    return LoadedPlan.model_construct(plan.model_fields_set, source=source, resolved_noise=noise, **fields)


def load_merged(source: MergedSource) -> LoadedPlan:
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
    located = loaded(plan, source, None)  # the calibration's path and errors resolve against the files
    return loaded(plan, source, resolve_noise(located))  # the calibration is read here, once


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
              opener: Callable[[str], bytes] = read_bytes, root: str | os.PathLike[str] | None = None) -> LoadedPlan:
    """Load, evaluate and validate a plan file; raise PlanError with every problem found.

    `text`, `opener` and `root` (the directory `extends` must stay in) are as for `read_merged`."""
    return load_merged(read_merged(path, text, opener, root))
