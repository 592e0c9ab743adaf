"""Megatron-LM's per-iteration log line, as `training_log` prints it on the last rank.

The format is that of NVIDIA/Megatron-LM, megatron/training/training.py, function `training_log`
(commit d98e8a64ddf3, lines 3567-3641):

    log_string = f" [{datetime.now().strftime('%Y-%m-%d %H:%M:%S.%f')}]"           # 3567
    log_string += ' iteration {:8d}/{:8d} |'.format(iteration, args.train_iters)    # 3568
    log_string += ' consumed samples: {:12d} |'.format(args.consumed_train_samples) # 3569
    log_string += ' elapsed time per iteration (ms): {:.1f} |'.format(...)           # 3574
    log_string += f' throughput per GPU (TFLOP/s/GPU): {throughput:.1f} |'          # 3578
    log_string += f' learning rate: {learning_rate:.6E} |'                          # 3597
    log_string += f' global batch size: {batch_size:5d} |'                          # 3598
    log_string += ' {}: {:.6E} |'.format(key, avg)          # each loss, e.g. "lm loss"  3626
    log_string += f' loss scale: {loss_scale:.1f} |'                                # 3631

and further `key: value |` fields (grad norm, skipped and nan iterations). Older releases print no
timestamp: the time is then the sum of `elapsed time per iteration` over the iterations logged.
Other lines of the log are not iteration lines and are skipped; the timestamp is read as UTC.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import UTC, datetime

from budgetdsl.track.lines import LineReader
from budgetdsl.track.metrics import MetricMap
from budgetdsl.track.record import LogError, Record, finite, step_of

_LINE = re.compile(r"^(?:.*?\[(?P<stamp>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)?)\])?\s*"
                   r"iteration\s+(?P<it>\d+)\s*/\s*(?P<total>\d+)\s*\|(?P<rest>.*)$")
_FIELD = re.compile(r"\s*(?P<key>[^|:]+?):\s*(?P<value>[^|]*?)\s*\|")


def parse_line(path: str, where: str, line: str, metrics: MetricMap) -> tuple[Record, float | None] | None:
    """The record of one iteration line and its elapsed seconds per iteration; None for other lines."""
    match = _LINE.match(line)
    if match is None:
        return None
    values: dict[str, object] = {}
    for field in _FIELD.finditer(match["rest"]):
        values[field["key"].strip()] = field["value"]
    record = Record(step=step_of(path, where, match["it"]), where=where)
    if match["stamp"]:
        try:
            stamp = datetime.strptime(match["stamp"], "%Y-%m-%d %H:%M:%S.%f" if "." in match["stamp"]
                                      else "%Y-%m-%d %H:%M:%S")
        except ValueError:
            raise LogError(path, where, f"timestamp {match['stamp']!r} is not a date") from None
        record.time = stamp.replace(tzinfo=UTC).timestamp()
    for name, value in metrics.pick(values).items():
        setattr(record, name, finite(path, where, name, value))
    elapsed = values.get("elapsed time per iteration (ms)")
    return record, (finite(path, where, "elapsed time per iteration", elapsed) / 1000 if elapsed else None)


class MegatronLog:
    """One Megatron-LM log; `records()` gives the iteration lines added since the last call."""

    def __init__(self, path: str, metrics: MetricMap):
        self.path, self.metrics = path, metrics
        self._lines = LineReader(path)
        self._clock = 0.0
        self._last_step: int | None = None

    def records(self) -> Iterator[Record]:
        for number, raw in self._lines.lines():
            parsed = parse_line(self.path, f"{number}", raw.decode("utf-8", "replace"), self.metrics)
            if parsed is None:
                continue
            record, elapsed = parsed
            if record.time is None and elapsed is not None:
                # no timestamp: each logged interval took `elapsed` per iteration since the last line
                last = self._last_step
                self._clock += elapsed * (record.step - last if last is not None and record.step > last else 1)
                record.time = self._clock
            self._last_step = record.step
            yield record


def read(path: str, metrics: MetricMap) -> Iterator[Record]:
    """Every iteration line of the log, streamed (a last line without its newline is being written:
    left out)."""
    return MegatronLog(path, metrics).records()
