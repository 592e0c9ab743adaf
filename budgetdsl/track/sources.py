"""Which files a RUN argument names and which reader each needs.

A directory is searched (to a bounded depth and count) for TensorBoard event files and a Trainer's
`trainer_state.json` (the output directory's own, not its checkpoints' copies); a file is
recognised by its name, then by its first bytes. Every file is opened as the plan loader opens
plans (budgetdsl.io.guarded_read): a regular file only, never a FIFO or a device.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass

from budgetdsl.io.guarded_read import NotRegularFile, open_regular
from budgetdsl.track.metrics import MetricMap
from budgetdsl.track.record import LogError, Record
from budgetdsl.track.run import Timeline, timeline_of

KINDS = ("tensorboard", "hf", "megatron", "gns", "table")
MAX_FILES = 10_000
MAX_DEPTH = 8


@dataclass(frozen=True, slots=True)
class LogFile:
    path: str
    kind: str  # one of KINDS


def _head(path: str) -> bytes:
    try:
        with open_regular(path) as f:
            return f.read(4096)
    except IsADirectoryError:
        raise LogError(path, "", "is a directory") from None
    except NotRegularFile:
        raise LogError(path, "", "not a regular file (a FIFO, a device or a socket): not read") from None
    except OSError as exc:
        raise LogError(path, "", f"cannot read: {exc.strerror or exc}") from None


def kind_of(path: str) -> str:
    """The reader a file needs; LogError when no reader knows it."""
    name = os.path.basename(path)
    head = _head(path)
    if "tfevents" in name:
        return "tensorboard"
    if name.endswith((".csv", ".jsonl", ".ndjson")):
        return "table"
    if name.endswith(".json"):
        from budgetdsl.track.gns_file import looks_like

        if b'"log_history"' in head:
            return "hf"
        if looks_like(head):
            return "gns"
    elif b"iteration" in head and b"|" in head or name.endswith((".log", ".txt", ".out")):
        return "megatron"
    raise LogError(path, "", "not a log track reads",
                   "give TensorBoard event files (events.out.tfevents.*), trainer_state.json, a "
                   "Megatron-LM log, a gns calibration file, or a CSV/JSONL file (docs/track.md)")


def _walk(root: str) -> Iterator[str]:
    for top, dirs, files in os.walk(root):
        depth = os.path.relpath(top, root).count(os.sep) + (top != root)
        dirs[:] = sorted(d for d in dirs if depth < MAX_DEPTH)
        for name in sorted(files):
            in_checkpoint = os.path.basename(top).startswith("checkpoint-")
            if "tfevents" in name or name == "trainer_state.json" and not in_checkpoint:
                yield os.path.join(top, name)


def expand(paths: list[str], waiting: bool = False) -> list[LogFile]:
    """The log files the RUN arguments name, each with its kind (`waiting`: a folder without logs
    yet is no error, as when `--follow` starts before the job writes)."""
    out: list[LogFile] = []
    for path in paths:
        if os.path.isdir(path):
            found = []
            for found_path in _walk(path):
                found.append(found_path)
                if len(found) > MAX_FILES:
                    raise LogError(path, "", f"more than {MAX_FILES} log files below it",
                                   "name the run's own folder")
            if not found and not waiting:
                raise LogError(path, "", "no TensorBoard event file or trainer_state.json below it")
            out += [LogFile(p, kind_of(p)) for p in found]
        elif not os.path.exists(path):
            raise LogError(path, "", "no such file or directory")
        else:
            out.append(LogFile(path, kind_of(path)))
    return out


def timeline(log: LogFile, metrics: MetricMap, until_step: int | None = None) -> Timeline:
    """One file's timeline (up to the first step past `until_step`): TensorBoard events in batches
    of columns (`Timeline.extend`), the other formats record by record."""
    if log.kind != "tensorboard":
        return timeline_of(log.path, records(log, metrics), until_step)
    from budgetdsl.track import tensorboard_log

    line = Timeline(file=log.path)
    events = tensorboard_log.EventFile(log.path, metrics)
    try:
        for rows in events.batches():
            if until_step is not None and max(rows.steps) > until_step:
                line.extend(rows.head(until_step), log.path)
                break
            line.extend(rows, log.path)
    finally:
        events.close()
    return line


def records(log: LogFile, metrics: MetricMap) -> Iterator[Record]:
    """The records of one file, through the reader of its kind."""
    if log.kind == "tensorboard":
        from budgetdsl.track import tensorboard_log

        return tensorboard_log.read(log.path, metrics)
    if log.kind == "hf":
        from budgetdsl.track import hf_state

        return hf_state.read(log.path, metrics)
    if log.kind == "megatron":
        from budgetdsl.track import megatron_log

        return megatron_log.read(log.path, metrics)
    if log.kind == "gns":
        from budgetdsl.track import gns_file

        return gns_file.read(log.path)
    from budgetdsl.track import table_log

    return table_log.read(log.path, metrics)
