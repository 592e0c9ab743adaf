"""The trajectory points a calibration file's fit B_crit(L) = B*/L^(1/α) takes
(budgetdsl.theory.power_law_fit): at least one EMA window apart, since closer ones share most of
their data.
"""

from __future__ import annotations

import math


def spaced(steps: list[int], spacing: float, start: int = 0) -> list[int]:
    """Indices of `steps` from `start` on, each at least `spacing` steps after the previous one,
    walking back from the last step (the best-measured one is always kept)."""
    chosen: list[int] = []
    last = math.inf
    for i in range(len(steps) - 1, -1, -1):
        if steps[i] < start:
            break
        if last - steps[i] >= spacing:
            chosen.append(i)
            last = steps[i]
    return chosen[::-1]
