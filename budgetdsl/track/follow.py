"""Following a live job (`budgetdsl track --follow`): re-read only what the logs gained.

Streamed formats (TensorBoard events, Megatron-LM logs, CSV/JSONL) keep their reader between polls
and read on from where they stopped (a partial last record or line waits for the next poll);
whole-file formats (trainer_state.json, gns files) are read again when their size or time changes,
since their writers rewrite them. New files that appear under a RUN folder join at the next poll (a
requeued job writes a new event file). Each file keeps its own timeline; `timeline()` merges them.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator

from budgetdsl.track.metrics import MetricMap
from budgetdsl.track.record import Record
from budgetdsl.track.run import Timeline, merge
from budgetdsl.track.sources import LogFile, expand, records

STREAMED = ("tensorboard", "megatron", "table")


def _stream(log: LogFile, metrics: MetricMap) -> Callable[[], Iterator[Record]]:
    """A callable giving the records added since its last call."""
    if log.kind == "tensorboard":
        from budgetdsl.track.tensorboard_log import EventFile

        return EventFile(log.path, metrics).records
    if log.kind == "megatron":
        from budgetdsl.track.megatron_log import MegatronLog

        return MegatronLog(log.path, metrics).records
    from budgetdsl.track.table_log import TableLog

    return TableLog(log.path, metrics).records


class Follower:
    def __init__(self, runs: list[str], metrics: MetricMap):
        self.runs, self.metrics = runs, metrics
        self.lines: dict[str, Timeline] = {}
        self._streams: dict[str, Callable[[], Iterator[Record]]] = {}
        self._stamps: dict[str, tuple[int, int]] = {}

    def poll(self) -> int:
        """Read what the logs gained; the number of new records."""
        new = 0
        for log in expand(self.runs, waiting=True):
            if log.kind in STREAMED:
                if log.path not in self._streams:
                    self._streams[log.path] = _stream(log, self.metrics)
                    self.lines[log.path] = Timeline(file=log.path)
                line = self.lines[log.path]
                for record in self._streams[log.path]():
                    line.add(record, log.path)
                    new += 1
            else:
                stat = os.stat(log.path)
                stamp = (stat.st_size, stat.st_mtime_ns)
                if self._stamps.get(log.path) != stamp:
                    self._stamps[log.path] = stamp
                    line = Timeline(file=log.path)
                    for record in records(log, self.metrics):
                        line.add(record, log.path)
                    new += len(line) + len(line.noise) - len(self.lines.get(log.path, ()))
                    self.lines[log.path] = line
        return new

    def timeline(self) -> Timeline:
        return merge(list(self.lines.values()), keep=True)

    @property
    def files(self) -> list[str]:
        return list(self.lines)
