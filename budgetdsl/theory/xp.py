"""The array namespace of the formulas written once for one plan and for a sweep.

A formula that takes `xp` runs on plain floats with `SCALAR` (the solver, one plan) and on numpy
arrays with `numpy` itself (the sweep kernel, many rows): the array-API pattern SciPy and
scikit-learn use. `SCALAR` gives Python's own functions numpy's names, so the float path imports no
numpy and compares as it always has (builtin min/max); `where` picks one of two computed values.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any


class _Scalar:
    """numpy's names for the few functions a formula needs beyond + − × ÷, on floats."""

    minimum = staticmethod(min)
    maximum = staticmethod(max)
    sqrt = staticmethod(math.sqrt)
    floor = staticmethod(math.floor)
    ceil = staticmethod(math.ceil)
    copysign = staticmethod(math.copysign)

    @staticmethod
    def where(condition: Any, a: Any, b: Any) -> Any:
        return a if condition else b


def select(condition: Any, if_true: Callable[[], Any], if_false: Callable[[], Any], xp: Any) -> Any:
    """xp.where(condition, if_true(), if_false()), computing only the side a plain bool condition
    picks (one plan, or a sweep's block of one kind): each side is still written once."""
    if condition is True or condition is False:
        return if_true() if condition else if_false()
    return xp.where(condition, if_true(), if_false())


SCALAR: Any = _Scalar()
