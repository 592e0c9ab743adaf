"""The run record: every log file of one job merged into one timeline of steps, time and tokens.

Real logs are messy, and each mess has one rule here:
- a restart from a checkpoint (the step counter goes back, in one file or in the next one): the
  latest segment's steps are kept, the steps after the checkpoint are dropped, and the interval
  across the restart counts as downtime (the forecast, budgetdsl.track.forecast);
- several ranks' files of one job (files whose times overlap): the file with the most records is
  the timeline, the others only fill values it lacks at the same step;
- files without wall times (trainer_state.json, gns files) add values at matching steps;
- time that runs backwards without a restart, or a restart whose time goes back, is bad input.
Columns are typed arrays (8 bytes a value), so 10⁶ steps stay within a few tens of MB.
"""

from __future__ import annotations

import math
import operator
from array import array
from dataclasses import dataclass, field
from itertools import islice
from typing import TYPE_CHECKING

from budgetdsl.track.record import LogError, Record

if TYPE_CHECKING:
    from budgetdsl.track.tensorboard_log import Rows

OPTIONAL = ("tokens", "samples", "loss", "lr", "tokens_per_s", "tflops_per_gpu")
COLUMNS = ("time", *OPTIONAL)
NAN = math.nan


@dataclass(frozen=True, slots=True)
class Restart:
    """The step counter went back: the job resumed from a checkpoint at `to_step`."""

    file: str
    where: str
    from_step: int  # the last step logged before the restart
    to_step: int  # the first step logged after it
    dropped: int  # records of the old segment after the checkpoint, dropped


@dataclass(frozen=True, slots=True)
class Noise:
    """One B_noise measurement (tokens) at a step, with its interval when the log gives one, and the
    tokens and loss logged with it (a gns file: the loss its estimator smoothed with the same weights)."""

    step: int
    b_noise: float
    low: float | None
    high: float | None
    file: str
    tokens: float | None = None
    loss: float | None = None


@dataclass
class Timeline:
    """Steps in increasing order with their columns (NaN where a log said nothing)."""

    file: str = ""
    steps: array = field(default_factory=lambda: array("q"))
    columns: dict[str, array] = field(default_factory=lambda: {"time": array("d")})  # only those logged
    restarts: list[Restart] = field(default_factory=list)
    restart_at: list[int] = field(default_factory=list)  # indices where a segment after a restart begins
    noise: list[Noise] = field(default_factory=list)
    records: int = 0
    last_where: str = ""

    def __len__(self) -> int:
        return len(self.steps)

    @property
    def times(self) -> array:
        return self.columns["time"]

    def column(self, name: str) -> array:
        """A column's values, NaN throughout when no log gave it."""
        return self.columns.get(name) or array("d", [NAN]) * len(self.steps)

    def _column(self, name: str) -> array:
        """A column to write into, made (NaN so far) at its first value."""
        if name not in self.columns:
            self.columns[name] = array("d", [NAN]) * len(self.steps)
        return self.columns[name]

    def add(self, record: Record, file: str) -> None:
        """Append one record in log order, applying the restart and time rules."""
        self.records += 1
        if record.b_noise is not None:
            self.noise.append(Noise(record.step, record.b_noise, record.b_noise_low, record.b_noise_high, file,
                                    record.tokens, record.loss))
        n = len(self.steps)
        time = NAN if record.time is None else record.time
        if n:
            last_step, last_time = self.steps[-1], self.times[-1]
            if record.step == last_step:  # one step in two records: fill what the first lacked
                for c in COLUMNS:
                    value = getattr(record, c)
                    if value is not None and math.isnan(self._column(c)[-1]):
                        self.columns[c][-1] = value
                return
            if record.step > last_step and time < last_time:
                raise LogError(file, record.where, f"time runs backwards: step {record.step} is logged "
                               f"{last_time - time:.3g} s before step {last_step}",
                               "records out of order, or logs of two runs given as one")
            if record.step < last_step:
                if time <= last_time:
                    raise LogError(file, record.where, f"the step goes back ({last_step} -> {record.step}) "
                                   "but the time does not move on: not a restart",
                                   "logs of two runs given as one, or a file out of order")
                self._truncate(record, file)
        cols = self.columns
        cols["time"].append(time)
        for c in OPTIONAL:
            value = getattr(record, c)
            column = cols.get(c)
            if column is None:
                if value is None:
                    continue
                column = cols[c] = array("d", [NAN]) * len(self.steps)
            column.append(NAN if value is None else value)
        self.steps.append(record.step)
        self.last_where = record.where

    def extend(self, rows: Rows, file: str) -> None:
        """Append a reader's batch of consecutive steps (budgetdsl.track.tensorboard_log.Rows): in
        bulk while its steps rise and its times do not fall past the end of this timeline, else
        record by record through `add` and its restart and time rules."""
        steps, times = rows.steps, rows.times
        if not steps:
            return
        n = len(self.steps)
        if (n and (steps[0] <= self.steps[-1] or times[0] < self.times[-1])) or "b_noise" in rows.columns \
                or not all(map(operator.lt, steps, islice(steps, 1, None))) \
                or not all(map(operator.le, times, islice(times, 1, None))):
            for record in rows.records():
                self.add(record, file)
            return
        added = len(steps)
        for c in OPTIONAL:  # before the steps grow: a column new here is NaN for the n steps so far
            values = rows.columns.get(c)
            if values is not None:
                self._column(c).extend(values)
            elif c in self.columns:
                self.columns[c].extend(array("d", [NAN]) * added)
        self.steps.fromlist(steps)
        self.times.fromlist(times)
        self.records += added
        self.last_where = f"record {rows.where[-1]}"

    def _truncate(self, record: Record, file: str) -> None:
        """Keep the steps before `record.step`: the job resumed from a checkpoint there."""
        keep = _bisect(self.steps, record.step)
        self.restarts.append(Restart(file, record.where, self.steps[-1], record.step, len(self.steps) - keep))
        del self.steps[keep:]
        for column in self.columns.values():
            del column[keep:]
        self.restart_at = [i for i in self.restart_at if i < keep] + [keep]
        self.noise = [n for n in self.noise if n.step < record.step or n is self.noise[-1] and n.step == record.step]

    def copy(self) -> Timeline:
        return Timeline(self.file, array("q", self.steps), {c: array("d", a) for c, a in self.columns.items()},
                        list(self.restarts), list(self.restart_at), list(self.noise), self.records, self.last_where)

    def since(self, step: int) -> Timeline:
        """The run from its first step at or after `step` on, counted from there: that step becomes
        step 0, tokens and samples start at 0 (`track --since-step`, the rest of a replanned run)."""
        i = _bisect(self.steps, step)
        if i >= len(self.steps):
            raise LogError(self.file, "", f"no step at or after {step} logged yet",
                           "wait for the rest of the run to log, or check --since-step")
        first = self.steps[i]
        out = Timeline(self.file, array("q", (s - first for s in self.steps[i:])), {},
                       [r for r in self.restarts if r.to_step >= first], [k - i for k in self.restart_at if k > i],
                       list(self.noise), self.records, self.last_where)
        for c, values in self.columns.items():
            base = values[i] if c in ("tokens", "samples") else 0.0
            if math.isnan(base):
                raise LogError(self.file, "", f"no {c} logged at step {first}, where --since-step starts",
                               "start at a step whose record has them")
            out.columns[c] = array("d", (v - base for v in values[i:]))
        return out

    def index_of(self, step: int) -> int | None:
        i = _bisect(self.steps, step)
        return i if i < len(self.steps) and self.steps[i] == step else None

    def fill(self, other: Timeline) -> None:
        """Values of `other` (another rank, a file without times) where this timeline has none."""
        for j, step in enumerate(other.steps):
            i = self.index_of(step)
            if i is None:
                continue
            for c, theirs in other.columns.items():
                if c != "time" and not math.isnan(theirs[j]) and math.isnan(self._column(c)[i]):
                    self.columns[c][i] = theirs[j]
        self.noise += other.noise


def _bisect(steps: array, step: int) -> int:
    lo, hi = 0, len(steps)
    while lo < hi:
        mid = (lo + hi) // 2
        if steps[mid] < step:
            lo = mid + 1
        else:
            hi = mid
    return lo


def timeline_of(file: str, records, until_step: int | None = None) -> Timeline:
    """One file's records as a timeline (up to the first step past `until_step`)."""
    line = Timeline(file=file)
    for record in records:
        if until_step is not None and record.step > until_step:
            break
        line.add(record, file)
    return line


def merge(lines: list[Timeline], until_step: int | None = None, keep: bool = False) -> Timeline:
    """One job's timeline from its files' timelines (module docstring: restarts, ranks, no times);
    `keep` leaves the timelines given as they were (`--follow` adds to them), at the price of a copy."""
    lines = [t for t in lines if len(t) or t.noise]
    timed = [t for t in lines if len(t) and not math.isnan(t.times[0])]
    untimed = [t for t in lines if t not in timed]
    if not timed:
        base = max(untimed, key=len) if untimed else Timeline()
        base = base.copy() if keep else base
        for other in untimed:
            if other is not base:
                base.fill(other)
        return base
    timed.sort(key=lambda t: (t.times[0], t.file))
    merged = timed[0].copy() if keep else timed[0]
    for line in timed[1:]:
        if line.times[0] < merged.times[-1]:  # running beside the timeline: another rank's file
            if len(line) > len(merged):
                line, merged = merged, line.copy() if keep else line
            merged.fill(line)
            continue
        resumed = set(line.restart_at)
        for i, step in enumerate(line.steps):  # the job went on in a new file (a restart writes one)
            if until_step is not None and step > until_step:
                break
            record = Record(step=step, where=f"record of step {step}")
            for c, values in line.columns.items():
                setattr(record, c, None if math.isnan(values[i]) else values[i])
            merged.add(record, line.file)
            if i in resumed:
                merged.restart_at.append(len(merged) - 1)
        merged.restarts += line.restarts
        merged.noise += [n for n in line.noise]
    for other in untimed:
        merged.fill(other)
    return merged
