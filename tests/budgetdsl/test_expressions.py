"""The value language: units, arithmetic, references, and its bounds (plans are untrusted)."""

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from budgetdsl.plan.expressions import MAX_DEPTH, ExpressionError, Quantity, evaluate
from budgetdsl.quantities.units import (
    BANDWIDTH,
    DATA,
    DIMENSIONLESS,
    FLOP,
    FLOP_RATE,
    TIME,
)

DAY = 86400.0


@pytest.mark.parametrize(
    "text, value, dim",
    [
        ("21 days", 21 * DAY, TIME),
        ("36h", 36 * 3600.0, TIME),
        ("1d12h", 1.5 * DAY, TIME),
        ("1 d 12 h", 1.5 * DAY, TIME),
        ("90 min", 5400.0, TIME),
        ("2 weeks", 14 * DAY, TIME),
        ("3 * 7 days", 21 * DAY, TIME),
        ("1.2e23", 1.2e23, DIMENSIONLESS),
        ("120 ZFLOP", 1.2e23, FLOP),
        ("312 TFLOP/s", 312e12, FLOP_RATE),
        ("312 TFLOPS", 312e12, FLOP_RATE),
        ("80 GiB", 80 * 2**30, DATA),
        ("80 GB", 80e9, DATA),
        ("200 Gb/s", 25e9, BANDWIDTH),
        ("25 GB/s", 25e9, BANDWIDTH),
        ("400 Gbps", 50e9, BANDWIDTH),
        ("4M", 4e6, DIMENSIONLESS),
        ("4Mi", 4 * 2**20, DIMENSIONLESS),
        ("2T", 2e12, DIMENSIONLESS),
        ("250k", 250e3, DIMENSIONLESS),
        ("7B", 7e9, DIMENSIONLESS),
        ("30%", 0.3, DIMENSIONLESS),
        ("1_000_000", 1e6, DIMENSIONLESS),
        ("2^10", 1024.0, DIMENSIONLESS),
        ("2**3**2", 512.0, DIMENSIONLESS),  # right-associative, as in mathematics
        ("-2^2", -4.0, DIMENSIONLESS),  # unary minus binds looser than the power
        ("(1 + 2) * 3", 9.0, DIMENSIONLESS),
        ("1024 * 4096", 4194304.0, DIMENSIONLESS),
        ("14 days * 1024 / 1h", 14 * 24 * 1024.0, DIMENSIONLESS),  # GPU-hours of 1024 GPUs
    ],
)
def test_values_in_base_units(text, value, dim):
    q = evaluate(text)
    assert q.dim == dim
    assert math.isclose(q.value, value, rel_tol=1e-12)


@pytest.mark.parametrize(
    "text, code, message, column",
    [
        ("21 dayz", "unknown-unit", "unknown unit 'dayz'", 3),
        ("1 day + 2 GB", "dimension", "cannot add a duration and a data size", 6),
        ("10**10**10", "overflow", "the result is too large to represent", 2),
        ("1 / 0", "expression", "division by zero", 2),
        ("(1 + 2", "expression", "missing ')'", 6),
        ("4 5", "expression", "unexpected '5'", 2),
        ("", "expression", "empty value", 0),
        ("2 days ^ 0.5", "expression", "a quantity with a unit takes only whole exponents", 7),
        ("__import__('os')", "expression", "unexpected character '_'", 0),
        ("model.params", "expression", "references such as 'model.params' are not allowed here", 0),
    ],
)
def test_errors_say_what_and_where(text, code, message, column):
    with pytest.raises(ExpressionError) as info:
        evaluate(text)
    assert (info.value.code, info.value.message, info.value.column) == (code, message, column)


def test_nesting_is_bounded():
    deep = "(" * (MAX_DEPTH + 1) + "1" + ")" * (MAX_DEPTH + 1)
    with pytest.raises(ExpressionError, match="nested deeper"):
        evaluate(deep)
    assert evaluate("(" * 10 + "1" + ")" * 10).value == 1.0
    with pytest.raises(ExpressionError, match="nested deeper"):
        evaluate("-" * (MAX_DEPTH + 1) + "1")


def test_length_is_bounded():
    with pytest.raises(ExpressionError, match="longer than"):
        evaluate("1+" * 400 + "1")


def test_references_go_through_the_resolver():
    seen = []

    def resolve(path, col):
        seen.append((path, col))
        return Quantity(6.74e9)

    assert evaluate("20 * model.params", resolve).value == pytest.approx(1.348e11)
    assert seen == [("model.params", 5)]


@settings(max_examples=3000, deadline=None)
@given(st.text(alphabet="0123456789.eE+-*/^()% _abcdhkmsGMTBiKLOPF", max_size=60))
def test_any_text_is_a_value_or_an_expression_error(text):
    """Fuzz: the evaluator never raises anything but ExpressionError, and ends."""
    try:
        q = evaluate(text)
    except ExpressionError as exc:
        assert 0 <= exc.column <= len(text)
    else:
        assert math.isfinite(q.value)
