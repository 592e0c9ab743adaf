"""Numbers for people: 4.19M tokens, 3.1 days, 1.2e23 FLOP, 74.5 GiB, 200 Gb/s.

One place for every human-readable number the tool prints — reports, diffs, sweeps, diagnostics
and the TUI — so that the same value reads the same everywhere. Exact values go to JSON instead.
"""

from __future__ import annotations

import math

from budgetdsl.quantities.units import BANDWIDTH, DATA, FLOP, FLOP_RATE, TIME, Dim

_COUNT = ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "k"))  # tokens, steps: 834B tokens
_SI = ((1e18, "E"), (1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"))  # rates


def significant(v: float, digits: int = 3) -> str:
    """`digits` significant digits, no exponent below 1e6, no '+' in exponents."""
    text = f"{v:.{digits}g}"
    if "e" in text:
        mant, exp = text.split("e")
        text = f"{mant}e{int(exp)}"
    return text


def _rounded(v: float) -> float:
    """|v| as `significant` prints it, so that 999,999.99 picks M ("1M"), not k ("1e3k")."""
    return abs(float(f"{v:.3g}"))


def si(v: float, table: tuple[tuple[float, str], ...] = _COUNT) -> str:
    """4.19M, 2T, 834B, 812k, 96 (counts); with `_SI`, 312T for rates."""
    if not math.isfinite(v):
        return "∞"
    a = _rounded(v)
    for scale, suffix in table:
        if a >= scale:
            return f"{significant(v / scale)}{suffix}"
    return significant(v)


def _with_prefix(v: float, unit: str) -> str:
    """312 TFLOP/s, 134 PFLOP/s."""
    a = _rounded(v)
    for scale, prefix in _SI:
        if a >= scale:
            return f"{significant(v / scale)} {prefix}{unit}"
    return f"{significant(v)} {unit}"


def duration(seconds: float) -> str:
    """12.3 s, 4.2 min, 7.5 h, 3.1 days."""
    if not math.isfinite(seconds):
        return "∞"
    a = abs(seconds)
    if a < 120:
        return f"{significant(seconds)} s"
    if a < 7200:
        return f"{significant(seconds / 60)} min"
    if a < 172800:
        return f"{significant(seconds / 3600)} h"
    return f"{significant(seconds / 86400)} days"


def data(nbytes: float) -> str:
    a = abs(nbytes)
    for scale, suffix in ((2.0**40, "TiB"), (2.0**30, "GiB"), (2.0**20, "MiB"), (2.0**10, "KiB")):
        if a >= scale:
            return f"{_below_1024(nbytes / scale)} {suffix}"
    return f"{_below_1024(nbytes)} B"


def _below_1024(v: float) -> str:
    """Three significant digits, but 1010 rather than 1.01e3 for the binary units' 1000–1023."""
    text = significant(v)
    return f"{v:.0f}" if "e" in text and abs(v) < 1024 else text


def human(unit: str, v: float | None) -> str:
    """A value in its unit, for people."""
    if v is None:
        return "—"
    if unit == "s":
        return duration(v)
    if unit == "B":
        return data(v)
    if unit == "B/sequence":
        return f"{data(v)}/sequence"
    if unit == "B/s":  # network links in gigabits, NVLink-class links in gigabytes
        return f"{significant(v * 8 / 1e9)} Gb/s" if v < 1e11 else f"{significant(v / 1e9)} GB/s"
    if unit == "FLOP":
        return f"{significant(v, 2 if v >= 1e6 else 3)} FLOP"
    if unit == "FLOP/token":
        return f"{significant(v)} FLOP/token"
    if unit == "FLOP/s":
        return _with_prefix(v, "FLOP/s")
    if unit == "tokens":
        return f"{si(v)} tokens"
    if unit == "GPU-h":
        return f"{si(v)} GPU-h"
    if unit == "USD":
        return f"${si(v)}"
    if unit == "GPUs":
        return f"{v:,.0f} GPUs"
    if unit == "sequences":
        return f"{v:,.0f}"
    if unit == "1":
        return significant(v)
    return f"{significant(v)} {unit}"


_UNIT_OF_DIM = {TIME: "s", DATA: "B", BANDWIDTH: "B/s", FLOP: "FLOP", FLOP_RATE: "FLOP/s"}


def quantity(value: float, dim: Dim) -> str:
    """A plan value of dimension `dim` (in base units) for people; counts with a suffix."""
    unit = _UNIT_OF_DIM.get(dim)
    return human(unit, value) if unit else si(value)
