"""Tick marks for log axes, labelled for people: `10k` `100k` `1M` steps, `1e22` `1e23` FLOPs,
`1h` `1d` `1w` of wall clock. Decades first; 2 and 5 between them when a decade does not fit twice.
"""

from __future__ import annotations

import math

from budgetdsl.humanize import si

_TIME_TICKS = ((1.0, "1s"), (10.0, "10s"), (60.0, "1m"), (600.0, "10m"), (3600.0, "1h"),
               (6 * 3600.0, "6h"), (86400.0, "1d"), (7 * 86400.0, "1w"), (30 * 86400.0, "30d"),
               (365 * 86400.0, "1y"), (3650 * 86400.0, "10y"))


def label(value: float, kind: str) -> str:
    if kind == "flops":
        mant, exp = f"{value:.0e}".split("e")
        return f"{mant}e{int(exp)}"
    return si(value)


def ticks(lo: float, hi: float, kind: str, room: int = 6) -> list[tuple[float, str]]:
    """(value, label) of the ticks within [lo, hi] (lo > 0) on a log axis of `kind` (steps,
    tokens, flops, wall): decades, or with 2 and 5 (and finer) between them while at most `room`
    ticks result; at least two where the range allows."""
    if kind == "wall":
        inside = [(v, t) for v, t in _TIME_TICKS if lo <= v <= hi]
        if len(inside) >= 2:
            return inside
    best: list[tuple[float, str]] = []
    for mantissas in ((1.0,), (1.0, 3.0), (1.0, 2.0, 5.0), (1.0, 1.5, 2.0, 3.0, 5.0, 7.0)):
        out = []
        for k in range(math.floor(math.log10(lo)), math.ceil(math.log10(hi)) + 1):
            for m in mantissas:
                v = m * 10.0 ** k
                if lo <= v <= hi:
                    out.append((v, _time_label(v) if kind == "wall" else label(v, kind)))
        if len(out) > max(room, 2) and len(best) >= 2:
            break
        best = out
        if len(out) >= room:
            break
    return best


def _time_label(seconds: float) -> str:
    for unit, f in (("y", 365 * 86400.0), ("d", 86400.0), ("h", 3600.0), ("m", 60.0)):
        if seconds >= f:
            return f"{seconds / f:.2g}{unit}"
    return f"{seconds:.2g}s"
