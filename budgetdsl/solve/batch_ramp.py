"""A batch-size ramp: stages whose global batch follows the gradient noise scale as it grows.

The model (McCandlish et al. 2018, eq. 2.11 read step by step, and their adaptive-batch discussion
in section 2.3): a step at batch B makes 1/(1 + B_noise/B) of the progress of a step at an infinite
batch. Measure progress φ in minimal steps, as a fraction of the run's S_min (φ from 0 to 1). Then

    dS = S_min (1 + B_noise(φ)/B(φ)) dφ        dE = B dS = S_min (B(φ) + B_noise(φ)) dφ

and the run's E_min = S_min ∫ B_noise dφ, so the critical batch of a fixed-batch run is the
progress-average B_crit = E_min/S_min = ∫₀¹ B_noise dφ. Consequences this module relies on:

- a fixed batch B gives S = S_min (1 + B_crit/B), E = E_min (1 + B/B_crit): the solver's frontier;
- an adaptive batch B = x·B_noise(φ) gives exactly S = S_min (1 + 1/x), E = E_min (1 + x);
- a stage on [φ₀, φ₁] at B_k = x·(mean B_noise over the stage) takes exactly S_min (1 + 1/x)(φ₁ − φ₀)
  steps and E_min,k (1 + x) tokens, so a K-stage ramp planned this way meets the closed form for any K;
  snapping each stage to a launchable batch (whole accumulation steps) moves it off slightly.
  Note what follows: at equal x, the ramp and a fixed batch at x·B_crit cost the same steps and tokens
  in this model (both lie on (S/S_min − 1)(E/E_min − 1) = 1); a ramp saves against a fixed batch whose
  x differs from the ramp's (for instance one pushed to a large x by a deadline, or chosen at the
  end-of-training B_noise), and it is then the fixed batch's position on the frontier that is
  priced. Among all schedules, ⟨B_noise/B⟩·⟨B⟩ ≥ ⟨√B_noise⟩² (Cauchy-Schwarz), so the product
  (S/S_min − 1)(E/E_min − 1) can fall below 1 only for a batch that tracks √B_noise.

The assumption that maps the proxy onto the target run (`NoiseTrajectory.from_calibration`):
**B_noise has the same shape against the fraction of training progress φ in the proxy's run and in
the target run; its level is the plan's B_crit.** The proxy's steps at its fixed batch B_p become
progress by dφ ∝ dS/(1 + B_noise/B_p); the trajectory is then scaled so that its progress-average
equals the plan's B_crit, which keeps the fixed-batch plan and the ramp on one model (one stage
reproduces the plan exactly). Limits: the proxy's run covers the part of training it covers — if the
target trains much further down the loss curve, its late B_noise growth is not in the shape; the
first points of a trajectory (warmup, an EMA still filling) are dropped, and before the first kept
point B_noise is held at its first value; without a calibration (noise from b_crit or kaplan_loss)
there is no trajectory and B_noise is taken constant, so stages can only cost, never save — unless
the stages carry their own b_noise (`NoiseTrajectory.from_stages`: what `budgetdsl track --replan`
writes from the B_noise a run measured).

Pure Python, no numpy: the planner imports this module.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, cast

if TYPE_CHECKING:
    from budgetdsl.plan.calibration_file import CalibrationFile

ASSUMPTION = ("B_noise has the same shape against the fraction of training progress (in minimal "
              "steps) in the proxy's run and the target run; its level is scaled so that its "
              "progress-average equals the plan's B_crit")
STAGES_ASSUMPTION = ("B_noise over each stage is the stage's b_noise (the run's measured B_noise "
                     "extrapolated by `budgetdsl track --replan`); its level is scaled so that its "
                     "progress-average equals the plan's B_crit")
# The longest proxy run whose trajectory a ramp follows: φ is summed once per proxy step, and the
# file is untrusted (a last step of 10**12 looped for hours). `budgetdsl calibrate` runs 300 steps.
MAX_PROXY_STEPS = 1_000_000
# The progress over which B_noise steps from one stage's value to the next (from_stages).
STEP_WIDTH = 1e-9


def _short(step: int) -> str:
    """A step of an untrusted file for a message: digits, at most 20 of them."""
    text = str(step)
    return text if len(text) <= 20 else f"{text[:8]}…({len(text)} digits)"


def _usable(point) -> bool:
    """A trajectory point with a positive, finite B_simple (in examples and in tokens)."""
    return (point.b_simple is not None and point.b_simple_tokens is not None
            and 0 < point.b_simple < math.inf and 0 < point.b_simple_tokens < math.inf)


@dataclass(frozen=True)
class NoiseTrajectory:
    """B_noise (tokens) against progress φ ∈ [0, 1], piecewise linear between points, constant
    beyond the ends."""

    progress: tuple[float, ...]
    b_noise: tuple[float, ...]
    source: str = "synthetic"

    def __post_init__(self) -> None:
        if len(self.progress) != len(self.b_noise) or not self.progress:
            raise ValueError("a trajectory needs as many progress values as B_noise values, at least one")
        if any(b <= 0 or not math.isfinite(b) for b in self.b_noise):
            raise ValueError("B_noise must be positive and finite")
        if any(q <= p for p, q in zip(self.progress, self.progress[1:])):
            raise ValueError("progress must increase strictly")

    @classmethod
    def constant(cls, b_noise: float, source: str = "constant") -> NoiseTrajectory:
        return cls((0.0, 1.0), (b_noise, b_noise), source)

    def at(self, phi: float) -> float:
        p, b = self.progress, self.b_noise
        if phi <= p[0]:
            return b[0]
        if phi >= p[-1]:
            return b[-1]
        lo, hi = 0, len(p) - 1
        while hi - lo > 1:
            mid = (lo + hi) // 2
            lo, hi = (mid, hi) if p[mid] <= phi else (lo, mid)
        t = (phi - p[lo]) / (p[hi] - p[lo])
        return b[lo] + t * (b[hi] - b[lo])

    def integral(self, a: float, b: float) -> float:
        """∫_a^b B_noise dφ, exact for the piecewise-linear trajectory (trapezoids)."""
        if b <= a:
            return 0.0
        knots = [a] + [p for p in self.progress if a < p < b] + [b]
        return sum(0.5 * (self.at(x0) + self.at(x1)) * (x1 - x0) for x0, x1 in zip(knots, knots[1:]))

    def mean(self, a: float = 0.0, b: float = 1.0) -> float:
        return self.integral(a, b) / (b - a)

    def scaled_to_mean(self, b_crit: float) -> NoiseTrajectory:
        """The same shape with ∫₀¹ B_noise dφ = b_crit (the fixed-batch B_crit = E_min/S_min)."""
        k = b_crit / self.mean()
        return NoiseTrajectory(self.progress, tuple(k * v for v in self.b_noise), self.source)

    @classmethod
    def from_stages(cls, stages: Sequence[tuple[float, float, float]],
                    source: str = "the stages' b_noise") -> NoiseTrajectory:
        """B_noise held at each stage's mean over the stage, from stages (until: fraction of the
        run's tokens, batch tokens, mean B_noise tokens) as `budgetdsl track --replan` writes them.
        A stage's tokens are S_min (B + b_noise) Δφ (module docstring), so its share of progress is
        Δφ ∝ Δuntil / (B + b_noise). Each step between stages is a ramp STEP_WIDTH of progress wide
        (the trajectory is piecewise linear): a stage's mean moves by less than that fraction."""
        shares = [(until - before) / (batch + b) for before, (until, batch, b)
                  in zip([0.0] + [u for u, _, _ in stages], stages)]
        total = sum(shares)
        progress, b_noise, acc = [0.0], [stages[0][2]], 0.0
        for (_, _, b), share, after in zip(stages, shares, [*stages[1:], None]):
            acc += share / total
            end = 1.0 if after is None else acc
            if progress[-1] < end:
                progress.append(end)
                b_noise.append(b)
            if after is not None and progress[-1] < end + STEP_WIDTH < 1.0:
                progress.append(end + STEP_WIDTH)
                b_noise.append(after[2])
        return cls(tuple(progress), tuple(b_noise), source)

    @classmethod
    def from_calibration(cls, cal: CalibrationFile, name: str = "calibration") -> NoiseTrajectory:
        """The proxy's B_simple trajectory against progress (module docstring): its fixed batch B_p
        turns each step into dφ ∝ 1/(1 + B_noise/B_p) minimal steps; points inside the warmup or
        the first EMA window, or without a positive B_simple, are dropped."""
        p = cal.provenance
        for before, after in zip(cal.trajectory, cal.trajectory[1:]):
            if not 0 <= before.step < after.step:  # the file is untrusted: its steps, too
                raise ValueError(f"{name}'s trajectory steps are not in increasing order (step "
                                 f"{_short(after.step)} follows step {_short(before.step)})")
        if cal.trajectory and cal.trajectory[-1].step > MAX_PROXY_STEPS:
            raise ValueError(f"{name}'s trajectory runs to step {_short(cal.trajectory[-1].step)}: "
                             f"a proxy run of more than {MAX_PROXY_STEPS:,} steps is not supported")
        batch = p.batch.global_batch_examples
        beta = p.estimator.ema_beta
        window = (1.0 + beta) / (1.0 - beta) if beta < 1 else 0.0
        start = p.optimizer.warmup_steps + window
        # (step, B_simple, in tokens) of the usable points: both known and positive (`_usable`)
        pts = cast(list[tuple[int, float, float]],
                   [(t.step, t.b_simple, t.b_simple_tokens) for t in cal.trajectory if _usable(t) and t.step >= start])
        if len(pts) < 2:
            pts = cast(list[tuple[int, float, float]],
                       [(t.step, t.b_simple, t.b_simple_tokens) for t in cal.trajectory if _usable(t)])
        if not pts:
            raise ValueError(f"{name} has no positive B_simple in its trajectory: no ramp can follow it")
        steps = [s for s, _, _ in pts]
        examples = [b for _, b, _ in pts]
        last = steps[-1]

        # φ(step) = Σ 1/(1 + B_noise/B_p) over the proxy's steps 0..step (McCandlish eq. 2.11 per step),
        # B_noise in examples interpolated between the kept points and held at the ends. The steps
        # increase, so one pass walks the segments (a scan per step was steps × points).
        phi_at: dict[int, float] = {}
        acc = 0.0
        wanted = set(steps)
        i = 1
        for s in range(last + 1):
            if s <= steps[0]:
                b = examples[0]
            else:
                while s > steps[i]:
                    i += 1
                t = (s - steps[i - 1]) / (steps[i] - steps[i - 1])
                b = examples[i - 1] + t * (examples[i] - examples[i - 1])
            acc += 1.0 / (1.0 + b / batch)
            if s in wanted:
                phi_at[s] = acc
        total = acc
        progress = [0.0] + [phi_at[s] / total for s in steps]
        tokens = [pts[0][2]] + [tk for _, _, tk in pts]
        # the first kept point may sit at φ = 0 exactly (a proxy that starts measuring at step 0)
        out_p: list[float] = []
        out_b: list[float] = []
        for q, b in zip(progress, tokens):
            if out_p and q <= out_p[-1]:
                out_b[-1] = b
                continue
            out_p.append(q)
            out_b.append(b)
        if out_p[-1] < 1.0:
            out_p.append(1.0)
            out_b.append(out_b[-1])
        return cls(tuple(out_p), tuple(out_b), f"{name}: B_simple of {p.model.name} at batch {batch}, "
                   f"steps {steps[0]}–{last}")


@dataclass(frozen=True)
class StageCost:
    start: float  # progress φ
    end: float
    batch: float  # tokens
    b_noise: float  # mean over the stage, tokens
    steps: float
    tokens: float

    @property
    def x(self) -> float:
        return self.batch / self.b_noise


def stage_cost(traj: NoiseTrajectory, s_min: float, start: float, end: float, batch: float) -> StageCost:
    """Steps S_min ∫(1 + B_noise/B)dφ and tokens B·S over [start, end] at a constant batch."""
    integral = traj.integral(start, end)
    steps = s_min * ((end - start) + integral / batch)
    return StageCost(start, end, batch, integral / (end - start), steps, batch * steps)


def auto_boundaries(traj: NoiseTrajectory, k: int) -> list[float]:
    """K stages with equal growth of B_noise between them: boundaries where the running maximum of
    B_noise crosses the geometric steps between its first and last value; equal shares of progress
    when B_noise does not grow."""
    lo, hi = traj.at(0.0), max(traj.b_noise)
    if k == 1:
        return [0.0, 1.0]
    if hi <= lo * 1.0001:
        return [i / k for i in range(k + 1)]
    levels = [lo * (hi / lo) ** (i / k) for i in range(1, k)]
    grid = [i / 2000 for i in range(2001)]
    running, out = 0.0, [0.0]
    it = iter(levels)
    level = next(it, None)
    for phi in grid:
        running = max(running, traj.at(phi))
        while level is not None and running >= level:
            if phi > out[-1]:
                out.append(phi)
            level = next(it, None)
    out.append(1.0)
    return out


def plan_auto(traj: NoiseTrajectory, s_min: float, k: int, x: float,
              snap: Callable[[float], float] | None = None) -> list[StageCost]:
    """K stages, each at x·(its mean B_noise), snapped to a launchable batch by `snap`."""
    bounds = auto_boundaries(traj, k)
    out = []
    for a, b in zip(bounds, bounds[1:]):
        batch = x * traj.mean(a, b)
        out.append(stage_cost(traj, s_min, a, b, snap(batch) if snap else batch))
    return out


def stages_from_token_fractions(traj: NoiseTrajectory, s_min: float,
                                stages: Sequence[tuple[float, float]]) -> list[StageCost]:
    """Stages given as (until: fraction of the run's tokens, batch tokens), as in the plan, in
    progress: the run's total tokens E_T is the fixed point of "walk the stages, each ending at
    until·E_T, until progress reaches 1" (bisection; the tokens of a run lie between those of its
    smallest and largest batch held throughout)."""
    batches = [b for _, b in stages]
    e_min = s_min * traj.integral(0.0, 1.0)
    lo = s_min * min(batches) + e_min
    hi = s_min * max(batches) + e_min

    def walk(total: float) -> tuple[float, list[StageCost]]:
        phi, used, costs = 0.0, 0.0, []
        for i, (until, batch) in enumerate(stages):
            budget = until * total - used  # tokens this stage may use
            last = i == len(stages) - 1
            if budget <= 0 and not last:
                continue
            # tokens from phi to 1 at this batch
            full = s_min * (batch * (1.0 - phi) + traj.integral(phi, 1.0))
            if last or full <= budget:
                costs.append(stage_cost(traj, s_min, phi, 1.0, batch))
                return used + full, costs
            a, b = phi, 1.0  # find the end where the stage's tokens equal its budget
            for _ in range(60):
                m = 0.5 * (a + b)
                if s_min * (batch * (m - phi) + traj.integral(phi, m)) < budget:
                    a = m
                else:
                    b = m
            costs.append(stage_cost(traj, s_min, phi, b, batch))
            used += costs[-1].tokens
            phi = b
        return used, costs

    a, b = lo, hi
    for _ in range(80):
        m = 0.5 * (a + b)
        if walk(m)[0] > m:
            a = m
        else:
            b = m
    return walk(0.5 * (a + b))[1]


def totals(costs: Sequence[StageCost]) -> tuple[float, float]:
    return sum(c.steps for c in costs), sum(c.tokens for c in costs)


def adaptive_closed_form(s_min: float, e_min: float, x: float) -> tuple[float, float]:
    """S = S_min (1 + 1/x), E = E_min (1 + x): an adaptive batch B = x·B_noise (module docstring)."""
    return s_min * (1.0 + 1.0 / x), e_min * (1.0 + x)
