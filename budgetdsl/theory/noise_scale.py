"""Which measured noise scale stands for B_crit: the raw B_simple = tr Σ/|G|² (McCandlish et al.
2018, eq. 2.8) or the same of Adam's update direction, the gradient scaled by 1/(√v̂ + ε)
(calibrate/step.py). Both are measured in every AdamW calibration; this module holds the one
decision which of them a calibration's law B_crit(L) is fitted to, and so what the planner reads.

The decision follows `bench/noise_evidence.py`: B_crit measured directly by `calibrate sweep` (the
frontier fit, McCandlish eq. 2.11) against each B_simple near the same loss, on gpt-nano and
gpt-micro at 64 and 128 tokens per example, three seeds each (docs/noise-evidence.csv,
docs/calibration.md). The raw one tracks B_crit within a factor of about 2 (rms of ln B_crit/B);
the preconditioned one overstates it several-fold on gpt-nano and scatters from seed to seed.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final, Literal

NoiseScale = Literal["raw", "preconditioned"]
DEFAULT_NOISE_SCALE: Final[NoiseScale] = "raw"


@dataclass(frozen=True)
class Agreement:
    """How an estimate B tracks the measured B_crit over sweeps, from the ratios B_crit/B."""

    geo_mean: float  # geometric mean of B_crit/B: its typical bias, as a factor
    rms_log: float  # rms of ln(B_crit/B): the typical error, bias included
    sd_log: float  # standard deviation of ln(B_crit/B): the error a constant factor cannot remove
    n: int


def agreement(ratios: Sequence[float]) -> Agreement:
    logs = [math.log(r) for r in ratios if r is not None and r > 0]
    n = len(logs)
    if n == 0:
        return Agreement(math.nan, math.nan, math.nan, 0)
    mean = sum(logs) / n
    sd = math.sqrt(sum((x - mean) ** 2 for x in logs) / (n - 1)) if n > 1 else math.nan
    return Agreement(math.exp(mean), math.sqrt(sum(x * x for x in logs) / n), sd, n)


def preferred(ratios: Mapping[str, Sequence[float]]) -> str:
    """The estimator whose B_crit/B ratios have the smallest rms log error."""
    return min(ratios, key=lambda name: agreement(ratios[name]).rms_log)
