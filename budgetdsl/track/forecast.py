"""Plan versus actual: what the run has done, how fast, where it sits on the frontier, and when it
will finish — with an interval — and which limit of the plan breaks and when.

Throughput is the tokens of the intervals between logged steps over their time, downtime left out.
An interval is downtime when it crosses a restart, or when its time per step exceeds GAP times the
median (a requeue, a hang); its time beyond the median pace is the downtime. The interval of the
rate is the batch-means one: the valid intervals in BLOCKS contiguous blocks, the mean rate ±
Z standard errors of the block rates. The remaining tokens take remaining / rate of compute and the
observed share of downtime on top; the low end assumes no more downtime. GPU-hours count the GPUs
as held for the whole wall clock, downtime included (a requeue may release them: an upper bound).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from budgetdsl.solve.solution import Solution
from budgetdsl.theory.frontier import e_over_emin, s_over_smin
from budgetdsl.track.record import LogError
from budgetdsl.track.run import Timeline

GAP = 5.0  # an interval slower than GAP × the median pace per step is downtime
BLOCKS = 10
Z = 1.96  # two-sided 95 % for the mean of the block rates (normal approximation)
MIN_INTERVALS = 6  # fewer valid intervals than this: "too few points"
BATCH_TOLERANCE = 0.02  # a log whose tokens per step differ more from the plan's batch is another run's
LIMITS = ("deadline", "flops", "gpu_hours", "usd")


@dataclass
class Span:
    value: float
    low: float
    high: float


@dataclass
class LimitForecast:
    name: str
    unit: str
    limit: float
    forecast: float
    low: float
    high: float
    breaks: bool  # the forecast passes the limit
    at_risk: bool  # the interval's high end passes it
    when: float | None  # Unix time at which it is reached, when it breaks or is at risk


@dataclass
class Track:
    """Everything the report shows; times are Unix seconds, tokens and rates in tokens."""

    plan: str
    feasible: bool
    files: list[str]
    records: int
    steps_done: int
    steps_planned: int | None
    tokens_done: float
    tokens_planned: float | None
    tokens_source: str  # logged | samples × seq_len | steps × planned batch
    batch_tokens: float | None
    batch_planned: float | None
    start: float | None
    last: float | None
    elapsed_s: float | None
    downtime_s: float
    restarts: list[dict]
    step_time_s: float | None
    step_time_planned: float | None
    tokens_per_s: Span | None
    tokens_per_s_planned: float | None
    mfu: float | None
    mfu_planned: float | None
    tflops_per_gpu_logged: float | None
    loss: float | None
    b_noise: dict | None
    b_crit: float
    b_crit_uncertainty: float | None
    frontier: dict
    status: str  # on_track | breaks | finished | too_few_points | no_times | no_plan
    reason: str
    finish: Span | None = None
    wall_clock_s: Span | None = None
    gpu_hours: Span | None = None
    usd: Span | None = None
    flops: float | None = None
    limits: list[LimitForecast] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def breaks(self) -> bool:
        return any(limit.breaks for limit in self.limits)


def _column(line: Timeline, name: str) -> np.ndarray | None:
    """A logged column as a float array sharing the timeline's memory; None when nothing logged it."""
    values = line.columns.get(name)
    return None if values is None else np.frombuffer(values, dtype=np.float64)


def tokens_of(line: Timeline, solution: Solution, seq_len: int | None) -> tuple[np.ndarray, str]:
    steps = np.frombuffer(line.steps, dtype=np.int64).astype(float)
    tokens = _column(line, "tokens")
    if tokens is not None and len(tokens) and (not math.isnan(tokens[-1]) or not np.isnan(tokens).all()):
        return tokens, "logged"
    samples = _column(line, "samples")
    if seq_len and samples is not None and not np.isnan(samples).all():
        return samples * seq_len, "samples × seq_len"
    if solution.batch.tokens is None:
        return np.full_like(steps, np.nan), "unknown"
    return steps * solution.batch.tokens, "steps × planned batch"


def analyse(line: Timeline, solution: Solution, files: list[str], seq_len: int | None) -> Track:
    """The comparison of `line` (a merged run) with `solution` (its plan, solved)."""
    if not len(line):
        raise LogError(files[0] if files else "run", "", "no step with a metric track reads",
                       "name the tags with --metric (e.g. --metric loss=train/loss_step)")
    steps = np.frombuffer(line.steps, dtype=np.int64).astype(float)
    times = np.frombuffer(line.times, dtype=np.float64)
    tokens, tokens_source = tokens_of(line, solution, seq_len)
    thr = solution.throughput
    batch_planned = solution.batch.tokens
    rate_planned = batch_planned / thr.step_time_s if thr and batch_planned and thr.step_time_s > 0 else None
    losses = _column(line, "loss")
    if losses is not None and len(losses) and not math.isnan(losses[-1]):
        known_loss = losses[-1:]  # the usual case: the last step logged a loss (no copy of the column)
    else:
        known_loss = losses[~np.isnan(losses)] if losses is not None else np.empty(0)
    tflops = _column(line, "tflops_per_gpu")
    tflops = tflops[~np.isnan(tflops)] if tflops is not None else np.empty(0)
    noise = line.noise[-1] if line.noise else None
    b_crit = solution.frontier.b_crit_tokens
    track = Track(
        plan=solution.plan, feasible=solution.feasible, files=files, records=len(line),
        steps_done=int(steps[-1]), steps_planned=solution.steps,
        tokens_done=float(np.nanmax(tokens)) if not np.isnan(tokens).all() else 0.0,
        tokens_planned=solution.tokens, tokens_source=tokens_source, batch_tokens=None,
        batch_planned=batch_planned, start=None, last=None, elapsed_s=None, downtime_s=0.0,
        restarts=[{"file": r.file, "where": r.where, "from_step": r.from_step, "to_step": r.to_step,
                   "dropped_records": r.dropped} for r in line.restarts],
        step_time_s=None, step_time_planned=thr.step_time_s if thr else None, tokens_per_s=None,
        tokens_per_s_planned=rate_planned, mfu=None, mfu_planned=thr.mfu if thr else None,
        tflops_per_gpu_logged=float(np.median(tflops[-max(1, len(tflops) // 4):])) if len(tflops) else None,
        loss=float(known_loss[-1]) if len(known_loss) else None,
        b_noise={"step": noise.step, "tokens": noise.b_noise, "low": noise.low, "high": noise.high,
                 "over_b_crit": noise.b_noise / b_crit} if noise else None,
        b_crit=b_crit, b_crit_uncertainty=solution.frontier.b_crit_uncertainty, frontier={},
        status="too_few_points", reason="")
    if not solution.feasible:
        track.notes.append("the plan itself is infeasible (`budgetdsl plan` says why): the limits are "
                           "compared with the forecast all the same")
    ok = ~np.isnan(times) & ~np.isnan(tokens)
    if ok.sum() < 2:
        track.status = "no_times" if np.isnan(times).all() else "too_few_points"
        track.reason = ("the logs carry no wall times (trainer_state.json, gns files): add the run's "
                        "TensorBoard events or a timed log" if track.status == "no_times"
                        else "fewer than two timed steps")
        _frontier(track, None)
        return track
    resumed = set(line.restart_at)
    idx = np.flatnonzero(ok) if not ok.all() else None  # None: every step timed, the columns as they are
    s, t, e = (steps, times, tokens) if idx is None else (steps[idx], times[idx], tokens[idx])
    ds, dt, de = np.diff(s), np.diff(t), np.diff(e)
    crosses = np.zeros(len(ds), dtype=bool)
    for r in resumed:  # the interval from the last timed record before a restart to the next one
        at = r if idx is None else int(np.searchsorted(idx, r))
        if 1 <= at < len(s):
            crosses[at - 1] = True
    pace = dt / ds
    median_pace = float(np.median(pace[~crosses])) if (~crosses).any() else float(np.median(pace))
    gap = crosses | (pace > GAP * median_pace)
    downtime = float(np.clip(dt[gap] - ds[gap] * median_pace, 0, None).sum())
    valid = ~gap & (dt > 0)
    track.start = float(t[0] - s[0] * median_pace)  # the steps before the first record, at the median pace
    track.last = float(t[-1])
    track.elapsed_s = track.last - track.start
    track.downtime_s = downtime
    track.step_time_s = median_pace
    track.batch_tokens = float(np.median(de[valid] / ds[valid])) if valid.any() else None
    if tokens_source == "logged" and track.batch_tokens and batch_planned and solution.ramp is None \
            and abs(track.batch_tokens / batch_planned - 1) > BATCH_TOLERANCE:
        raise LogError(line.file, "", f"the log's batch is {track.batch_tokens:,.0f} tokens per step, the "
                       f"plan's {batch_planned:,.0f}: a log of another run?",
                       "track the run with the plan that launched it, or map the tokens metric "
                       "(--metric tokens=NAME)")
    _frontier(track, track.batch_tokens)
    if valid.sum() < MIN_INTERVALS:
        track.status, track.reason = "too_few_points", (
            f"{int(valid.sum())} timed intervals between logged steps; the forecast needs {MIN_INTERVALS}")
        return track
    de_valid, dt_valid = de[valid], dt[valid]
    rate = float(de_valid.sum() / dt_valid.sum())
    count = min(BLOCKS, len(de_valid) // 2)
    starts = [i * len(de_valid) // count for i in range(count)]
    block_de, block_dt = np.add.reduceat(de_valid, starts), np.add.reduceat(dt_valid, starts)
    block_rates = block_de[block_dt > 0] / block_dt[block_dt > 0]
    se = float(np.std(block_rates, ddof=1) / math.sqrt(len(block_rates))) if len(block_rates) > 1 else 0.0
    low_rate, high_rate = max(rate - Z * se, rate * 1e-3), rate + Z * se
    track.tokens_per_s = Span(rate, low_rate, high_rate)
    if thr and thr.mfu is not None and rate_planned:
        track.mfu = thr.mfu * rate / rate_planned  # same f, G and peak: MFU scales with tokens/s
    if solution.tokens is None:
        track.status, track.reason = "no_plan", "the plan has no configuration to compare with (infeasible)"
        return track
    _forecast(track, solution, rate, low_rate, high_rate)
    return track


def _frontier(track: Track, batch: float | None) -> None:
    if not batch:
        return
    x = batch / track.b_crit
    track.frontier = {"batch_tokens": batch, "x": x, "s_over_smin": s_over_smin(track.b_crit, batch),
                      "e_over_emin": e_over_emin(track.b_crit, batch)}
    if track.b_noise:
        bn = track.b_noise["tokens"]
        track.frontier |= {"x_measured": batch / bn, "s_over_smin_measured": s_over_smin(bn, batch),
                           "e_over_emin_measured": e_over_emin(bn, batch)}


def _forecast(track: Track, solution: Solution, rate: float, low_rate: float, high_rate: float) -> None:
    assert track.start is not None and track.last is not None and track.elapsed_s is not None
    planned = float(solution.tokens or 0.0)
    remaining = max(planned - track.tokens_done, 0.0)
    share = track.downtime_s / track.elapsed_s if track.elapsed_s > 0 else 0.0
    stretch = 1 / (1 - share) if share < 0.99 else 100.0  # wall per compute second, downtime included
    left = Span(remaining / rate * stretch, remaining / high_rate, remaining / low_rate * stretch)
    track.finish = Span(track.last + left.value, track.last + left.low, track.last + left.high)
    track.wall_clock_s = Span(*(f - track.start for f in (track.finish.value, track.finish.low, track.finish.high)))
    gpus = solution.gpus or 0
    track.gpu_hours = Span(*(w * gpus / 3600 for w in (track.wall_clock_s.value, track.wall_clock_s.low,
                                                      track.wall_clock_s.high)))
    price = solution.usd / solution.gpu_hours if solution.usd is not None and solution.gpu_hours else None
    if price is not None:
        track.usd = Span(track.gpu_hours.value * price, track.gpu_hours.low * price, track.gpu_hours.high * price)
    per_token = solution.flops / planned if solution.flops and planned else None
    track.flops = per_token * max(planned, track.tokens_done) if per_token else None
    if remaining == 0:
        track.status, track.reason = "finished", "the planned tokens are done"
    for c in solution.constraints:
        if c.name not in LIMITS:
            continue
        if c.name == "deadline":
            value, (low, high) = track.wall_clock_s.value, (track.wall_clock_s.low, track.wall_clock_s.high)
            when: float | None = track.start + c.limit
        elif c.name == "gpu_hours":
            value, low, high = track.gpu_hours.value, track.gpu_hours.low, track.gpu_hours.high
            when = track.start + c.limit * 3600 / gpus if gpus else None
        elif c.name == "usd" and track.usd is not None and price:
            value, low, high = track.usd.value, track.usd.low, track.usd.high
            when = track.start + c.limit / price * 3600 / gpus if gpus else None
        elif c.name == "flops" and track.flops is not None and per_token:
            value = low = high = track.flops
            at = c.limit / per_token  # tokens at which the budget is spent
            when = track.last + max(at - track.tokens_done, 0.0) / rate * stretch
        else:
            continue
        breaks, at_risk = value > c.limit, high > c.limit
        track.limits.append(LimitForecast(c.name, c.unit, c.limit, value, low, high, breaks, at_risk,
                                          when if breaks or at_risk else None))
    if track.status != "finished":
        broken = [limit.name for limit in track.limits if limit.breaks]
        track.status = "breaks" if broken else "on_track"
        track.reason = (f"forecast to break: {', '.join(broken)}" if broken
                        else "every limit holds at the forecast")
