"""The calibration file: what `budgetdsl calibrate` measured, in a versioned, validated schema, and
the one question the planner asks of it: B_crit (in tokens) at a given loss, with its uncertainty.

The planner imports this module, so it imports neither torch nor numpy: planning starts fast.

Units: batch sizes in examples (`*_examples` or bare `b_simple`) and in tokens (`*_tokens`);
losses in nats per token of the proxy's own data and tokenizer — B_crit transfers between models
at equal loss on the same data (docs/design.md section 1), so a byte-level loss is not a BPE loss.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from budgetdsl.plan.diagnostics import Location
from budgetdsl.plan.model import (
    MAX_BATCH,
    MAX_BYTES,
    MAX_FLOP_RATE,
    MAX_FLOPS_PER_TOKEN,
    MAX_GPUS,
    MAX_LOSS,
    MAX_MICRO_BATCH,
    MAX_PARAMS,
    MAX_SECONDS,
    MAX_SEQ_LEN,
    MAX_STEPS,
    MAX_TOKENS,
    MAX_VOCAB,
    MIN_LOSS,
)
from budgetdsl.theory.noise_scale import DEFAULT_NOISE_SCALE

# 2 added `provenance.batch.context`; files of version 1 still load (CalibrationFile.context).
SCHEMA_VERSION: Final = 2
READABLE_VERSIONS: Final = (1, 2)
FIT_FORM: Final = "B_crit(L) = B_star / L**(1/alpha)"
# How far outside the measured loss range b_crit_tokens_at answers without `extrapolate`:
# a tenth of the range's width, and never less than 2% of the loss itself.
RANGE_MARGIN = 0.1
RANGE_MARGIN_MIN = 0.02
# How far `extrapolate: true` carries the fit beyond its measured losses: as far again as the range
# it measured (its width), and at least 5 % of the loss. Beyond that the law B*/L^(1/α) is read
# where nothing was measured within a range's length, and reading it is an error, not a risk.
EXTRAPOLATE_WIDTHS = 1.0
EXTRAPOLATE_MIN = 0.05


def sequence_context(tokens_per_example: int) -> int | None:
    """The context a calibration records: its tokens per example where they form a sequence (more
    than one; a factory whose sampler declares no tokens per example counts 1 and has none)."""
    return tokens_per_example if tokens_per_example > 1 else None


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ModelInfo(_Model):
    name: str  # a named GPT size, or the factory's package.module:function
    kind: Literal["gpt", "factory"]
    config: dict[str, Any] = {}
    n_params: int
    flops_per_token: float | None = None


class TokenStats(_Model):
    """Statistics of the training tokens a calibration measured (the first `tokens` of them)."""

    tokens: int
    distinct: int
    max_token: int  # below 256: byte-level tokens, whatever the corpus is called
    unigram_entropy: float  # nats per token of the unigram distribution


class DataInfo(_Model):
    kind: Literal["stdlib", "text", "tokens", "factory"]
    source: str
    sha256: str | None  # of the tokens used (train then held-out); None for a factory
    heldout: bool  # False: the losses below are training losses
    vocab_size: int | None = None
    train_tokens: int | None = None
    heldout_tokens: int | None = None
    files: int | None = None
    token_stats: TokenStats | None = None  # None: not recorded (a factory, an older writer)


class OptimizerInfo(_Model):
    name: str
    lr: float  # peak learning rate; 0 measures at fixed weights
    weight_decay: float
    betas: tuple[float, float] | None = None
    warmup_steps: int
    grad_clip: float | None  # the norms in this file are measured before clipping


class BatchSetup(_Model):
    global_batch_examples: int  # B_big
    micro_batch_examples: int  # B_small
    accumulation: int
    world_size: int
    tokens_per_example: int
    # Tokens per example the loss is computed over (a GPT's block size): B_crit in tokens moves with
    # it (budgetdsl.theory.context_scaling). None: not a token sequence, or a file of schema 1.
    context: int | None = None


class EstimatorInfo(_Model):
    method: Literal["mccandlish-2018-two-batch"] = "mccandlish-2018-two-batch"
    ema_beta: float  # 1.0: plain mean over all steps (fixed weights)
    confidence: float
    # Fieller's interval with the per-step covariance from successive differences (calibrate/noise.py);
    # "fieller-batch-means" is what files written before that label was corrected say.
    interval: Literal["fieller-successive-differences", "fieller-batch-means"] = "fieller-successive-differences"


class Provenance(_Model):
    tool: str
    created_at: str
    command: list[str]
    torch_version: str
    python_version: str
    platform: str
    seed: int
    model: ModelInfo
    data: DataInfo
    optimizer: OptimizerInfo
    batch: BatchSetup
    estimator: EstimatorInfo
    amp: Literal["none", "bf16", "fp16"]


class TrajectoryPoint(_Model):
    """State at an evaluation step; smoothed values cover the steps up to and including this one."""

    step: int
    examples: int  # consumed by the run so far, this step's batch included
    tokens: int
    loss: float  # held-out loss at this step's weights
    loss_smoothed: float  # held-out loss averaged with the estimator's weights: the loss of b_simple
    grad_sq: float  # smoothed |G|²
    trace_sigma: float  # smoothed tr Σ (per example)
    b_simple: float | None  # examples; None while |G|² is not positive
    b_simple_tokens: float | None
    ci_low: float | None  # examples; None: unbounded
    ci_high: float | None
    n_eff: float | None = None  # effective number of steps behind the smoothed values (1/Σw²)
    # B_simple of Adam's preconditioned gradient P⊙g, P = 1/(√v̂ + ε) (calibrate/step.py), examples
    b_simple_pre: float | None = None
    ci_low_pre: float | None = None
    ci_high_pre: float | None = None


class RawEstimates(_Model):
    """Per-step unbiased estimates, one entry per measured step (columns)."""

    step: list[int]
    train_loss: list[float | None]  # None: a step before any loss was observed (an integration's log)
    grad_sq_small: list[float]  # mean over micro-batches of |g_small|²
    grad_sq_big: list[float]  # |g_big|²
    grad_sq: list[float]  # |G|² (McCandlish A.2)
    trace_sigma: list[float]  # tr Σ (A.3)
    skipped_steps: list[int] = []  # non-finite loss or gradient: not measured, not applied
    # The same norms of Adam's preconditioned gradient; None where not measured (first step, SGD)
    grad_sq_small_pre: list[float | None] | None = None
    grad_sq_big_pre: list[float | None] | None = None


class Fit(_Model):
    form: Literal["B_crit(L) = B_star / L**(1/alpha)"] = FIT_FORM
    b_star_tokens: float
    alpha: float
    alpha_se: float
    # Covariance of (ln B*, 1/α), from weighted least squares in log space.
    cov: tuple[tuple[float, float], tuple[float, float]]
    loss_min: float
    loss_max: float
    n_points: int  # bounded and censored (one end open) points in the likelihood
    reduced_chi2: float
    n_censored: int = 0  # of n_points, intervals open at one end (used as bounds)
    n_unbounded: int = 0  # points open at both ends (no information)
    slope_z: float | None = None  # 1/α over its standard error; None: not recorded (older files)
    # Whose B_simple the law is of: the raw gradient's, or Adam's preconditioned one
    # (budgetdsl.theory.noise_scale.DEFAULT_NOISE_SCALE decides; files before it: raw)
    noise_scale: Literal["raw", "preconditioned"] = "raw"


class Summary(_Model):
    step: int
    loss: float  # loss_smoothed of the last trajectory point
    b_simple: float | None  # examples
    b_simple_tokens: float | None
    ci_low: float | None
    ci_high: float | None
    ci_low_tokens: float | None
    ci_high_tokens: float | None
    confidence: float
    n_eff: float | None = None  # effective number of steps behind the interval (1/Σw² of the EMA)
    steps_measured: int
    steps_skipped: int
    skipped_reasons: dict[str, int] = {}  # why the skipped steps were not measured, counted
    # B_simple of Adam's preconditioned gradient (examples), recorded beside the raw one; the
    # planner reads the one budgetdsl.theory.noise_scale chose (docs/calibration.md: the raw one).
    b_simple_pre: float | None = None
    ci_low_pre: float | None = None
    ci_high_pre: float | None = None
    steps_measured_pre: int = 0


class MemoryPoint(_Model):
    micro_batch_examples: int
    peak_bytes: int


class HardwareProfile(_Model):
    device: str  # "cpu", "cuda"
    device_name: str
    world_size: int
    threads: int | None = None
    step_time_s: float | None = None  # median optimizer step, measurement included, eval excluded
    tokens_per_s: float | None = None  # whole run (all replicas)
    examples_per_s: float | None = None
    memory: list[MemoryPoint] = []  # CUDA only: peak memory of forward+backward per micro-batch


class SweepRun(_Model):
    """One training run of a frontier sweep: a constant batch, trained from the shared start until
    the held-out loss reaches the sweep's target (or `max_steps`)."""

    batch_examples: int
    batch_tokens: int
    micro_batch_examples: int  # B_small of the B_simple estimator in this run
    lr: float  # constant after warmup
    lr_multiplier: float  # of the lr rule's value (a point of --lr-grid; 1 without a grid)
    best: bool  # the run whose steps-to-target represents this batch (fewest steps of the grid)
    reached: bool
    steps_run: int
    steps_to_target: float | None  # updates until the held-out loss crosses the target, interpolated
    examples_to_target: float | None
    tokens_to_target: float | None
    final_loss: float  # held-out loss at the last evaluation
    eval_steps: list[int]  # held-out loss after this many updates
    eval_losses: list[float]
    # B_simple measured in this run (McCandlish appendix A), over the last quarter of the steps
    # before the target: mean tr Sigma over mean |G|^2, in examples; None when |G|^2 <= 0.
    grad_sq: float | None
    trace_sigma: float | None
    b_simple: float | None
    # B_simple averaged over the whole run, each step weighted by its share of S_min,
    # dS_min = dS / (1 + B_noise/B) (McCandlish eq. 2.11 read locally): what B_crit averages.
    b_simple_run_mean: float | None
    seconds: float
    steps_skipped: int = 0
    note: str | None = None  # why the run stopped early, or did not reach the target
    seed: int | None = None  # model init and data order of this run; None: the provenance's seed
    # The same tail means of Adam's preconditioned gradient P⊙g; None: not measured (SGD, older files)
    grad_sq_pre: float | None = None
    trace_sigma_pre: float | None = None
    b_simple_pre: float | None = None


class SweepFit(_Model):
    """S = S_min + E_min/B fitted to the best run of each batch that reached the target
    (budgetdsl.theory.frontier_fit: least squares in log space)."""

    form: Literal["S = S_min + E_min/B"] = "S = S_min + E_min/B"
    s_min: float  # steps
    e_min_examples: float
    e_min_tokens: float
    b_crit_examples: float  # E_min / S_min
    b_crit_tokens: float
    b_crit_rel_se: float  # standard error of ln B_crit
    b_crit_ci_low_tokens: float
    b_crit_ci_high_tokens: float
    confidence: float
    cov: tuple[tuple[float, float], tuple[float, float]]  # of (ln S_min, ln E_min)
    n_points: int
    dof: int
    rms_residual: float  # of ln S
    residuals: list[float]  # ln S measured − ln S fitted, one per point, batches ascending


class SweepComparison(_Model):
    """B_crit measured by the sweep beside B_simple measured in the same runs."""

    b_simple_examples: float | None  # pooled over the runs, near the target loss
    b_simple_tokens: float | None
    b_simple_ci_low: float | None  # examples; None: unbounded
    b_simple_ci_high: float | None
    b_simple_run_mean_examples: float | None  # mean over runs of b_simple_run_mean
    ratio: float | None  # B_crit / B_simple (at the target)
    ratio_run_mean: float | None  # B_crit / B_simple averaged over training
    # B_simple of Adam's preconditioned gradient, pooled the same way; None: not measured
    b_simple_pre_examples: float | None = None
    b_simple_pre_ci_low: float | None = None
    b_simple_pre_ci_high: float | None = None
    ratio_pre: float | None = None  # B_crit / preconditioned B_simple


class SweepBatchSteps(_Model):
    """Steps to the target at one batch across the seeds: their scatter is what widens the pooled
    fit's interval."""

    batch_examples: int
    seeds: list[int]  # that reached the target, ascending
    steps: list[float]  # steps to the target of each, in the order of `seeds`
    median: float
    low: float
    high: float


class SweepSeedFit(_Model):
    """S = S_min + E_min/B fitted to one seed's runs alone (None with the reason when they cannot
    be fitted): how far one seed's B_crit is from another's."""

    seed: int
    n_points: int  # batches of this seed that reached the target
    b_crit_examples: float | None = None
    b_crit_tokens: float | None = None
    b_crit_ci_low_tokens: float | None = None
    b_crit_ci_high_tokens: float | None = None
    fit_error: str | None = None


class Sweep(_Model):
    """A direct measurement of the frontier: runs at several batches to one held-out loss."""

    target_loss: float
    target_from: Literal["given", "pilot"]  # --target-loss, or the pilot run's final loss
    lr_rule: Literal["sqrt", "linear", "none"]
    lr_base: float
    lr_base_batch: int  # examples at which lr_base applies; lr(B) = lr_base · rule(B / base)
    lr_grid: list[float]  # multipliers tried at every batch
    warmup_steps: int
    max_steps: int
    batches: list[int]  # examples
    tokens_per_example: int
    runs: list[SweepRun]
    fit: SweepFit | None
    fit_error: str | None = None
    comparison: SweepComparison | None = None
    seconds: float
    interrupted: bool = False
    # Several seeds (`--seeds`): each (batch, seed) is a run from that seed's start; the fit above
    # pools every point, these say how far the seeds scatter. Empty for a one-seed sweep.
    seeds: list[int] = []
    steps_by_batch: list[SweepBatchSteps] = []
    seed_fits: list[SweepSeedFit] = []

    def best_runs(self) -> list[SweepRun]:
        return [r for r in self.runs if r.best]

    def seed_lines(self) -> list[str]:
        """The scatter over seeds in words, for the sweep's report and a plan citing the file:
        each seed's own B_crit, then each batch's steps to the target (median and range)."""
        if len(self.seeds) < 2:
            return []
        fits = []
        for f in self.seed_fits:
            if f.b_crit_examples is None:
                fits.append(f"seed {f.seed}: no fit ({f.fit_error})")
            else:
                fits.append(f"seed {f.seed}: {_num(f.b_crit_examples)} examples = {_num(f.b_crit_tokens)} tokens "
                            f"[{_num(f.b_crit_ci_low_tokens)}-{_num(f.b_crit_ci_high_tokens)}]")
        steps = [f"{b.batch_examples}: {_num(b.median)} ({_num(b.low)}-{_num(b.high)}, {len(b.seeds)} seeds)"
                 for b in self.steps_by_batch]
        return [f"B_crit of each seed alone: {'; '.join(fits)}",
                f"steps to the target by batch, median (range over seeds): {'; '.join(steps)}"]


class CalibrationFile(_Model):
    schema_version: Literal[1, 2] = SCHEMA_VERSION
    interrupted: bool = False  # stopped early (Ctrl-C, or a failed measurement): a partial file
    stop_reason: str | None = None
    provenance: Provenance
    trajectory: list[TrajectoryPoint]
    raw: RawEstimates
    fit: Fit | None
    fit_error: str | None = None  # why there is no fit
    summary: Summary | None
    hardware: HardwareProfile
    # A direct measurement of the frontier (`budgetdsl calibrate sweep`): runs at several batch
    # sizes to one loss, the fit S = S_min + E_min/B, and B_crit beside B_simple.
    sweep: Sweep | None = None

    @property
    def context(self) -> int | None:
        """Tokens per example of the proxy's sequences: as recorded, or in a file of schema 1, its
        tokens per example when more than one (an example of a single token is no sequence)."""
        b = self.provenance.batch
        if b.context is not None or self.schema_version >= 2:
            return b.context
        return sequence_context(b.tokens_per_example)

    def b_crit_tokens_at(self, loss: float, extrapolate: bool = False,
                         source: str = "b_simple") -> tuple[float, float]:
        """(B_crit in tokens, relative 1-sigma uncertainty) at `loss`.

        source "b_simple": from the fitted law B*/L^(1/alpha) of the B_simple trajectory. The
        uncertainty is the standard error of ln B_crit from the fit's covariance (≈ relative error
        of B_crit); it grows away from the measured losses. Raises ValueError when `loss` is
        outside the measured range (with a small margin) unless `extrapolate`, and when the file
        has no fit and `loss` is not the one loss a fixed-weights calibration measured.

        source "sweep": the frontier sweep's B_crit = E_min/S_min, measured at the sweep's target
        loss. At another loss (with `extrapolate`) it is carried along the B_simple law, scaled
        by the measured ratio: B_crit(L) = B_sweep · law(L) / law(L_target); the two relative
        errors add in quadrature.
        """
        if not (isinstance(loss, (int, float)) and math.isfinite(loss) and loss > 0):
            raise ValueError(f"at_loss must be a positive number of nats, got {loss!r}")
        if source == "sweep":
            return self._sweep_b_crit(loss, extrapolate)
        if source != "b_simple":
            raise ValueError(f"unknown B_crit source {source!r} (b_simple or sweep)")
        if self.fit is None:
            return self._point_estimate(loss)
        f = self.fit
        width = f.loss_max - f.loss_min
        lo = f.loss_min - max(RANGE_MARGIN * width, RANGE_MARGIN_MIN * f.loss_min)
        hi = f.loss_max + max(RANGE_MARGIN * width, RANGE_MARGIN_MIN * f.loss_max)
        if not extrapolate and not lo <= loss <= hi:
            raise ValueError(
                f"at_loss {loss:g} is outside the losses this calibration measured "
                f"({f.loss_min:.4g} to {f.loss_max:.4g} nats, {f.n_points} points); "
                "calibrate further (more --steps, a larger proxy) or set `extrapolate: true` "
                f"to extend the fit {FIT_FORM} (alpha = {f.alpha:.3g})"
            )
        reach_lo = max(EXTRAPOLATE_WIDTHS * width, EXTRAPOLATE_MIN * f.loss_min)
        reach_hi = max(EXTRAPOLATE_WIDTHS * width, EXTRAPOLATE_MIN * f.loss_max)
        if extrapolate and not f.loss_min - reach_lo <= loss <= f.loss_max + reach_hi:
            raise ValueError(
                f"at_loss {loss:g} is beyond what `extrapolate: true` reads of this calibration: it "
                f"measured {f.loss_min:.4g} to {f.loss_max:.4g} nats, and extrapolation reaches one "
                f"measured range's width (at least {EXTRAPOLATE_MIN:.0%} of the loss) past it, "
                f"{f.loss_min - reach_lo:.4g} to {f.loss_max + reach_hi:.4g} nats; calibrate a proxy that "
                "reaches nearer this loss (more --steps, a larger proxy), or declare noise.b_crit")
        x = math.log(loss)
        (vaa, vap), (_, vpp) = f.cov
        var = vaa - 2.0 * x * vap + x * x * vpp  # d ln B / d(ln B*, 1/α) = (1, −ln L)
        # ln B_crit = ln B* − ln L / α, in log space: L^(1/α) overflows for a small α.
        return _in_range(math.log(f.b_star_tokens) - x / f.alpha, loss), math.sqrt(max(var, 0.0))

    def _sweep_b_crit(self, loss: float, extrapolate: bool) -> tuple[float, float]:
        sw = self.sweep
        if sw is None:
            raise ValueError("this calibration file has no frontier sweep; run `budgetdsl calibrate "
                             "sweep`, or use source: b_simple")
        if sw.fit is None:
            raise ValueError(f"this calibration's frontier sweep has no fit ({sw.fit_error})")
        b, rel = sw.fit.b_crit_tokens, sw.fit.b_crit_rel_se
        target = sw.target_loss
        if abs(loss - target) <= RANGE_MARGIN_MIN * target:
            return b, rel
        if not extrapolate:
            raise ValueError(
                f"at_loss {loss:g} is not the loss the frontier sweep measured ({target:.4g} nats); "
                f"set at_loss: {target:.4g}, or `extrapolate: true` to carry B_crit along this "
                f"calibration's B_simple law ({FIT_FORM})")
        if self.fit is None:
            raise ValueError(f"cannot move the sweep's B_crit from loss {target:.4g} to {loss:g}: "
                             f"this calibration has no B_simple law ({self.fit_error})")
        law_here, rel_here = self.b_crit_tokens_at(loss, extrapolate=True)
        law_there, _ = self.b_crit_tokens_at(target, extrapolate=True)
        return _in_range(math.log(b) + math.log(law_here) - math.log(law_there), loss), math.hypot(rel, rel_here)

    def _point_estimate(self, loss: float) -> tuple[float, float]:
        s = self.summary
        why = f"this calibration has no fit ({self.fit_error or 'no usable trajectory'})"
        if (s is None or s.b_simple_tokens is None or s.b_simple_tokens <= 0 or s.ci_low_tokens is None
                or s.ci_high_tokens is None or s.ci_high_tokens <= 0):
            raise ValueError(f"{why} and no bounded, positive B_simple estimate")
        if abs(loss - s.loss) > RANGE_MARGIN_MIN * s.loss:
            raise ValueError(
                f"{why}; it measured B_simple only at loss {s.loss:.4g}, not at {loss:g} "
                "(a run with --lr > 0 measures a trajectory and fits B_crit(L))"
            )
        b, lo, hi = s.b_simple_tokens, s.ci_low_tokens, s.ci_high_tokens
        if DEFAULT_NOISE_SCALE == "preconditioned":  # the noise scale the planner reads
            tpe = self.provenance.batch.tokens_per_example
            if s.b_simple_pre is None or s.ci_low_pre is None or s.ci_high_pre is None or not s.ci_high_pre > 0:
                raise ValueError(f"{why} and no bounded, positive preconditioned B_simple estimate")
            b, lo, hi = s.b_simple_pre * tpe, s.ci_low_pre * tpe, s.ci_high_pre * tpe
        rel = (math.log(hi) - math.log(max(lo, 1e-300))) / (2 * _z(s.confidence))
        return b, rel

    def describe(self, source: str = "b_simple") -> str:
        """One line for reports: where B_crit comes from."""
        p = self.provenance
        if source == "sweep" and self.sweep is not None:
            sw = self.sweep
            n = len({r.batch_examples for r in sw.best_runs() if r.reached})
            seeds = (f"{len(sw.seeds)} seeds ({', '.join(map(str, sw.seeds))}) pooled" if len(sw.seeds) > 1
                     else f"seed {p.seed}")
            return (f"frontier sweep of {p.model.name} ({p.model.n_params:,} params) on {p.data.kind} "
                    f"data: {n} batches to loss {sw.target_loss:.4g}, fit S = S_min + E_min/B, {seeds}")
        return (
            f"B_simple calibration of {p.model.name} ({p.model.n_params:,} params) on {p.data.kind} "
            f"data, {len(self.raw.step)} steps, seed {p.seed}"
        )


def _num(x: float | None) -> str:
    """Three significant figures, for the seed lines."""
    return "—" if x is None else f"{x:.3g}"


def _in_range(log_b: float, loss: float) -> float:
    """B_crit = exp(log_b) tokens, or ValueError where a fit read at `loss` exceeds the largest
    batch a plan may hold (MAX_BATCH, budgetdsl.plan.model). Too small a B_crit is the transfer
    check's (below one sequence of the target, budgetdsl.plan.noise)."""
    if math.isnan(log_b) or log_b > math.log(MAX_BATCH):
        raise ValueError(f"the calibration's B_crit at loss {loss:g} is e^{log_b:.4g} tokens, more than "
                         f"{MAX_BATCH:.0e} tokens: the fit does not describe this loss")
    return math.exp(log_b)


def _z(confidence: float) -> float:
    from statistics import NormalDist

    return NormalDist().inv_cdf(0.5 + confidence / 2.0)


class CalibrationFileError(ValueError):
    """A calibration file that cannot be read or does not validate; the message names the file."""


# A calibration holds a trajectory and per-step columns: ~100 KB for the committed ones, ~12 MB for
# 100,000 measured steps. The file comes with the plan (untrusted): past this it is not read.
MAX_CALIBRATION_BYTES = 64 << 20


def load_calibration(path: str | os.PathLike, inside: str | os.PathLike | None = None) -> CalibrationFile:
    """The calibration file at `path`, validated; with `inside`, the file opened must lie below
    that directory (checked on the open descriptor, so a link swapped after a check cannot lead out)."""
    from budgetdsl.io.guarded_read import NotRegularFile, OutsideRoot, read_regular

    path = Path(path)
    try:  # the one guarded reader: regular files only, without blocking, bounded
        raw = read_regular(path, MAX_CALIBRATION_BYTES, inside)
        if len(raw) > MAX_CALIBRATION_BYTES:
            raise CalibrationFileError(f"{path}: larger than {MAX_CALIBRATION_BYTES >> 20} MiB, not a "
                                       "calibration file `budgetdsl calibrate` writes")
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise CalibrationFileError(f"{path}: not UTF-8 text, not a calibration file `budgetdsl calibrate` "
                                   "writes") from None
    except OutsideRoot:
        raise CalibrationFileError(f"{path}: a symbolic link out of the repository {inside}") from None
    except NotRegularFile:
        raise CalibrationFileError(f"{path}: not a regular file (a FIFO, a device or a socket); a "
                                   "calibration is the JSON file `budgetdsl calibrate` writes") from None
    except FileNotFoundError:
        raise CalibrationFileError(
            f"{path}: no such calibration file (make one with `budgetdsl calibrate --out {path}`)"
        ) from None
    except OSError as exc:
        raise CalibrationFileError(f"{path}: cannot read: {exc.strerror}") from None
    return parse_calibration(text, path)


def parse_calibration(text: str, path: str | os.PathLike) -> CalibrationFile:
    """A calibration file's text (read from disk, or from a git revision by `diff --base`),
    validated; `path` names it in messages."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise CalibrationFileError(f"{path}:{exc.lineno}:{exc.colno}: not JSON: {exc.msg}") from None
    except RecursionError:  # json's parser recurses once per nesting level
        raise CalibrationFileError(f"{path}: not a calibration file (JSON nested too deeply)") from None
    if not isinstance(data, dict):
        raise CalibrationFileError(f"{path}: not a calibration file (expected a JSON object)")
    version = data.get("schema_version")
    if version not in READABLE_VERSIONS or isinstance(version, bool):
        raise CalibrationFileError(
            f"{path}: calibration schema_version {version!r} is not supported (this budgetdsl reads "
            f"versions {', '.join(map(str, READABLE_VERSIONS))}); re-run `budgetdsl calibrate`"
        )
    bad = _non_finite(data)
    if bad is not None:
        raise _located(text, path, [(bad, "is not a finite number (NaN, Infinity or out of a "
                                          "double's range)")])
    try:
        cal = CalibrationFile.model_validate(data)
    except RecursionError:
        raise CalibrationFileError(f"{path}: not a calibration file (JSON nested too deeply)") from None
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise CalibrationFileError(
            f"{_key_location(text, tuple(first['loc']), os.fspath(path))}: invalid calibration file at "
            f"{where}: {first['msg']} ({exc.error_count()} error(s))") from None
    problems = number_problems(cal)
    if problems:
        raise _located(text, path, problems)
    return cal


# The file is as untrusted as a plan: every number the planner reads from it passes the plan's
# own gate (finite, and inside the physical ranges of budgetdsl.plan.model), so a hand-edited
# `alpha: 0` or `b_star_tokens: 1e308` is a located input error, never a crash or a nonsense plan.
_Key = tuple[str | int, ...]
_UNIT = (0.0, 1.0)


def _non_finite(data: Any) -> _Key | None:
    """The path of the first NaN or infinity in parsed JSON (`NaN`, `Infinity`, `1e999`), or None.
    The trajectory is exempt: a point without a finite B_simple is skipped where it is read
    (budgetdsl.solve.batch_ramp), as a measurement with |G|² ≤ 0 is."""
    stack: list[tuple[_Key, Any]] = [(("trajectory",), None)] + [((k,), v) for k, v in data.items()
                                                                  if k != "trajectory"]
    while stack:
        key, value = stack.pop()
        if isinstance(value, float) and not math.isfinite(value):
            return key
        if isinstance(value, dict):
            stack.extend(((*key, k), v) for k, v in reversed(value.items()))
        elif isinstance(value, list):
            stack.extend(((*key, i), v) for i, v in reversed(list(enumerate(value))))
    return None


def _bound(problems: list[tuple[_Key, str]], key: _Key, value: float | None, lo: float, hi: float,
           *, above: bool = False, below: bool = False) -> None:
    """Record a problem where `value` (None: absent) is outside [lo, hi]; `above`/`below` exclude
    the bound itself."""
    if value is None:
        return
    low_ok = value > lo if above else value >= lo
    high_ok = value < hi if below else value <= hi
    if not (low_ok and high_ok):
        span = (f"{'>' if above else '≥'} {lo:g}" if math.isinf(hi)
                else f"in {'(' if above else '['}{lo:g}, {hi:g}{')' if below else ']'}")
        problems.append((key, f"is {value!r}; its physical range is {span}"))


def number_problems(cal: CalibrationFile) -> list[tuple[_Key, str]]:
    """(key, message) for every number the planner reads that is outside its physical range."""
    out: list[tuple[_Key, str]] = []
    p = cal.provenance
    m, b, e = ("provenance", "model"), ("provenance", "batch"), ("provenance", "estimator")
    _bound(out, (*m, "n_params"), p.model.n_params, 1, MAX_PARAMS)
    _bound(out, (*m, "flops_per_token"), p.model.flops_per_token, 1, MAX_FLOPS_PER_TOKEN)
    _bound(out, ("provenance", "data", "vocab_size"), p.data.vocab_size, 1, MAX_VOCAB)
    _bound(out, ("provenance", "optimizer", "warmup_steps"), p.optimizer.warmup_steps, 0, MAX_STEPS)
    _bound(out, (*b, "global_batch_examples"), p.batch.global_batch_examples, 1, MAX_BATCH)
    _bound(out, (*b, "micro_batch_examples"), p.batch.micro_batch_examples, 1, MAX_BATCH)
    _bound(out, (*b, "world_size"), p.batch.world_size, 1, MAX_GPUS)
    _bound(out, (*b, "tokens_per_example"), p.batch.tokens_per_example, 1, MAX_SEQ_LEN)
    _bound(out, (*b, "context"), p.batch.context, 1, MAX_SEQ_LEN)
    _bound(out, (*e, "ema_beta"), p.estimator.ema_beta, *_UNIT, above=True)  # 1: the plain mean
    _bound(out, (*e, "confidence"), p.estimator.confidence, *_UNIT, above=True, below=True)
    if (f := cal.fit) is not None:
        _bound(out, ("fit", "b_star_tokens"), f.b_star_tokens, 1, MAX_BATCH)
        # B_crit falls as the loss falls (McCandlish et al. 2018 fig. 7; Kaplan et al. 2020 eq. 1.4):
        # a positive alpha. Its size is bounded where the law is read (`_in_range`).
        _bound(out, ("fit", "alpha"), f.alpha, 0, math.inf, above=True)
        _bound(out, ("fit", "alpha_se"), f.alpha_se, 0, math.inf)
        _bound(out, ("fit", "cov", 0, 0), f.cov[0][0], 0, math.inf)  # variances
        _bound(out, ("fit", "cov", 1, 1), f.cov[1][1], 0, math.inf)
        _bound(out, ("fit", "loss_min"), f.loss_min, MIN_LOSS, MAX_LOSS)
        _bound(out, ("fit", "loss_max"), f.loss_max, max(MIN_LOSS, f.loss_min), MAX_LOSS)
        _bound(out, ("fit", "n_points"), f.n_points, 1, MAX_STEPS)
        _bound(out, ("fit", "reduced_chi2"), f.reduced_chi2, 0, math.inf)
    if (s := cal.summary) is not None:
        _bound(out, ("summary", "loss"), s.loss, MIN_LOSS, MAX_LOSS)
        _bound(out, ("summary", "confidence"), s.confidence, *_UNIT, above=True, below=True)
        for name in ("b_simple_tokens", "ci_low_tokens", "ci_high_tokens"):
            _bound(out, ("summary", name), getattr(s, name), -MAX_BATCH, MAX_BATCH)
    if (sw := cal.sweep) is not None:
        _bound(out, ("sweep", "target_loss"), sw.target_loss, MIN_LOSS, MAX_LOSS)
        if (sf := sw.fit) is not None:
            _bound(out, ("sweep", "fit", "b_crit_tokens"), sf.b_crit_tokens, 1, MAX_BATCH)
            _bound(out, ("sweep", "fit", "b_crit_rel_se"), sf.b_crit_rel_se, 0, math.inf)
            _bound(out, ("sweep", "fit", "confidence"), sf.confidence, *_UNIT, above=True, below=True)
    hw = cal.hardware
    _bound(out, ("hardware", "world_size"), hw.world_size, 1, MAX_GPUS)
    _bound(out, ("hardware", "step_time_s"), hw.step_time_s, 0, MAX_SECONDS, above=True)
    _bound(out, ("hardware", "tokens_per_s"), hw.tokens_per_s, 0, MAX_TOKENS, above=True)
    _bound(out, ("hardware", "examples_per_s"), hw.examples_per_s, 0, MAX_TOKENS, above=True)
    if hw.tokens_per_s and p.model.flops_per_token and not out:  # the report's TFLOP/s per device
        _bound(out, ("hardware", "tokens_per_s"),
               hw.tokens_per_s * p.model.flops_per_token / hw.world_size, 0, MAX_FLOP_RATE)
    for i, point in enumerate(hw.memory):
        _bound(out, ("hardware", "memory", i, "micro_batch_examples"), point.micro_batch_examples, 1,
               MAX_MICRO_BATCH)
        _bound(out, ("hardware", "memory", i, "peak_bytes"), point.peak_bytes, 0, MAX_BYTES)
    return out


def _located(text: str, path: str | os.PathLike, problems: list[tuple[_Key, str]]) -> CalibrationFileError:
    """The first problem at file:line:col of its key (where the JSON parses as YAML, which holds
    the positions), with the count of the others."""
    key, message = problems[0]
    more = f" ({len(problems) - 1} more problem(s))" if len(problems) > 1 else ""
    dotted = ".".join(str(k) for k in key) or "the top level"
    return CalibrationFileError(f"{_key_location(text, key, os.fspath(path))}: {dotted} {message}{more}")


def _key_location(text: str, key: _Key, filename: str) -> Location:
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        node = yaml.compose(text, Loader=loader)
    except yaml.YAMLError:
        return Location(filename)
    mark = node.start_mark if node is not None else None
    for part in key:
        if isinstance(node, yaml.MappingNode):
            found = next(((k, v) for k, v in node.value if k.value == str(part)), None)
            if found is None:
                break
            mark, node = found[0].start_mark, found[1]
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and 0 <= part < len(node.value):
            node = node.value[part]
            mark = node.start_mark
        else:
            break
    return Location(filename, mark.line + 1, mark.column + 1) if mark is not None else Location(filename)


def write_calibration(path: str | os.PathLike, calibration: CalibrationFile) -> None:
    """Write atomically: a temporary file in the same folder, then os.replace — a reader never
    sees half a file, and an interrupted write leaves the previous file intact."""
    from budgetdsl.io.atomic_write import write_file

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_file(path, calibration.model_dump_json(indent=1) + "\n")
