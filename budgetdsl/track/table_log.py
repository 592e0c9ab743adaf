"""The documented schema for any other logger: CSV with a header row, or JSON Lines, one object a step.

Columns (docs/track.md): `step` (required), `time` (Unix seconds or an ISO 8601 date), `tokens`,
`samples`, `loss`, `lr`, `tokens_per_s`, `tflops_per_gpu`, `b_noise`, `b_noise_low`,
`b_noise_high`; other names reach a field through the metric mapping (`--metric tokens=seen`).
Empty cells and JSON nulls are missing values. Streamed line by line; a last line without its
newline is being written and is left out.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator
from datetime import UTC, datetime

from budgetdsl.track.lines import LineReader
from budgetdsl.track.metrics import MetricMap
from budgetdsl.track.record import LogError, Record, finite, step_of


def _time(path: str, where: str, value: object) -> float:
    if isinstance(value, str) and not value.strip().replace(".", "", 1).isdigit():
        try:
            stamp = datetime.fromisoformat(value.strip())
        except ValueError:
            raise LogError(path, where, f"time {value[:40]!r} is neither Unix seconds nor an ISO 8601 date") from None
        return (stamp if stamp.tzinfo else stamp.replace(tzinfo=UTC)).timestamp()
    return finite(path, where, "time", value)


def _record(path: str, where: str, row: dict[str, object], metrics: MetricMap) -> Record:
    if row.get("step") in (None, ""):
        raise LogError(path, where, "no `step`", "every row needs the optimizer step (docs/track.md)")
    record = Record(step=step_of(path, where, row["step"]), where=where)
    if row.get("time") not in (None, ""):
        record.time = _time(path, where, row["time"])
    present = {k: v for k, v in row.items() if v not in (None, "")}
    for name, value in metrics.pick(present).items():
        setattr(record, name, finite(path, where, name, value))
    return record


class TableLog:
    """One CSV or JSONL log; `records()` gives the rows added since the last call."""

    def __init__(self, path: str, metrics: MetricMap):
        self.path, self.metrics = path, metrics
        self.jsonl = path.endswith((".jsonl", ".ndjson"))
        self._lines = LineReader(path)
        self._header: list[str] | None = None

    def records(self) -> Iterator[Record]:
        path = self.path
        for number, raw in self._lines.lines():
            where = f"{number}"
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError:
                raise LogError(path, where, "not UTF-8 text") from None
            if not line.strip():
                continue
            if self.jsonl:
                try:
                    row = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise LogError(path, f"{number}:{exc.colno}", f"not a JSON object: {exc.msg}") from None
                if not isinstance(row, dict):
                    raise LogError(path, where, "a JSON Lines record must be an object")
            else:
                cells = next(csv.reader([line]))
                if self._header is None:
                    self._header = [c.strip() for c in cells]
                    if "step" not in self._header:
                        raise LogError(path, where, "the header row has no `step` column",
                                       "CSV logs start with a header naming the columns (docs/track.md)")
                    continue
                if len(cells) != len(self._header):
                    raise LogError(path, where, f"{len(cells)} cells under a header of {len(self._header)}")
                row = dict(zip(self._header, cells, strict=True))
            yield _record(path, where, row, self.metrics)


def read(path: str, metrics: MetricMap) -> Iterator[Record]:
    return TableLog(path, metrics).records()
