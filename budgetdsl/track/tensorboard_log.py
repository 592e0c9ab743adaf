"""TensorBoard event files: TFRecord framing checked record by record, each record parsed with
tensorboard's own Event proto (`tensorboard.compat.proto.event_pb2`; no hand-written protobuf).

A TFRecord is `length` (uint64, little-endian), the masked CRC-32C of those 8 bytes, `length` bytes
of data, the masked CRC-32C of the data (TensorFlow's tensorflow/core/lib/io/record_writer.cc;
tensorboard's reader without TensorFlow checks the same, compat/tensorflow_stub/pywrap_tensorflow.py
`masked_crc32c`). That reader computes CRC-32C in pure Python, about 7 µs a record; a 10⁶-step log
must read in seconds, so the CRC is google-crc32c's C code and the file is read in large blocks.
A CRC failure is a corrupted record: a located error. A partial last record is a record still being
written: reading stops before it, and the next call resumes there (`--follow`).

Scalars written one tag per event (`SummaryWriter.add_scalar`) are grouped by step; a step's time is
the wall time of its last event. The steps of each block read come out as one `Rows` batch of
columns, which `Timeline.extend` appends in bulk: per event the reader only parses and files the
value under its tag; choosing among a field's names and the finiteness checks run per batch.
"""

from __future__ import annotations

import math
import struct
from array import array
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, cast

from budgetdsl.io.guarded_read import open_regular
from budgetdsl.track.metrics import MetricMap
from budgetdsl.track.record import LogError, Record, finite, step_of

BLOCK = 1 << 20  # bytes read at a time
MAX_RECORD = 64 << 20  # a longer record is not a scalar summary (an image, or a damaged length)
SMALL = 256  # bytes: a scalar event is about 50; a longer record is parsed only if it holds a tag read
_HEADER = struct.Struct("<QI")
_CRC = struct.Struct("<I")
_MASK_DELTA = 0xA282EAD8  # TFRecord's CRC mask (record_writer.cc)
NAN = math.nan


def _imports() -> tuple[Any, Any]:
    try:
        import google_crc32c
        from tensorboard.compat.proto import event_pb2
    except ImportError:
        raise ImportError("reading TensorBoard event files needs the tensorboard and google-crc32c "
                          "packages") from None
    return event_pb2.Event, google_crc32c.value


def _masked(crc: int) -> int:
    return ((((crc >> 15) | (crc << 17)) & 0xFFFFFFFF) + _MASK_DELTA) & 0xFFFFFFFF


@dataclass
class Rows:
    """Consecutive steps of one file as columns: `where[i]` is the number of the last record of
    step i; `columns` holds only the fields logged, NaN where a step lacks one."""

    file: str
    steps: list[int] = field(default_factory=list)
    times: list[float] = field(default_factory=list)
    where: list[int] = field(default_factory=list)
    columns: dict[str, array] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.steps)

    def records(self) -> Iterator[Record]:
        """The same steps as Records (a reader's common output)."""
        columns = list(self.columns.items())
        for i, step in enumerate(self.steps):
            record = Record(step, f"record {self.where[i]}", self.times[i])
            for name, values in columns:
                if not math.isnan(value := values[i]):
                    setattr(record, name, value)
            yield record

    def head(self, until_step: int) -> Rows:
        """The steps up to `until_step`."""
        n = next((i for i, s in enumerate(self.steps) if s > until_step), len(self.steps))
        return Rows(self.file, self.steps[:n], self.times[:n], self.where[:n],
                    {c: values[:n] for c, values in self.columns.items()})


class EventFile:
    """One event file; `batches()` (or `records()`) gives the steps written since the last call."""

    def __init__(self, path: str, metrics: MetricMap):
        self.path, self.metrics = path, metrics
        self._event, self._crc = _imports()
        self._file = open_regular(path)  # the guarded open: a regular file, never a FIFO
        self._buffer = b""
        self._headers: set[tuple[int, int]] = set()  # (length, its CRC) pairs whose CRC matched
        self.count = 0  # whole records read
        self._step: int | None = None  # the step being grouped, its values by tag, time and record
        self._values: dict[str, float] = {}
        self._last: Any = None  # the step's last event read: its wall time is the step's time
        self._where = 0
        self._wanted = [name.encode() for name in metrics.field_of]  # a tag's bytes are in its record
        # field -> its names in rank order, each name under the one field it feeds
        self._names = {fld: [n for n in names if metrics.field_of[n][0] == fld]
                       for fld, names in metrics.names.items()}

    def close(self) -> None:
        self._file.close()

    def _blocks(self) -> Iterator[list[bytes]]:
        """The whole records from where the last call stopped to the end of the file now, one list
        per block read, each record's length and data checked against their CRCs."""
        crc, header, tail, mask = self._crc, _HEADER.unpack_from, _CRC.unpack_from, _MASK_DELTA
        buffer, checked = self._buffer, self._headers
        while True:
            pos, size, out = 0, len(buffer), list[bytes]()
            append = out.append
            while pos + 12 <= size:
                length, length_crc = head = header(buffer, pos)
                end = pos + 12 + length
                if end + 4 > size:
                    if length > MAX_RECORD and _masked(crc(buffer[pos:pos + 8])) != length_crc:
                        self._corrupted(self.count + len(out) + 1, "its length")
                    break
                if head not in checked:  # the same 12 header bytes as a record checked before pass too
                    if (((c := crc(buffer[pos:pos + 8])) >> 15 | c << 17) + mask) & 0xFFFFFFFF != length_crc:
                        self._corrupted(self.count + len(out) + 1, "its length")
                    if len(checked) < 4096:
                        checked.add(head)
                data = buffer[pos + 12:end]
                if (((c := crc(data)) >> 15 | c << 17) + mask) & 0xFFFFFFFF != tail(buffer, end)[0]:
                    self._corrupted(self.count + len(out) + 1, "its data")
                append(data)
                pos = end + 4
            if out:
                yield out
            more = self._file.read(BLOCK)
            if not more:
                self._buffer = buffer[pos:]
                return
            buffer = buffer[pos:] + more

    def _corrupted(self, record: int, part: str) -> None:
        raise LogError(self.path, f"record {record}", f"corrupted TensorBoard record (the CRC of {part} "
                       "does not match)", "the file was damaged; track the run without it")

    def batches(self, final: bool = True) -> Iterator[Rows]:
        """The steps read since the last call, a batch per block; `final` also gives the step still
        being grouped (with `final=False` it waits for the next step's first event)."""
        parse, field_of = self._event.FromString, self.metrics.field_of
        steps: list[int] = []
        times: list[float] = []
        wheres: list[int] = []  # the step's last record
        values: list[dict[str, float]] = []
        step, current, last, where, count = self._step, self._values, self._last, self._where, self.count
        wanted = self._wanted
        for block in self._blocks():
            for count, raw in enumerate(block, self.count + 1):
                if len(raw) > SMALL and not any(tag in raw for tag in wanted):
                    continue  # an image, a histogram, a graph: none of the tags read, left unparsed
                try:
                    event = parse(raw)
                except Exception:  # protobuf's DecodeError: a record that passed its CRC but is no Event
                    raise LogError(self.path, f"record {count}", "not a TensorBoard event") from None
                summary = event.summary.value
                # SummaryWriter.add_scalar writes one value an event: that case indexes it (faster
                # than iterating); the loop below is the same for events with several values.
                for v in (summary[0],) if len(summary) == 1 else summary:
                    if (tag := v.tag) not in field_of:
                        continue
                    if (s := event.step) != step:
                        if step is not None:
                            steps.append(step)
                            times.append(last.wall_time)
                            wheres.append(where)
                            values.append(current)
                            current = {}
                        step = s if s >= 0 else step_of(self.path, f"record {count}", s)
                    last, where = event, count
                    value = v.simple_value
                    if not value and not v.HasField("simple_value"):  # 0.0 is also the unset default
                        value = _tensor(self.path, count, v)
                    current[tag] = value
            self.count = count
            if steps:
                yield self._rows(steps, times, wheres, values)
                steps, times, wheres, values = [], [], [], []
        self._step, self._values, self._last, self._where = step, current, last, where
        if final and step is not None:
            self._step, self._values = None, {}
            yield self._rows([step], [last.wall_time], [where], [current])

    def records(self, final: bool = True) -> Iterator[Record]:
        """The steps read since the last call as Records (`batches` for `final`)."""
        for rows in self.batches(final):
            yield from rows.records()

    def _rows(self, steps: list[int], times: list[float], wheres: list[int],
              values: list[dict[str, float]]) -> Rows:
        """A batch's columns: each field from the first of its names a step logged (the metric
        map's order), every value and wall time checked finite."""
        rows = Rows(self.path, steps, times, wheres)
        tags = set().union(*values)
        for name, names in self._names.items():
            present = [tag for tag in names if tag in tags]
            if not present:
                continue
            column: list[float | None] = [step.get(present[0]) for step in values]
            for tag in present[1:]:  # a later name fills only the steps the earlier ones lack
                column = [v if v is not None else step.get(tag) for v, step in zip(column, values, strict=True)]
            missing = None in column
            check = [v for v in column if v is not None] if missing else cast("list[float]", column)
            if not math.isfinite(sum(check)):  # a NaN or an infinity somewhere (or a sum that overflows)
                for i, v in enumerate(column):
                    if v is not None and not math.isfinite(v):
                        finite(self.path, f"record {wheres[i]}", name, v)
            if missing:
                column = [NAN if v is None else v for v in column]
            rows.columns[name] = array("d", column)
        if not math.isfinite(sum(times)):
            for i, t in enumerate(times):
                if not math.isfinite(t):
                    finite(self.path, f"record {wheres[i]}", "wall time", t)
        return rows


def _tensor(path: str, count: int, value: Any) -> float:
    """A scalar written as a tensor (TF2 summaries; SummaryWriter writes `simple_value`)."""
    if value.HasField("tensor"):
        from tensorboard.util import tensor_util

        array = tensor_util.make_ndarray(value.tensor)
        if array.size == 1:
            return float(array.reshape(()))
    raise LogError(path, f"record {count}", f"tag {value.tag!r} is not a scalar")


def read(path: str, metrics: MetricMap) -> Iterator[Record]:
    """Every step of one event file (a partial last record, still being written, is left out)."""
    events = EventFile(path, metrics)
    try:
        yield from events.records()
    finally:
        events.close()

