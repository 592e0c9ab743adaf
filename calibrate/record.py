"""What a calibration run has recorded so far, and how it becomes a calibration file.

The loop appends one raw row per measured step and one trajectory point per evaluation; this
module turns them — at the end, or at an interruption — into the validated `CalibrationFile`,
including the summary and the fit. It is checkpointed with the run (`state_dict`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from budgetdsl.calibrate.fit import spaced
from budgetdsl.calibrate.noise import NoiseScaleTracker

from budgetdsl.plan.calibration_file import (
    CalibrationFile,
    Fit,
    HardwareProfile,
    Provenance,
    RawEstimates,
    Summary,
    TrajectoryPoint,
)
from budgetdsl.theory.noise_scale import DEFAULT_NOISE_SCALE
from budgetdsl.theory.power_law_fit import FitError, fit_power_law


@dataclass
class RunRecord:
    tracker: NoiseScaleTracker
    batch: int  # global batch, examples
    micro_batch: int
    tokens_per_example: int
    train_loss: list[float | None] = field(default_factory=list)  # per measured step; None: not known yet
    sq_small: list[float] = field(default_factory=list)
    sq_big: list[float] = field(default_factory=list)
    skipped: list[int] = field(default_factory=list)
    skip_reasons: dict[str, int] = field(default_factory=dict)  # why steps were skipped, counted
    eval_steps: list[int] = field(default_factory=list)
    eval_losses: list[float] = field(default_factory=list)
    trajectory: list[dict] = field(default_factory=list)
    # The preconditioned gradient's norms (Adam's P⊙g), per measured step; None where not measured.
    sq_small_pre: list[float | None] = field(default_factory=list)
    sq_big_pre: list[float | None] = field(default_factory=list)
    tracker_pre: NoiseScaleTracker | None = None  # made on the first preconditioned step

    def measured(self, step: int, train_loss: float | None, sq_small: float, sq_big: float,
                 b_big: int | None = None, pre: tuple[float | None, float | None] | None = None) -> None:
        """One step's norms; `b_big`: its examples when not the run's global batch (a short step);
        `pre`: the same norms of the preconditioned gradient, when measured."""
        self.tracker.update(step, sq_small, sq_big, self.micro_batch, b_big or self.batch)
        self.train_loss.append(train_loss)
        self.sq_small.append(sq_small)
        self.sq_big.append(sq_big)
        small_pre, big_pre = pre if pre is not None else (None, None)
        self.sq_small_pre.append(small_pre)
        self.sq_big_pre.append(big_pre)
        if small_pre is not None and big_pre is not None and math.isfinite(small_pre + big_pre):
            if self.tracker_pre is None:
                self.tracker_pre = NoiseScaleTracker(self.tracker.beta, self.tracker.confidence)
            self.tracker_pre.update(step, small_pre, big_pre, self.micro_batch, b_big or self.batch)

    def skip(self, step: int, reason: str = "non-finite") -> None:
        self.skipped.append(step)
        self.skip_reasons[reason] = self.skip_reasons.get(reason, 0) + 1

    def evaluated(self, step: int, loss: float) -> None:
        """The held-out loss at `step`'s weights (before that step's update)."""
        self.eval_steps.append(step)
        self.eval_losses.append(loss)

    def point(self, step: int) -> dict | None:
        """Trajectory point for `step` (an evaluation step already measured); None before any
        measurement."""
        tr = self.tracker
        if not len(tr):
            return None
        s = tr.smoothed()
        lo, hi = tr.interval()
        # The held-out loss at each measured step, interpolated between evaluations made up to this
        # point, averaged with the estimator's EMA weights: the loss the smoothed B_simple belongs
        # to. Steps before the first evaluation have no loss of their own and are left out of the
        # average (a later loss is never carried back to them).
        steps = np.asarray(tr.steps, dtype=float)
        known = steps >= self.eval_steps[0]
        per_step = np.interp(steps[known], self.eval_steps, self.eval_losses)
        w = tr.weights()[known]
        tpe = self.tokens_per_example
        p = {
            "step": step,
            "examples": (step + 1) * self.batch,
            "tokens": (step + 1) * self.batch * tpe,
            "loss": self.eval_losses[-1],
            "loss_smoothed": float(np.dot(w, per_step) / np.sum(w)) if w.sum() > 0 else self.eval_losses[-1],
            "grad_sq": s.g2,
            "trace_sigma": s.trace,
            "b_simple": s.b_simple,
            "b_simple_tokens": s.b_simple * tpe if s.b_simple is not None else None,
            "ci_low": lo,
            "ci_high": hi,
            "n_eff": tr.effective_steps(),
        }
        if self.tracker_pre is not None and len(self.tracker_pre):
            sp = self.tracker_pre.smoothed()
            lo_p, hi_p = self.tracker_pre.interval()
            p.update(b_simple_pre=sp.b_simple, ci_low_pre=lo_p, ci_high_pre=hi_p)
        self.trajectory.append(p)
        return p

    # -- the file ------------------------------------------------------------------------------

    def fit(self, warmup: int) -> tuple[Fit | None, str | None]:
        beta = self.tracker.beta
        if beta >= 1.0:
            return None, (
                "B_simple was averaged over the whole run (--lr 0 / --ema-beta 1): "
                "one loss, nothing to fit"
            )
        window = (1.0 + beta) / (1.0 - beta)  # effective number of steps in one EMA window
        # Every point one window apart, whatever its interval: open ones enter the fit as bounds.
        # The law is of the noise scale the planner reads (budgetdsl.theory.noise_scale).
        suffix = "" if DEFAULT_NOISE_SCALE == "raw" else "_pre"
        pts = [p for p in self.trajectory if suffix == "" or p.get("b_simple_pre") is not None]
        idx = spaced([p["step"] for p in pts], spacing=window, start=int(warmup + window))
        chosen = [pts[i] for i in idx]
        tpe = self.tokens_per_example

        def tokens(v):
            return v * tpe if v is not None else None

        try:
            law = fit_power_law(
                [p["loss_smoothed"] for p in chosen],
                [tokens(p["b_simple" + suffix]) for p in chosen],
                [tokens(p["ci_low" + suffix]) for p in chosen],
                [tokens(p["ci_high" + suffix]) for p in chosen],
                z=self.tracker.z,
            )
        except FitError as exc:
            return None, (f"{exc}; train until the loss falls further (more --steps, or a larger "
                          "--lr), or measure at fixed weights (--lr 0) and read the file at its one loss")
        p_se = math.sqrt(law.cov[1][1])
        return (
            Fit(
                b_star_tokens=law.b_star,
                alpha=law.alpha,
                alpha_se=p_se * law.alpha**2,  # α = 1/p, so se(α) = se(p)/p²
                cov=law.cov,
                loss_min=law.loss_min,
                loss_max=law.loss_max,
                n_points=law.n_points,
                reduced_chi2=law.reduced_chi2,
                n_censored=law.n_censored,
                n_unbounded=law.n_unbounded,
                slope_z=law.slope_z,
                noise_scale=DEFAULT_NOISE_SCALE,
            ),
            None,
        )

    def summary(self, confidence: float) -> Summary | None:
        if not self.trajectory:
            return None
        last = self.trajectory[-1]
        tpe = self.tokens_per_example

        def tokens(v):
            return v * tpe if v is not None else None

        return Summary(
            step=last["step"],
            loss=last["loss_smoothed"],
            b_simple=last["b_simple"],
            b_simple_tokens=last["b_simple_tokens"],
            ci_low=last["ci_low"],
            ci_high=last["ci_high"],
            ci_low_tokens=tokens(last["ci_low"]),
            ci_high_tokens=tokens(last["ci_high"]),
            confidence=confidence,
            n_eff=last.get("n_eff"),
            steps_measured=len(self.tracker),
            steps_skipped=len(self.skipped),
            skipped_reasons=dict(self.skip_reasons),
            b_simple_pre=last.get("b_simple_pre"),
            ci_low_pre=last.get("ci_low_pre"),
            ci_high_pre=last.get("ci_high_pre"),
            steps_measured_pre=len(self.tracker_pre) if self.tracker_pre is not None else 0,
        )

    def to_file(
        self,
        provenance: Provenance,
        hardware: HardwareProfile,
        warmup: int,
        interrupted: bool = False,
        stop_reason: str | None = None,
    ) -> CalibrationFile:
        fit, fit_error = self.fit(warmup)
        tr = self.tracker
        return CalibrationFile(
            interrupted=interrupted,
            stop_reason=stop_reason,
            provenance=provenance,
            trajectory=[TrajectoryPoint(**p) for p in self.trajectory],
            raw=RawEstimates(
                step=tr.steps,
                train_loss=self.train_loss,
                grad_sq_small=self.sq_small,
                grad_sq_big=self.sq_big,
                grad_sq=tr.g2,
                trace_sigma=tr.trace,
                skipped_steps=self.skipped,
                grad_sq_small_pre=self.sq_small_pre if any(v is not None for v in self.sq_small_pre) else None,
                grad_sq_big_pre=self.sq_big_pre if any(v is not None for v in self.sq_big_pre) else None,
            ),
            fit=fit,
            fit_error=fit_error,
            summary=self.summary(tr.confidence),
            hardware=hardware,
        )

    # -- checkpointing -------------------------------------------------------------------------

    def state_dict(self) -> dict:
        return {
            "tracker": self.tracker.state_dict(),
            "train_loss": self.train_loss,
            "sq_small": self.sq_small,
            "sq_big": self.sq_big,
            "skipped": self.skipped,
            "skip_reasons": self.skip_reasons,
            "eval_steps": self.eval_steps,
            "eval_losses": self.eval_losses,
            "trajectory": self.trajectory,
            "sq_small_pre": self.sq_small_pre,
            "sq_big_pre": self.sq_big_pre,
            "tracker_pre": self.tracker_pre.state_dict() if self.tracker_pre is not None else None,
        }

    def load_state_dict(self, state: dict) -> None:
        self.tracker.load_state_dict(state["tracker"])
        pre = state.get("tracker_pre")
        if pre is not None:
            self.tracker_pre = NoiseScaleTracker(self.tracker.beta, self.tracker.confidence)
            self.tracker_pre.load_state_dict(pre)
        for name, value in state.items():
            if name not in ("tracker", "tracker_pre"):
                setattr(self, name, dict(value) if isinstance(value, dict) else list(value))
