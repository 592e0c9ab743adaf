"""How the peak learning rate follows the global batch: the one definition that the exports
(`exports.spec`) and the calibration sweep (`calibrate.sweep_config`) both use.

    lr(B) = lr₀ · (B/B₀)^p
    sqrt    p = 1/2, the usual rule for Adam (Hoffer et al. 2017; Malladi et al. 2022, "On the SDEs
            and scaling rules for adaptive gradient algorithms")
    linear  p = 1, SGD's rule with warmup (Goyal et al. 2017)
    none    p = 0, the lr as given
"""

from __future__ import annotations

import math
from enum import StrEnum


# The rules a plan may name (`optimizer.scaling`). No docstring: the JSON Schema would show it.
class LrScaling(StrEnum):
    sqrt = "sqrt"
    linear = "linear"
    none = "none"


EXPONENT: dict[str, float] = {LrScaling.sqrt: 0.5, LrScaling.linear: 1.0, LrScaling.none: 0.0}
# How an export names each rule beside the lr it derives.
RULE: dict[str, str] = {
    LrScaling.sqrt: "× √(B/B₀) (Adam)", LrScaling.linear: "× B/B₀ (Goyal et al. 2017)", LrScaling.none: "unscaled"}


def scale_lr(lr: float, at_batch: float, batch: float, scaling: str) -> float:
    """lr tuned at `at_batch`, moved to `batch` (same unit) by the scaling rule."""
    if scaling not in EXPONENT:
        raise ValueError(f"unknown lr scaling {scaling!r}")
    ratio = batch / at_batch
    if scaling == "sqrt":
        return lr * math.sqrt(ratio)
    return lr * ratio ** EXPONENT[scaling]
