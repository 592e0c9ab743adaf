"""One normalized record of a training log, whatever wrote it, and the located error of a bad one.

Every reader turns its format into `Record`s: the optimizer step, the wall time (Unix seconds) and
what the step had consumed, the loss, the learning rate, and what some formats add (throughput,
TFLOP/s per GPU, a B_noise measurement and its interval). A field the log does not carry is None.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


class LogError(ValueError):
    """Bad input in a log: `file`, `where` (a record, a line) and what to do about it (`hint`)."""

    def __init__(self, file: str, where: str, message: str, hint: str | None = None):
        self.file, self.where, self.message, self.hint = file, where, message, hint
        super().__init__(self.format())

    def format(self) -> str:
        head = f"{self.file}:{self.where}: error[track]: {self.message}" if self.where else \
            f"{self.file}: error[track]: {self.message}"
        return head if not self.hint else f"{head}\n  hint: {self.hint}"


# The fields of a record, in the order of the documented CSV/JSONL schema (docs/track.md).
FIELDS = ("step", "time", "tokens", "samples", "loss", "lr", "tokens_per_s", "tflops_per_gpu",
          "b_noise", "b_noise_low", "b_noise_high")


@dataclass(slots=True)
class Record:
    """What a log says about one optimizer step; `where` locates it ("record 12", "line 40")."""

    step: int
    where: str
    time: float | None = None
    tokens: float | None = None
    samples: float | None = None
    loss: float | None = None
    lr: float | None = None
    tokens_per_s: float | None = None
    tflops_per_gpu: float | None = None
    b_noise: float | None = None  # tokens
    b_noise_low: float | None = None
    b_noise_high: float | None = None


def finite(file: str, where: str, name: str, value: object) -> float:
    """`value` as a finite float, or a located LogError (a NaN loss, a string where a number goes)."""
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise LogError(file, where, f"{name} is not a number: {str(value)[:40]!r}") from None
    if not math.isfinite(number):
        raise LogError(file, where, f"{name} is {number} (not finite)",
                       "a diverged step: the run needs attention before its plan does; "
                       "or drop the metric with --metric " f"{name}=") from None
    return number


def step_of(file: str, where: str, value: object) -> int:
    """An optimizer step: a whole number, at least 0."""
    number = finite(file, where, "step", value)
    if number < 0 or number != int(number) or number > 2**53:
        raise LogError(file, where, f"step {value!r} is not a whole number of at least 0")
    return int(number)
