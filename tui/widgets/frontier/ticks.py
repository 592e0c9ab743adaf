"""Tick marks for log axes, labelled for people: `10k` `100k` `1M` steps, `1e22` `1e23` FLOPs,
`1h` `1d` `1w` of wall clock. Decades first; 2 and 5 between them when a decade does not fit twice.
"""

from __future__ import annotations

import math

from budgetdsl.quantities.humanize import si

_M, _H, _D = 60.0, 3600.0, 86400.0
# Wall-clock ticks in human units, sparsest first; `ticks` takes the densest set that fits the
# room (a 5-day to 60-day axis gets 1w, 2w, 30d, 60d rather than only 1w and 30d).
_TIME_TICKS = ((1.0, "1s"), (10.0, "10s"), (_M, "1m"), (10 * _M, "10m"), (_H, "1h"),
               (6 * _H, "6h"), (_D, "1d"), (7 * _D, "1w"), (30 * _D, "30d"),
               (365 * _D, "1y"), (3650 * _D, "10y"))
_TIME_TICKS_2 = tuple(sorted(_TIME_TICKS + (
    (30.0, "30s"), (30 * _M, "30m"), (3 * _H, "3h"), (12 * _H, "12h"), (3 * _D, "3d"), (14 * _D, "2w"),
    (90 * _D, "90d"), (182.5 * _D, "6mo"), (2 * 365 * _D, "2y"), (5 * 365 * _D, "5y"))))
_TIME_TICKS_3 = tuple(sorted(_TIME_TICKS_2 + (
    (2.0, "2s"), (5.0, "5s"), (20.0, "20s"), (2 * _M, "2m"), (5 * _M, "5m"), (20 * _M, "20m"),
    (2 * _H, "2h"), (2 * _D, "2d"), (5 * _D, "5d"), (21 * _D, "3w"), (60 * _D, "60d"),
    (120 * _D, "4mo"), (20 * 365 * _D, "20y"))))


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
        best = [(v, t) for v, t in _TIME_TICKS if lo <= v <= hi]
        for denser in (_TIME_TICKS_2, _TIME_TICKS_3):
            inside = [(v, t) for v, t in denser if lo <= v <= hi]
            if len(inside) > max(room, 2) or len(best) >= room:
                break
            best = inside
        if len(best) >= 2:
            return best
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
