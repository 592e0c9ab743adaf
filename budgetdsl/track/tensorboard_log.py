"""TensorBoard event files, read with the tensorboard package's own record reader and Event proto.

The reader is tensorboard's pure-Python TFRecord reader (`tensorboard.compat.tensorflow_stub`,
the one TensorBoard uses without TensorFlow): it checks each record's CRC and keeps a partial last
record buffered, so a file still being written is read up to its last whole record and a later
`read_more` resumes there (`--follow`). A CRC failure is a corrupted record: a located error.
Scalars written one tag per event (`SummaryWriter.add_scalar`) are grouped by step; a step's time
is the wall time of its last event.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from budgetdsl.track.metrics import MetricMap
from budgetdsl.track.record import LogError, Record, finite, step_of


def _tensorboard() -> tuple[Any, Any, Any]:
    try:
        from tensorboard.compat.proto import event_pb2
        from tensorboard.compat.tensorflow_stub import errors, pywrap_tensorflow
    except ImportError:
        raise ImportError("reading TensorBoard event files needs the tensorboard package") from None
    return event_pb2, errors, pywrap_tensorflow


class EventFile:
    """One event file, read record by record; `records()` yields what is there now, again later."""

    def __init__(self, path: str, metrics: MetricMap):
        self.path, self.metrics = path, metrics
        self._pb, self._errors, wrap = _tensorboard()
        self._reader = wrap.PyRecordReader_New(path.encode(), 0, b"", None)
        self.count = 0  # records read whole
        self._step: int | None = None
        self._values: dict[str, float] = {}
        self._time = 0.0
        self._where = ""

    def close(self) -> None:
        self._reader.file_handle.close()

    def _next(self) -> bytes | None:
        """The next whole record, or None at the end (a partial last record stays buffered)."""
        try:
            self._reader.GetNext()
        except self._errors.OutOfRangeError:
            return None
        except self._errors.DataLossError as exc:
            if "truncated" in str(exc):
                return None  # being written: read again later from the same record
            raise LogError(self.path, f"record {self.count + 1}", "corrupted TensorBoard record "
                           "(CRC check failed)", "the file was damaged; track the run without it, or "
                           "from a copy the job wrote again") from None
        self.count += 1
        return self._reader.record()

    def records(self, final: bool = True) -> Iterator[Record]:
        """The steps read since the last call; `final` also gives the step still being grouped."""
        Event = self._pb.Event
        field_of = self.metrics.field_of
        while (raw := self._next()) is not None:
            try:
                event = Event.FromString(raw)
            except Exception:  # protobuf's DecodeError: a record that passed its CRC but is no Event
                raise LogError(self.path, f"record {self.count}", "not a TensorBoard event") from None
            if not event.HasField("summary"):
                continue
            values = [v for v in event.summary.value if v.tag in field_of]
            if not values:
                continue
            where = f"record {self.count}"
            step = step_of(self.path, where, event.step)
            if step != self._step:
                if self._step is not None:
                    yield self._flush()
                self._step = step
            for v in values:
                self._values[v.tag] = _scalar(self.path, where, v)
            self._time, self._where = event.wall_time, where
        if final and self._step is not None:
            yield self._flush()
            self._step = None

    def _flush(self) -> Record:
        assert self._step is not None
        fields = self.metrics.pick(self._values)
        record = Record(step=self._step, where=self._where,
                        time=finite(self.path, self._where, "wall time", self._time))
        for name, value in fields.items():
            setattr(record, name, finite(self.path, self._where, name, value))
        self._values = {}
        return record


def _scalar(path: str, where: str, value: Any) -> float:
    """A summary value's number: `simple_value` (PyTorch, TF1) or a scalar tensor (TF2 summaries)."""
    if value.HasField("simple_value"):
        return float(value.simple_value)
    if value.HasField("tensor"):
        from tensorboard.util import tensor_util

        array = tensor_util.make_ndarray(value.tensor)
        if array.size == 1:
            return float(array.reshape(()))
    raise LogError(path, where, f"tag {value.tag!r} is not a scalar")


def read(path: str, metrics: MetricMap) -> Iterator[Record]:
    """Every step of one event file (a partial last record, still being written, is left out)."""
    events = EventFile(path, metrics)
    try:
        yield from events.records()
    finally:
        events.close()
