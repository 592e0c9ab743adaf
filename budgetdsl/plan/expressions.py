"""A whitelist evaluator for the small arithmetic a plan value may hold (`21 days`, `20 * model.params`).

Plan files are untrusted, so nothing here calls `eval`, `ast` or `sympify`: a hand-written tokenizer
and a recursive-descent parser over a closed grammar (`_Parser`), evaluated in floats with
dimensions. References to other fields are resolved by the caller, which sees the whole plan and
detects cycles. Text length, nesting depth and every intermediate (finite floats only: `10**10**10`
is an overflow error, not a hang) are bounded.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable
from dataclasses import dataclass

from budgetdsl.plan.diagnostics import did_you_mean
from budgetdsl.plan.yaml_source import excerpt
from budgetdsl.quantities.units import DIMENSIONLESS, UNITS, Dim, dim_name

MAX_LENGTH = 500  # characters of one expression
MAX_DEPTH = 40  # nesting of parentheses and unary operators


class ExpressionError(ValueError):
    """A malformed or unevaluable expression; `column` is 0-based within the expression text."""

    def __init__(self, message: str, column: int = 0, hint: str | None = None, code: str = "expression"):
        super().__init__(message)
        self.message = message
        self.column = column
        self.hint = hint
        self.code = code


@dataclass(frozen=True, slots=True)
class Quantity:
    """A value in base units (s, byte, FLOP) with its dimension."""

    value: float
    dim: Dim = DIMENSIONLESS


Resolver = Callable[[str, int], Quantity]  # (dotted path, column) -> value of that field

_TOKEN = re.compile(
    r"""
    (?P<ws>\s+)
  | (?P<number>(?:[0-9]+(?:_[0-9]+)*(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?)
  | (?P<ref>[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)+)
  | (?P<word>[A-Za-z]+|%)
  | (?P<op>\*\*|[-+*/^()])
    """,
    re.VERBOSE,
)


@dataclass(frozen=True, slots=True)
class _Tok:
    kind: str  # number | ref | word | op | end
    text: str
    col: int


@functools.lru_cache(maxsize=4096)  # a sweep evaluates the same texts for every variant
def _tokenize(text: str) -> tuple[_Tok, ...]:
    tokens: list[_Tok] = []
    pos = 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None and text[pos].isdigit():  # ASCII only: `৪` (Bengali 4) reads as an 8
            raise ExpressionError(f"the digit {excerpt(text[pos])} is not an ASCII digit", pos,
                                  "write numbers with the digits 0-9, so that the value reads as "
                                  "it is computed")
        if m is None:
            raise ExpressionError(f"unexpected character {excerpt(text[pos])}", pos,
                                  "a value may use numbers, units, + - * / ^ ( ) and references "
                                  "to other fields such as model.params")
        kind = m.lastgroup or ""
        if kind != "ws":
            tokens.append(_Tok(kind, m.group(), pos))
        pos = m.end()
    tokens.append(_Tok("end", "", len(text)))
    return tuple(tokens)


def _finite(value: float, col: int) -> float:
    if math.isnan(value):
        raise ExpressionError("the result is not a number (NaN)", col)
    if math.isinf(value):
        raise ExpressionError("the result is too large to represent", col, code="overflow")
    return value


class _Parser:
    """Recursive descent over this grammar; a REF is a dotted path to another field (`model.params`).

        expr    := term (('+' | '-') term)*
        term    := unary (('*' | '/') unary)*
        unary   := ('-' | '+') unary | power
        power   := primary (('^' | '**') unary)?          # right-associative
        primary := quantity | UNIT | REF | '(' expr ')'
        quantity:= NUMBER UNIT? (NUMBER UNIT)*             # `21 days`, `1d12h`, `4M`, `30%`
    """

    def __init__(self, text: str, resolve: Resolver | None):
        self.text = text
        self.tokens = _tokenize(text)
        self.i = 0
        self.depth = 0
        self.resolve = resolve

    # -- helpers --------------------------------------------------------------------------
    @property
    def tok(self) -> _Tok:
        return self.tokens[self.i]

    def take(self) -> _Tok:
        t = self.tokens[self.i]
        self.i += 1
        return t

    def is_op(self, *ops: str) -> bool:
        return self.tok.kind == "op" and self.tok.text in ops

    def enter(self, col: int) -> None:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise ExpressionError(f"expression nested deeper than {MAX_DEPTH} levels", col,
                                  code="too-deep")

    # -- grammar --------------------------------------------------------------------------
    def parse(self) -> Quantity:
        if self.tok.kind == "end":
            raise ExpressionError("empty value", 0, "write a number, e.g. 4M or 21 days")
        q = self.expr()
        if self.tok.kind != "end":
            raise ExpressionError(f"unexpected {excerpt(self.tok.text)}", self.tok.col,
                                  "an operator (+ - * / ^) is missing, or a unit is misspelled")
        return q

    def expr(self) -> Quantity:
        left = self.term()
        while self.is_op("+", "-"):
            op = self.take()
            right = self.term()
            left = _add(left, right, op.text == "-", op.col)
        return left

    def term(self) -> Quantity:
        left = self.unary()
        while self.is_op("*", "/"):
            op = self.take()
            right = self.unary()
            if op.text == "*":
                left = Quantity(_finite(left.value * right.value, op.col), _dim_add(left.dim, right.dim))
            else:
                if right.value == 0:
                    raise ExpressionError("division by zero", op.col)
                left = Quantity(_finite(left.value / right.value, op.col), _dim_sub(left.dim, right.dim))
        return left

    def unary(self) -> Quantity:
        if self.is_op("-", "+"):
            op = self.take()
            self.enter(op.col)
            q = self.unary()
            self.depth -= 1
            return Quantity(-q.value, q.dim) if op.text == "-" else q
        return self.power()

    def power(self) -> Quantity:
        base = self.primary()
        if self.is_op("^", "**"):
            op = self.take()
            self.enter(op.col)
            exp = self.unary()
            self.depth -= 1
            if exp.dim != DIMENSIONLESS:
                raise ExpressionError("an exponent must be a plain number", op.col)
            if base.dim != DIMENSIONLESS and exp.value != int(exp.value):
                raise ExpressionError("a quantity with a unit takes only whole exponents", op.col)
            if base.value < 0 and exp.value != int(exp.value):
                raise ExpressionError("a negative number to a fractional power", op.col)
            try:
                value = math.pow(base.value, exp.value)
            except OverflowError:
                raise ExpressionError("the result is too large to represent", op.col,
                                      code="overflow") from None
            except ValueError:
                raise ExpressionError("the power is undefined (0 to a negative power?)", op.col) from None
            dim = tuple(int(e * exp.value) for e in base.dim)
            return Quantity(_finite(value, op.col), dim)  # type: ignore[arg-type]
        return base

    def primary(self) -> Quantity:
        t = self.tok
        if t.kind == "number":
            return self.quantity()
        if t.kind == "word":
            self.take()
            return _unit(t)
        if t.kind == "ref":
            self.take()
            if self.resolve is None:
                raise ExpressionError(f"references such as {excerpt(t.text, 60)} are not allowed here", t.col)
            return self.resolve(t.text, t.col)
        if self.is_op("("):
            self.take()
            self.enter(t.col)
            q = self.expr()
            self.depth -= 1
            if not self.is_op(")"):
                raise ExpressionError("missing ')'", self.tok.col, f"to close the '(' at column {t.col + 1}")
            self.take()
            return q
        if t.kind == "end":
            raise ExpressionError("the value ends where a number was expected", t.col)
        raise ExpressionError(f"unexpected {excerpt(t.text)}", t.col)

    def quantity(self) -> Quantity:
        """NUMBER UNIT? and, for compound durations such as `1d12h` or `1 d 12 h`, more pairs."""
        total: Quantity | None = None
        while self.tok.kind == "number":
            num = self.take()
            value = _finite(float(num.text.replace("_", "")), num.col)
            q = Quantity(value)
            if self.tok.kind == "word":
                unit = _unit(self.take())
                q = Quantity(_finite(value * unit.value, num.col), unit.dim)
            if total is None:
                total = q
            elif q.dim == DIMENSIONLESS or total.dim == DIMENSIONLESS:
                raise ExpressionError(f"unexpected number {excerpt(num.text)}", num.col,
                                      "an operator (+ - * /) is missing between two numbers")
            else:
                total = _add(total, q, False, num.col)
            if total.dim == DIMENSIONLESS or self.tok.kind != "number":
                break
        assert total is not None
        return total


def _unit(t: _Tok) -> Quantity:
    unit = UNITS.get(t.text)
    if unit is None:
        hint = did_you_mean(t.text, UNITS) or (
            "units include s, min, h, days, weeks, GB, GiB, Gb/s, FLOP, TFLOP/s, k, M, B, T and %")
        raise ExpressionError(f"unknown unit {excerpt(t.text)}", t.col, hint, code="unknown-unit")
    return Quantity(unit.factor, unit.dim)


def _dim_add(a: Dim, b: Dim) -> Dim:
    return (a[0] + b[0], a[1] + b[1], a[2] + b[2])


def _dim_sub(a: Dim, b: Dim) -> Dim:
    return (a[0] - b[0], a[1] - b[1], a[2] - b[2])


def _add(a: Quantity, b: Quantity, subtract: bool, col: int) -> Quantity:
    if a.dim != b.dim:
        raise ExpressionError(f"cannot add {dim_name(a.dim)} and {dim_name(b.dim)}", col,
                              code="dimension")
    value = a.value - b.value if subtract else a.value + b.value
    return Quantity(_finite(value, col), a.dim)


def evaluate(text: str, resolve: Resolver | None = None) -> Quantity:
    """Evaluate one plan value such as `21 days`, `20 * model.params` or `200 Gb/s`."""
    if len(text) > MAX_LENGTH:
        raise ExpressionError(f"value longer than {MAX_LENGTH} characters", MAX_LENGTH, code="too-long")
    return _Parser(text, resolve).parse()
