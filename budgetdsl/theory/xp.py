"""The array namespace of the formulas written once for one plan and for a sweep.

A formula that takes `xp` runs on plain floats with `SCALAR` (the solver, one plan) and on numpy
arrays with `numpy` itself (the sweep kernel, many rows): the array-API pattern SciPy and
scikit-learn use. `SCALAR` gives Python's own functions numpy's names, so the float path imports no
numpy and compares as it always has (builtin min/max); `where` picks one of two computed values.
"""

from __future__ import annotations

import math
import operator
from types import SimpleNamespace
from typing import Any


def _where(condition: Any, a: Any, b: Any) -> Any:
    return a if condition else b


# numpy's names for the few functions a formula needs beyond + − × ÷, on floats (a namespace of
# plain functions: the float path is the solver's hot path)
SCALAR: Any = SimpleNamespace(minimum=min, maximum=max, sqrt=math.sqrt, floor=math.floor, ceil=math.ceil,
                              copysign=math.copysign, where=_where, logical_not=operator.not_, any=bool,
                              abs=abs)
