"""The frontier sweep: measure B_crit directly (McCandlish et al. 2018, section 2.2 and figure 4).

Train the proxy from one start (per seed) at several constant batches B until the held-out loss
reaches one target (given, or the pilot's: the first seed's smallest batch), fit the steps S(B)
each needed to S = S_min + E_min/B (eq. 2.11, `budgetdsl.theory.frontier_fit`; the points of every
seed in one fit) and compare B_crit = E_min/S_min with B_simple measured in the same runs
(appendix A). The file is a whole calibration (the reference run's) with a `sweep` section.
"""

from __future__ import annotations

import copy
import math
import os
import statistics
import time
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import torch
from budgetdsl.calibrate import distributed
from budgetdsl.calibrate.distributed import DistContext
from budgetdsl.calibrate.factory import build_proxy
from budgetdsl.calibrate.hardware import (
    StepTimer,
    device_name,
    resolve_amp,
    resolve_device,
)
from budgetdsl.calibrate.noise import (
    BiasCorrectedEMA,
    NoiseScaleTracker,
    noise_scale_interval,
    t_quantile,
)
from budgetdsl.calibrate.out_lock import OutLocked, out_lock
from budgetdsl.calibrate.record import RunRecord
from budgetdsl.calibrate.run import (
    UsageError,
    _lr_at,
    _make_optimizer,
    _provenance,
    _StopRequest,
)
from budgetdsl.calibrate.step import Stepper, to_device
from budgetdsl.calibrate.sweep_config import SweepConfig

from budgetdsl.plan.calibration_file import (
    CalibrationFile,
    HardwareProfile,
    Sweep,
    SweepBatchSteps,
    SweepComparison,
    SweepFit,
    SweepRun,
    SweepSeedFit,
    write_calibration,
)
from budgetdsl.theory.frontier_fit import FrontierFitError, fit_frontier

RUN_MEAN_BETA = 0.9  # EMA of |G|² and tr Σ for the per-step B_noise inside b_simple_run_mean


@dataclass
class _Run:
    batch: int
    micro: int
    lr: float
    multiplier: float
    record: RunRecord
    timer: StepTimer
    steps_run: int = 0
    crossed: float | None = None  # steps to target, interpolated
    note: str | None = None
    seconds: float = 0.0
    stopped: bool = False  # by the user
    seed: int | None = None  # of the model init and data order


@dataclass(frozen=True)
class SweepOutcome:
    calibration: CalibrationFile
    path: Path
    status: str  # complete | interrupted | no-fit


def crossing(steps: list[int], losses: list[float], target: float) -> float | None:
    """The first step at which the held-out loss reaches `target`, linearly interpolated between
    the last evaluation above it and the first at or below it; None if it never does."""
    for i, (s, loss) in enumerate(zip(steps, losses)):
        if loss <= target:
            if i == 0:
                return float(s)
            s0, l0 = steps[i - 1], losses[i - 1]
            return s0 + (s - s0) * (l0 - target) / (l0 - loss)
    return None


def pilot_target(losses: list[float]) -> float:
    """The mean of the last three held-out losses: at least their minimum, so the pilot crosses it."""
    tail = losses[-3:]
    return sum(tail) / len(tail)


def _tail_means(record: RunRecord, until: float, preconditioned: bool = False
                ) -> tuple[float, float, int] | None:
    """Mean |G|² and tr Σ over the last quarter of the steps before `until` (at least 4 steps);
    `preconditioned`: those of Adam's P⊙g (None when the run measured none)."""
    tr = record.tracker_pre if preconditioned else record.tracker
    if tr is None:
        return None
    idx = [i for i, s in enumerate(tr.steps) if s < until]
    if not idx:
        return None
    start = 0.75 * until
    tail = [i for i in idx if tr.steps[i] >= start]
    if len(tail) < 4:
        tail = idx[-4:]
    g2 = sum(tr.g2[i] for i in tail) / len(tail)
    trace = sum(tr.trace[i] for i in tail) / len(tail)
    return g2, trace, len(tail)


def _run_mean(record: RunRecord, batch: int, until: float) -> float | None:
    """B_noise averaged over the run with weights dS_min = dS / (1 + B_noise/B): on the frontier
    each step at batch B makes 1/(1 + B_noise/B) of a minimal step's progress (McCandlish eq. 2.11
    read step by step), so this is the average B_crit = E_min/S_min of the sweep estimates."""
    tr = record.tracker
    g2, trace = BiasCorrectedEMA(RUN_MEAN_BETA), BiasCorrectedEMA(RUN_MEAN_BETA)
    num = den = 0.0
    for s, a, b in zip(tr.steps, tr.g2, tr.trace):
        if s >= until:
            break
        g, t = g2.update(a), trace.update(b)
        if g > 0 and t > 0:
            bn = t / g
            w = 1.0 / (1.0 + bn / batch)
            num += w * bn
            den += w
    return num / den if den > 0 else None


def _pooled(pts: list[tuple[float, float]], confidence: float
            ) -> tuple[float | None, float | None, float | None]:
    """(B, low, high) pooled over runs' (tr Σ, |G|²): the ratio of the means, Fieller's interval
    from their spread with Student's t on n − 1 (None where not bounded, or under 3 runs)."""
    b = lo = hi = None
    if pts:
        n = len(pts)
        mt = sum(p[0] for p in pts) / n
        mg = sum(p[1] for p in pts) / n
        b = mt / mg if mg > 0 else None
        if n >= 3 and b is not None:
            vt = sum((p[0] - mt) ** 2 for p in pts) / (n - 1) / n
            vg = sum((p[1] - mg) ** 2 for p in pts) / (n - 1) / n
            c = sum((p[0] - mt) * (p[1] - mg) for p in pts) / (n - 1) / n
            lo, hi = noise_scale_interval(mt, mg, vt, vg, c, t_quantile(0.5 + confidence / 2, n - 1))
    return b, lo, hi


def compare(runs: list[SweepRun], b_crit_examples: float | None, tpe: int, confidence: float) -> SweepComparison:
    """B_simple pooled over the runs near the target (`_pooled`) beside B_crit: that of the raw
    gradient and, where measured, that of Adam's preconditioned one."""
    b, lo, hi = _pooled([(r.trace_sigma, r.grad_sq) for r in runs
                         if r.grad_sq is not None and r.trace_sigma is not None], confidence)
    bp, lo_p, hi_p = _pooled([(r.trace_sigma_pre, r.grad_sq_pre) for r in runs
                              if r.grad_sq_pre is not None and r.trace_sigma_pre is not None], confidence)
    means = [r.b_simple_run_mean for r in runs if r.b_simple_run_mean is not None]
    run_mean = sum(means) / len(means) if means else None
    return SweepComparison(
        b_simple_examples=b, b_simple_tokens=b * tpe if b is not None else None,
        b_simple_ci_low=lo, b_simple_ci_high=hi, b_simple_run_mean_examples=run_mean,
        ratio=b_crit_examples / b if b_crit_examples and b else None,
        ratio_run_mean=b_crit_examples / run_mean if b_crit_examples and run_mean else None,
        b_simple_pre_examples=bp, b_simple_pre_ci_low=lo_p, b_simple_pre_ci_high=hi_p,
        ratio_pre=b_crit_examples / bp if b_crit_examples and bp else None)


def fit_sweep(runs: list[SweepRun], tpe: int, confidence: float) -> tuple[SweepFit | None, str | None]:
    pts = sorted((r.batch_examples, r.steps_to_target) for r in runs if r.best and r.reached)
    try:
        f = fit_frontier(pts)
    except FrontierFitError as exc:
        missing = sorted({r.batch_examples for r in runs if r.best and not r.reached})
        why = str(exc)
        if missing:
            why += f" (batches that did not reach the target: {', '.join(map(str, missing))})"
        return None, why
    lo, hi = f.b_crit_interval(confidence)
    return SweepFit(
        s_min=f.s_min, e_min_examples=f.e_min, e_min_tokens=f.e_min * tpe, b_crit_examples=f.b_crit,
        b_crit_tokens=f.b_crit * tpe, b_crit_rel_se=f.b_crit_rel_se, b_crit_ci_low_tokens=lo * tpe,
        b_crit_ci_high_tokens=hi * tpe, confidence=confidence, cov=f.cov, n_points=len(pts), dof=f.dof,
        rms_residual=f.rms_residual, residuals=list(f.residuals)), None


def seed_spread(runs: list[SweepRun], tpe: int, confidence: float
                ) -> tuple[list[int], list[SweepBatchSteps], list[SweepSeedFit]]:
    """Over the seeds of a sweep (nothing for one seed): each batch's steps to the target (median
    and range over the seeds that reached it) and each seed's own fit, by `fit_sweep` itself."""
    seeds = sorted({r.seed for r in runs if r.seed is not None})
    if len(seeds) < 2:
        return [], [], []
    best = [r for r in runs if r.best and r.reached and r.steps_to_target is not None]
    by_batch = []
    for b in sorted({r.batch_examples for r in best}):
        pts = sorted((r.seed, r.steps_to_target) for r in best if r.batch_examples == b)
        steps = [s for _, s in pts]
        by_batch.append(SweepBatchSteps(batch_examples=b, seeds=[k for k, _ in pts], steps=steps,
                                        median=statistics.median(steps), low=min(steps), high=max(steps)))
    fits = []
    for seed in seeds:
        mine = [r for r in runs if r.seed == seed]
        n = len({r.batch_examples for r in mine if r.best and r.reached})
        f, why = fit_sweep(mine, tpe, confidence) if n >= 3 else (None, f"{n} batch(es) reached the target")
        fits.append(SweepSeedFit(seed=seed, n_points=n, fit_error=why) if f is None else SweepSeedFit(
            seed=seed, n_points=n, b_crit_examples=f.b_crit_examples, b_crit_tokens=f.b_crit_tokens,
            b_crit_ci_low_tokens=f.b_crit_ci_low_tokens, b_crit_ci_high_tokens=f.b_crit_ci_high_tokens))
    return seeds, by_batch, fits


class _Trainer:
    """The proxy from one seed's start (its seeded initialization and data stream, the sweep's one
    held-out set); trains each run of that seed from that start."""

    def __init__(self, cfg: SweepConfig, device: torch.device, amp: str, seed: int | None = None,
                 ctx: DistContext | None = None) -> None:
        base = cfg.base
        # Under torchrun the task's processes split each step's micro-batches (ctx: this one's rank).
        self.ctx = ctx if ctx is not None else DistContext()
        self.seed = base.seed if seed is None else seed  # the init and data order; the held-out set is base.seed's
        torch.manual_seed(self.seed)
        try:
            proxy = build_proxy(
                base.model, base.data, block_size=base.block_size, n_layer=base.n_layer, n_head=base.n_head,
                n_embd=base.n_embd, vocab_size=base.vocab_size, data_bytes=base.data_bytes,
                tokens_per_example=base.tokens_per_example)
        except ValueError as exc:
            raise UsageError(str(exc)) from None
        self.cfg, self.device, self.amp, self.proxy = cfg, device, amp, proxy
        self.tpe = proxy.tokens_per_example
        self.model = model = proxy.model.to(device)
        self.init_state = copy.deepcopy(model.state_dict())  # the one start every run begins from
        self.autocast = (torch.autocast(device.type, dtype=torch.bfloat16 if amp == "bf16" else torch.float16)
                         if amp != "none" else nullcontext())
        eval_gen = torch.Generator().manual_seed(base.seed + 1)
        sampler = proxy.heldout if proxy.heldout is not None else proxy.train
        self.eval_set = [to_device(sampler(cfg.eval_micro, eval_gen), device) for _ in range(base.eval_batches)]

    @torch.no_grad()
    def evaluate(self) -> float:
        """The mean held-out loss; the processes of a task share the micro-batches and agree on the
        sum (one all-reduce), so they stop at the same evaluation."""
        model, ctx = self.model, self.ctx
        model.eval()
        if not ctx.active:
            total = 0.0
            for batch in self.eval_set:
                with self.autocast:
                    total += float(model(batch).double())
            model.train()
            return total / len(self.eval_set)
        acc = torch.zeros((), dtype=torch.float64, device=self.device)
        for i in range(ctx.rank, len(self.eval_set), ctx.world_size):
            with self.autocast:
                acc += model(self.eval_set[i]).double()
        model.train()
        return float(distributed.all_reduce_sum(ctx, acc.reshape(1))[0]) / len(self.eval_set)

    def train(self, batch: int, multiplier: float, target: float | None, steps: int, eval_every: int,
              stop: _StopRequest, resume: dict | None = None, save: Callable[[dict], None] | None = None,
              save_every: int = 0) -> _Run:
        """One run at a constant `batch` until the held-out loss reaches `target` (or `steps`). The
        learning rate follows the declared rule, lr_base · (B/B_base)^p times `multiplier`, constant
        after a short warmup so steps-to-target does not depend on a schedule's horizon.

        `save(state)` every `save_every` steps and `resume=state` continue a run exactly where it
        stopped (weights, optimizer, data stream, the record so far): a cluster task that is
        preempted or cancelled resumes with the numbers an uninterrupted run has."""
        cfg, base, model, device, proxy = self.cfg, self.cfg.base, self.model, self.device, self.proxy
        model.load_state_dict(self.init_state)
        model.train()
        lr = cfg.lr_at(batch, multiplier)
        run_cfg = base.with_(lr=lr, batch=batch, micro_batch=cfg.micro_for(batch))
        optimizer = _make_optimizer(run_cfg, model)
        scaler = torch.amp.GradScaler(device.type, init_scale=2.0**12) if self.amp == "fp16" else None
        ctx = self.ctx
        stepper = Stepper(model, optimizer, device, self.autocast, scaler, base.grad_clip, ctx)
        micro = run_cfg.micro_batch
        count = batch // micro  # micro-batches per step, all processes; SweepConfig.split_error: it divides
        mine = slice(ctx.rank * count // ctx.world_size, (ctx.rank + 1) * count // ctx.world_size)
        record = RunRecord(NoiseScaleTracker(base.beta, base.confidence), batch, micro, self.tpe)
        run = _Run(batch, micro, lr, multiplier, record, StepTimer(), seed=self.seed)
        data_gen = torch.Generator().manual_seed(self.seed)  # one data stream for every run of a seed
        start = 0
        if resume is not None:
            start, run = resume["step"], resume["run"]
            record = run.record
            model.load_state_dict(resume["model"])
            optimizer.load_state_dict(resume["optimizer"])
            data_gen.set_state(resume["data"])
            torch.set_rng_state(resume["rng"])
            if scaler is not None and resume.get("scaler") is not None:
                scaler.load_state_dict(resume["scaler"])
        t_start = time.perf_counter() - run.seconds
        # One process: the signal's flag. Several: the processes' votes of the last step (Stepper's
        # all-reduce), so that every one of them stops at the same step.
        voted = False
        stopping = (lambda: stop.requested) if not ctx.active else (lambda: voted)
        for step in range(start, steps + 1):
            if save is not None and step > start and (stopping() or (save_every > 0 and step % save_every == 0)):
                run.seconds = time.perf_counter() - t_start
                save({"step": step, "run": run, "model": model.state_dict(), "optimizer": optimizer.state_dict(),
                      "data": data_gen.get_state(), "rng": torch.get_rng_state(),
                      "scaler": scaler.state_dict() if scaler is not None else None})
                if stopping():  # before this step's evaluation: the resumed run makes it
                    run.stopped = True
                    break
            if step % eval_every == 0 or step == steps:
                loss = self.evaluate()
                record.evaluated(step, loss)
                if target is not None and loss <= target:
                    break
            if step == steps or stopping():
                run.stopped = stopping()
                break
            for group in optimizer.param_groups:
                group["lr"] = _lr_at(step, lr, cfg.warmup)
            t0 = time.perf_counter()
            # Every process draws the step's micro-batches from the one stream and keeps its share: the
            # global batch and its data do not depend on the number of processes.
            m = stepper.step([proxy.train(micro, data_gen) for _ in range(count)][mine], stop.requested)
            voted = m.stop_votes > 0
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            run.timer.add(time.perf_counter() - t0, batch)
            run.steps_run = step + 1
            if m.finite:
                record.measured(step, m.train_loss, m.sq_small, m.sq_big, pre=(m.sq_small_pre, m.sq_big_pre))
                if record.eval_steps[-1] == step:
                    record.point(step)
            else:
                record.skip(step)
                if len(record.skipped) > max(10, steps // 20):
                    run.note = (f"stopped at step {step}: {len(record.skipped)} non-finite steps at lr "
                                f"{lr:.3g}; lower --lr or the lr rule")
                    break
        run.seconds = time.perf_counter() - t_start
        return run


def _train_all(cfg: SweepConfig, trainer: _Trainer, say: Callable[[str], None]
               ) -> tuple[list[_Run], float | None, bool]:
    """Every batch at every lr multiplier, smallest batch first (the pilot sets the target):
    (the runs, the target loss, whether the user interrupted)."""
    limit = cfg.steps_limit
    runs: list[_Run] = []
    target = cfg.target_loss
    expected = cfg.pilot_steps if target is None else limit
    interrupted = False
    with _StopRequest() as stop:
        for batch in sorted(cfg.batches):
            tried, target, interrupted = train_batch(cfg, trainer, batch, target, expected, say, stop)
            runs += tried
            reached = [r for r in tried if r.crossed is not None]
            if reached:
                expected = min(r.crossed for r in reached)  # larger batches need fewer steps
            if interrupted:
                break
    return runs, target, interrupted


def train_batch(cfg: SweepConfig, trainer: _Trainer, batch: int, target: float | None, expected: float,
                say: Callable[[str], None], stop: _StopRequest, checkpoint: TaskCheckpoint | None = None
                ) -> tuple[list[_Run], float | None, bool]:
    """One batch of the sweep at every lr multiplier: (its runs, judged; the target, set by this
    batch's first run when it is the pilot (`target` None); whether the user interrupted). Evaluations
    are spread over `expected` steps. The local sweep and each cluster task run exactly this."""
    limit = cfg.steps_limit
    tried: list[_Run] = []
    interrupted = False
    start = checkpoint.load() if checkpoint is not None else None
    if start is not None:
        tried, target = list(start["done"]), start["target"]
        say(f"batch {batch}: resuming at lr multiplier {len(tried) + 1}, step {start['current']['step']}"
            if start.get("current") else f"batch {batch}: resuming after {len(tried)} runs")
    for i, mult in enumerate(cfg.lr_grid):
        if i < len(tried):
            continue  # finished before a requeue
        pilot = target is None
        steps = cfg.pilot_steps if pilot else limit
        every = max(1, round(min(expected, steps) / cfg.evals_per_run))
        say(f"batch {batch}: lr {cfg.lr_at(batch, mult):.3g}" + (" (pilot)" if pilot else ""))
        resume = start.get("current") if start is not None and i == len(start["done"]) else None
        save = _saver(checkpoint, list(tried), target) if checkpoint is not None else None
        run = trainer.train(batch, mult, target, steps, every, stop, resume=resume, save=save,
                            save_every=checkpoint.every if checkpoint is not None else 0)
        if pilot and not run.stopped and run.note is None:
            target = pilot_target(run.record.eval_losses)
            say(f"target held-out loss {target:.4f} (the pilot's last three evaluations)")
        tried.append(run)
        if checkpoint is not None and not run.stopped:
            checkpoint.save({"done": list(tried), "target": target, "current": None})
        if run.stopped:
            interrupted = True
            break
    _judge(tried, target)
    return tried, target, interrupted


def _saver(checkpoint: TaskCheckpoint, done: list[_Run], target: float | None) -> Callable[[dict], None]:
    """Save a run in progress with the runs of this batch already finished and the target."""
    def save(state: dict) -> None:
        checkpoint.save({"done": done, "target": target, "current": state})
    return save


class TaskCheckpoint:
    """Where a cluster task keeps its state between requeues: one file, replaced atomically
    (written beside it, then renamed), so a task killed while saving leaves the previous state."""

    def __init__(self, path: Path, every: int, writer: bool = True) -> None:
        self.path, self.every = Path(path), every
        self.writer = writer  # rank 0 of a task's processes; the others read it on a resume

    def load(self) -> dict | None:
        if not self.path.exists():
            return None
        # The task's own pickle in the sweep folder (the run record is a Python object);
        # submitit's job files beside it are pickles too.
        return torch.load(self.path, map_location="cpu", weights_only=False)

    def save(self, state: dict) -> None:
        if not self.writer:
            return
        tmp = self.path.with_name(self.path.name + ".tmp")
        torch.save(state, tmp)
        os.replace(tmp, self.path)


def _judge(tried: list[_Run], target: float | None) -> None:
    """Each run's steps to the target, or a note saying why it has none."""
    for run in tried:
        if target is not None:
            run.crossed = crossing(run.record.eval_steps, run.record.eval_losses, target)
        if run.crossed is None and run.note is None:
            last = run.record.eval_losses[-1] if run.record.eval_losses else math.nan
            run.note = (f"did not reach loss {target:.4f} in {run.steps_run} steps (last held-out "
                        f"loss {last:.4f}); raise --max-steps" if not run.stopped
                        else "interrupted by the user")
        elif run.crossed == 0:
            raise UsageError(f"--target-loss {target:g} is not below the initial held-out loss "
                             f"{run.record.eval_losses[0]:.4f}: nothing to train for")


def _best_of(runs: list[_Run]) -> dict[tuple[int, int | None], _Run]:
    """Each (batch, seed)'s run with the fewest steps to the target (the first tried if none
    reached it)."""
    best_of: dict[tuple[int, int | None], _Run] = {}
    for r in runs:
        cur = best_of.get((r.batch, r.seed))
        if cur is None or (r.crossed is not None and (cur.crossed is None or r.crossed < cur.crossed)):
            best_of[(r.batch, r.seed)] = r
    return best_of


def _sweep_run(r: _Run, best: bool, tpe: int) -> SweepRun:
    until = r.crossed if r.crossed is not None else float(r.steps_run)
    tail = _tail_means(r.record, until)
    g2, trace = (tail[0], tail[1]) if tail else (None, None)
    tail_pre = _tail_means(r.record, until, preconditioned=True)
    g2_pre, trace_pre = (tail_pre[0], tail_pre[1]) if tail_pre else (None, None)
    return SweepRun(
        batch_examples=r.batch, batch_tokens=r.batch * tpe, micro_batch_examples=r.micro, lr=r.lr,
        lr_multiplier=r.multiplier, best=best, reached=r.crossed is not None,
        steps_run=r.steps_run, steps_to_target=r.crossed,
        examples_to_target=None if r.crossed is None else r.crossed * r.batch,
        tokens_to_target=None if r.crossed is None else r.crossed * r.batch * tpe,
        final_loss=r.record.eval_losses[-1], eval_steps=list(r.record.eval_steps),
        eval_losses=list(r.record.eval_losses), grad_sq=g2, trace_sigma=trace,
        b_simple=trace / g2 if g2 is not None and g2 > 0 else None,
        b_simple_run_mean=_run_mean(r.record, r.batch, until), seconds=r.seconds,
        grad_sq_pre=g2_pre, trace_sigma_pre=trace_pre,
        b_simple_pre=trace_pre / g2_pre if g2_pre is not None and g2_pre > 0 else None,
        steps_skipped=len(r.record.skipped), note=r.note, seed=r.seed)


def _reference_calibration(cfg: SweepConfig, trainer: _Trainer, ref: _Run, command: tuple[str, ...],
                           interrupted: bool) -> CalibrationFile:
    """The reference run as a calibration proper: its trajectory, fit and hardware profile."""
    base, device = cfg.base, trainer.device
    ref_cfg = base.with_(lr=ref.lr, batch=ref.batch, micro_batch=ref.micro, steps=ref.steps_run, seed=trainer.seed)
    provenance = _provenance(ref_cfg, trainer.proxy, trainer.ctx, trainer.amp,
                             _make_optimizer(ref_cfg, trainer.model), cfg.warmup, command)
    provenance = provenance.model_copy(update={
        "created_at": datetime.now(UTC).isoformat(timespec="seconds")})
    hardware = HardwareProfile(
        device=device.type, device_name=device_name(device), world_size=trainer.ctx.world_size,
        threads=torch.get_num_threads() if device.type == "cpu" else None, memory=[],
        **ref.timer.profile(trainer.tpe))
    return ref.record.to_file(provenance, hardware, cfg.warmup, interrupted=interrupted,
                              stop_reason="interrupted by the user" if interrupted else None)


def sweep(
    cfg: SweepConfig,
    out: Path,
    *,
    command: tuple[str, ...] = (),
    log: Callable[[str], None] | None = None,
) -> SweepOutcome:
    """Run the sweep and write the calibration file. Raises UsageError before training when the
    settings cannot work."""
    out = Path(out)
    say = log or (lambda _msg: None)
    try:
        cfg.validate()
        device = resolve_device(cfg.base.device)
        amp = resolve_amp(cfg.base.amp, device)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    out.parent.mkdir(parents=True, exist_ok=True)  # as write_calibration does: the lock is in it
    try:
        # One writer per file: a second sweep on the same out stops here, not after the runs.
        with out_lock(out):
            return _sweep(cfg, out, device, amp, command, say)
    except OutLocked as exc:
        raise UsageError(str(exc)) from None


def _sweep(cfg: SweepConfig, out: Path, device, amp, command: tuple[str, ...],
           say: Callable[[str], None]) -> SweepOutcome:
    base = cfg.base
    started = time.perf_counter()
    trainer = _Trainer(cfg, device, amp)
    tpe = trainer.tpe
    batches = sorted(cfg.batches)
    target_from = "given" if cfg.target_loss is not None else "pilot"
    runs, target, interrupted = _train_all(cfg, trainer, say)

    assert target is not None or interrupted or not runs
    target = target if target is not None else math.nan
    best_of = {b: r for (b, _), r in _best_of(runs).items()}  # one seed
    records = [_sweep_run(r, best_of[r.batch] is r, tpe) for r in runs]
    fit, fit_error = fit_sweep(records, tpe, base.confidence)
    comparison = compare([x for x in records if x.best and x.reached],
                         fit.b_crit_examples if fit else None, tpe, base.confidence)
    section = Sweep(
        target_loss=target, target_from=target_from, lr_rule=cfg.lr_rule, lr_base=base.lr,
        lr_base_batch=cfg.lr_base_batch, lr_grid=list(cfg.lr_grid), warmup_steps=cfg.warmup,
        max_steps=cfg.steps_limit, batches=batches, tokens_per_example=tpe, runs=records, fit=fit,
        fit_error=fit_error, comparison=comparison if fit or comparison.b_simple_examples else None,
        seconds=time.perf_counter() - started, interrupted=interrupted)

    ref_batch = cfg.reference if cfg.reference in best_of else batches[0]
    ref = best_of.get(ref_batch) or runs[0]
    cal = _reference_calibration(cfg, trainer, ref, command, interrupted)
    cal = cal.model_copy(update={"sweep": section})
    write_calibration(out, cal)
    status = "interrupted" if interrupted else ("complete" if fit is not None else "no-fit")
    return SweepOutcome(cal, out, status)
