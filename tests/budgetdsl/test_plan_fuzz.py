"""Property: any text given as a plan ends in a Plan or in located diagnostics — never a traceback,
never a hang — and a Plan solves (or says, located, why not). Thousands of generated and mutated
plan texts go through the real loader and solver."""

import pathlib

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from budgetdsl.plan.diagnostics import PlanError
from budgetdsl.plan.loader import load_plan
from budgetdsl.plan.model import Plan
from budgetdsl.solve.solver import solve

REPO = pathlib.Path(__file__).resolve().parents[2]
SEED = (REPO / "plans" / "llama2-7b.yaml").read_text()
PLANS = REPO / "plans"

KEYS = ["name", "model", "hardware", "budget", "target", "noise", "run", "objective", "optimizer",
        "params", "layers", "d_model", "heads", "seq_len", "gpus", "gpu", "mfu", "network", "zero",
        "deadline", "flops", "tokens", "at_batch", "min_tokens", "b_crit", "kaplan_loss",
        "uncertainty", "batch", "micro_batch", "lr", "min", "max", "step", "extends", "launch",
        "batch_schedule", "until", "ramp_stages", "ramp_x", "memory_reserve", "intra_node_network",
        "calibration", "at_loss", "source", "extrapolate", "image", "command", "env"]
VALUES = ["4M", "21 days", "80 GiB", "200 Gb/s", "1.2e23", "30%", "20 * model.params", "2^10",
          "-1", "0", "1e400", "balanced", "A100-SXM4-80GB", "((1)", "model.params * budget.flops",
          "base/a100-cluster.yaml", "../llama2-7b.yaml", "llama2-7b.yaml", "10**10**10", "*", "",
          "auto", "sweep", "25%", "../tests/fixtures/calibration/sweep-gpt-micro-stdlib.json",
          "/etc/passwd", "../../../../etc/shadow.json"]


def check(text: str) -> None:
    try:
        plan = load_plan(PLANS / "fuzzed.yaml", text=text)
    except PlanError as exc:
        assert exc.diagnostics
        for d in exc.diagnostics:
            assert d.location.file and d.code and d.message
            assert d.location.line >= 0 and d.location.col >= 0
    else:
        assert isinstance(plan, Plan)
        try:  # and a plan that loads solves, or says (located) why its input cannot be solved
            solve(plan)
        except PlanError as exc:
            assert exc.diagnostics


mutation = st.tuples(st.sampled_from(["insert", "delete", "replace", "dup-line", "drop-line"]),
                     st.integers(0, 10_000), st.text(alphabet=" :-{}[],#&*!|>'\"\n\t0123456789abcxyz%.^",
                                                      min_size=1, max_size=4))


def mutate(text: str, edits) -> str:
    for kind, pos, chunk in edits:
        lines = text.split("\n")
        i = pos % (len(text) + 1)
        if kind == "insert":
            text = text[:i] + chunk + text[i:]
        elif kind == "delete":
            text = text[:i] + text[i + len(chunk):]
        elif kind == "replace":
            text = text[:i] + chunk + text[i + len(chunk):]
        elif kind == "dup-line":
            j = pos % len(lines)
            text = "\n".join(lines[: j + 1] + [lines[j]] + lines[j + 1:])
        else:
            j = pos % len(lines)
            text = "\n".join(lines[:j] + lines[j + 1:])
    return text


# The fuzzing budget of this file lies where an example is cheap: a mutated plan costs ~3.5 ms (a
# generated document ~18 ms, mostly hypothesis drawing the nested tree), and mutations reach the
# located errors generated documents reach only by chance — 2,000 of them gave 13 diagnostic codes
# (expression 56 times, out-of-range 9, unknown-unit 3, overflow 2) and 503 plans that loaded and
# were solved. Hence 3,000 mutations and 1,000 generated documents (was 2,000 each; issue 11 item 7).
@settings(max_examples=3000, deadline=2000, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(mutation, min_size=1, max_size=6))
def test_mutated_plans_load_or_fail_located(edits):
    check(mutate(SEED, edits))


leaf = st.one_of(st.sampled_from(VALUES), st.integers(-10, 10**6), st.floats(allow_nan=True),
                 st.booleans(), st.none())
tree = st.recursive(leaf, lambda children: st.one_of(
    st.lists(children, max_size=4), st.dictionaries(st.sampled_from(KEYS), children, max_size=6)),
    max_leaves=30)


# 1,000 documents: the structural errors this test is for (wrong-type, unknown-key, missing-key,
# invalid-choice, plan-rule, extends) came up in every run of 1,000 measured (4 runs); the value-level
# codes come up here only by chance at 1,000 or 2,000 alike (1-3 of them a run) and are reached on
# purpose by the mutations above and by test_expressions. Examples are drawn afresh every run.
@settings(max_examples=1000, deadline=2000, suppress_health_check=[HealthCheck.too_slow])
@given(st.dictionaries(st.sampled_from(KEYS), tree, max_size=10))
def test_generated_documents_load_or_fail_located(doc):
    # libyaml's emitter: the same text as yaml.safe_dump's (checked on 600 generated documents), ~5x faster
    check(yaml.dump(doc, Dumper=getattr(yaml, "CSafeDumper", yaml.SafeDumper)))
