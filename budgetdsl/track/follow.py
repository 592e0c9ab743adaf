"""Following a live job (`budgetdsl track --follow`): re-read only what the logs gained.

Streamed formats (TensorBoard events, Megatron-LM logs, CSV/JSONL) keep their reader between polls
and read on from where they stopped (a partial last record or line waits for the next poll);
whole-file formats (trainer_state.json, gns files) are read again when their size or time changes,
since their writers rewrite them. New files that appear under a RUN folder join at the next poll (a
requeued job writes a new event file). Each file keeps its own timeline; `timeline()` merges them,
and while only the file at the end of the merged timeline grows (the usual poll) its new records
are added to the last merge instead, so a poll costs what it reads, not the length of the run.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator

from budgetdsl.track.metrics import MetricMap
from budgetdsl.track.record import Record
from budgetdsl.track.run import Timeline, merge
from budgetdsl.track.sources import LogFile, expand, records
from budgetdsl.track.tensorboard_log import Rows

STREAMED = ("tensorboard", "megatron", "table")


def _stream(log: LogFile, metrics: MetricMap) -> Callable[[], Iterator[Record | Rows]]:
    """A callable giving the records added since its last call (event files: batches of them)."""
    if log.kind == "tensorboard":
        from budgetdsl.track.tensorboard_log import EventFile

        return EventFile(log.path, metrics).batches
    if log.kind == "megatron":
        from budgetdsl.track.megatron_log import MegatronLog

        return MegatronLog(log.path, metrics).records
    from budgetdsl.track.table_log import TableLog

    return TableLog(log.path, metrics).records


def _append(line: Timeline, chunk: Record | Rows, path: str) -> int:
    """Add a record or a batch of them to `line`; how many."""
    if isinstance(chunk, Rows):
        line.extend(chunk, path)
        return len(chunk)
    line.add(chunk, path)
    return 1


class Follower:
    def __init__(self, runs: list[str], metrics: MetricMap):
        self.runs, self.metrics = runs, metrics
        self.lines: dict[str, Timeline] = {}
        self._streams: dict[str, Callable[[], Iterator[Record | Rows]]] = {}
        self._stamps: dict[str, tuple[int, int]] = {}
        self._merged: Timeline | None = None
        self._tail: str | None = None  # the file whose records extend the merged timeline at its end

    def poll(self) -> int:
        """Read what the logs gained; the number of new records."""
        new = 0
        for log in expand(self.runs, waiting=True):
            if log.kind in STREAMED:
                if log.path not in self._streams:
                    self._streams[log.path] = _stream(log, self.metrics)
                    self.lines[log.path] = Timeline(file=log.path)
                    self._merged = None
                line = self.lines[log.path]
                for chunk in self._streams[log.path]():
                    new += _append(line, chunk, log.path)
                    if self._merged is not None:
                        if log.path == self._tail:
                            _append(self._merged, chunk, log.path)
                        else:
                            self._merged = None
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
                    self._merged = None
        return new

    def timeline(self) -> Timeline:
        """The merged timeline (callers read it; the next poll may extend it)."""
        if self._merged is None:
            merged = merge(list(self.lines.values()), keep=True)
            self._merged, self._tail = merged, None
            for path, line in self.lines.items():  # the file that ends where the merged timeline ends
                if len(line) and len(merged) and line.steps[-1] == merged.steps[-1] \
                        and line.times[-1] == merged.times[-1] and len(line.restarts) == 0:
                    self._tail = path
        return self._merged

    @property
    def files(self) -> list[str]:
        return list(self.lines)
