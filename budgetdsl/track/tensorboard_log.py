"""TensorBoard event files: TFRecord framing checked record by record, each record parsed with
tensorboard's own Event proto (`tensorboard.compat.proto.event_pb2`; no hand-written protobuf).

A TFRecord is `length` (uint64, little-endian), the masked CRC-32C of those 8 bytes, `length` bytes
of data, the masked CRC-32C of the data (TensorFlow's tensorflow/core/lib/io/record_writer.cc;
tensorboard's reader without TensorFlow checks the same, compat/tensorflow_stub/pywrap_tensorflow.py
`masked_crc32c`). That reader computes CRC-32C in pure Python, about 7 µs a record; a 10⁶-step log
must read in seconds, so the CRC is google-crc32c's C code and the file is read in large blocks.
A CRC failure is a corrupted record: a located error. A partial last record is a record still being
written: reading stops before it, and `records()` resumes there on the next call (`--follow`).
Scalars written one tag per event (`SummaryWriter.add_scalar`) are grouped by step; a step's time is
the wall time of its last event.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Iterator
from typing import Any

from budgetdsl.io.guarded_read import open_regular
from budgetdsl.track.metrics import MetricMap
from budgetdsl.track.record import LogError, Record, finite, step_of

BLOCK = 1 << 20  # bytes read at a time
MAX_RECORD = 64 << 20  # a longer record is not a scalar summary (an image, or a damaged length)
_HEADER = struct.Struct("<QI")
_CRC = struct.Struct("<I")
_MASK_DELTA = 0xA282EAD8  # TFRecord's CRC mask (record_writer.cc)


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


class EventFile:
    """One event file; `records()` yields the steps written since the last call."""

    def __init__(self, path: str, metrics: MetricMap):
        self.path, self.metrics = path, metrics
        self._event, self._crc = _imports()
        self._file = open_regular(path)  # the guarded open: a regular file, never a FIFO
        self._buffer = b""
        self.count = 0  # whole records read
        self._step: int | None = None
        self._values: dict[str, float] = {}
        self._time = 0.0
        self._where = 0

    def close(self) -> None:
        self._file.close()

    def _raw(self) -> Iterator[bytes]:
        """The whole records from where the last call stopped to the end of the file now."""
        crc, header, tail = self._crc, _HEADER.unpack_from, _CRC.unpack_from
        buffer, pos = self._buffer, 0
        while True:
            size = len(buffer) - pos
            if size >= 12:
                length, length_crc = header(buffer, pos)
                end = pos + 12 + length
                if end + 4 <= len(buffer):
                    if (((c := crc(buffer[pos:pos + 8])) >> 15 | c << 17) + _MASK_DELTA) & 0xFFFFFFFF != length_crc:
                        self._corrupted(self.count + 1, "its length")
                    data = buffer[pos + 12:end]
                    if (((c := crc(data)) >> 15 | c << 17) + _MASK_DELTA) & 0xFFFFFFFF != tail(buffer, end)[0]:
                        self._corrupted(self.count + 1, "its data")
                    pos = end + 4
                    self.count += 1
                    yield data
                    continue
                if length > MAX_RECORD and _masked(crc(buffer[pos:pos + 8])) != length_crc:
                    self._corrupted(self.count + 1, "its length")
            more = self._file.read(BLOCK)
            if not more:
                break
            buffer, pos = buffer[pos:] + more, 0
        self._buffer = buffer[pos:]

    def _corrupted(self, record: int, part: str) -> None:
        raise LogError(self.path, f"record {record}", f"corrupted TensorBoard record (the CRC of {part} "
                       "does not match)", "the file was damaged; track the run without it")

    def records(self, final: bool = True) -> Iterator[Record]:
        """The steps read since the last call; `final` also gives the step still being grouped
        (with `final=False` it waits for the next step's first event, as `--follow` does)."""
        Event = self._event
        field_of = self.metrics.field_of
        for raw in self._raw():
            try:
                event = Event.FromString(raw)
            except Exception:  # protobuf's DecodeError: a record that passed its CRC but is no Event
                raise LogError(self.path, f"record {self.count}", "not a TensorBoard event") from None
            step = None
            for v in event.summary.value:
                if (tag := v.tag) not in field_of:
                    continue
                if step is None:
                    if (step := event.step) != self._step:
                        if self._step is not None:
                            yield self._flush()
                        self._step = step if step >= 0 else step_of(self.path, f"record {self.count}", step)
                    self._time, self._where = event.wall_time, self.count
                self._values[tag] = v.simple_value if v.HasField("simple_value") else _tensor(self, v)
        if final and self._step is not None:
            yield self._flush()
            self._step = None

    def _flush(self) -> Record:
        assert self._step is not None
        record = Record(self._step, "", self._time)
        ranks: dict[str, int] = {}
        field_of, isfinite = self.metrics.field_of, math.isfinite
        for tag, value in self._values.items():  # the first listed name of a field wins
            name, rank = field_of[tag]
            if ranks.get(name, rank + 1) > rank:
                setattr(record, name, value)
                ranks[name] = rank
                if not isfinite(value):
                    finite(self.path, f"record {self._where}", name, value)
        if not isfinite(self._time):
            finite(self.path, f"record {self._where}", "wall time", self._time)
        record.where = f"record {self._where}"
        self._values = {}
        return record


def _tensor(events: EventFile, value: Any) -> float:
    """A scalar written as a tensor (TF2 summaries; SummaryWriter writes `simple_value`)."""
    if value.HasField("tensor"):
        from tensorboard.util import tensor_util

        array = tensor_util.make_ndarray(value.tensor)
        if array.size == 1:
            return float(array.reshape(()))
    raise LogError(events.path, f"record {events.count}", f"tag {value.tag!r} is not a scalar")


def read(path: str, metrics: MetricMap) -> Iterator[Record]:
    """Every step of one event file (a partial last record, still being written, is left out)."""
    events = EventFile(path, metrics)
    try:
        yield from events.records()
    finally:
        events.close()
