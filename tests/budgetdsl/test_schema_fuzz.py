"""Property: plans generated from budgetdsl.schema.json (tests/budgetdsl/schema_plans.py), most of
them valid, go through load → solve → text/JSON/Markdown → every export and through the CLI entry
with no exception but the project's located PlanError/ExportError, never exit 3, no non-finite
number in JSON, and a feasible answer within every limit of its plan. The mutation fuzzer
(test_fuzz_mutations) gets few plans past the loader; these reach the solver and the exports.
bench/bench_schema_fuzz.py runs the same check over many more plans."""

from collections import Counter

from hypothesis import HealthCheck, given, settings
from schema_plans import check_plan, plans

from budgetdsl.exports import FORMATS

OUTCOMES: Counter = Counter()


# 60 plans: ~10 s on one core; derandomized, so every run checks the same plans.
@settings(max_examples=60, derandomize=True, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(plans())
def _through_the_front_door(tmp_path, doc):
    path = tmp_path / "plan.yaml"
    fmt = sorted(FORMATS)[sum(map(ord, doc["name"])) % len(FORMATS)]
    OUTCOMES[check_plan(doc, path, export_format=fmt)] += 1


def test_schema_plans_reach_every_output_or_fail_located(tmp_path):
    """Every plan passes check_plan; and most get past the loader (the generator's worth)."""
    OUTCOMES.clear()
    _through_the_front_door(tmp_path)
    assert sum(OUTCOMES.values()) == 60
    assert OUTCOMES["invalid"] <= 15, OUTCOMES
    assert OUTCOMES["exported"] >= 20, OUTCOMES
