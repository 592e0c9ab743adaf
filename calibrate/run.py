"""The calibration run: train a proxy for a bounded number of steps and measure B_simple at every
step with McCandlish's two-batch-size estimator. Within an optimizer step every micro-batch (on
every replica) is a B_small and the accumulated, all-reduced gradient is B_big, all at the same
weights; norms are taken before clipping, with the AMP loss scale and 1/accumulation divided out.
A checkpoint `<out>.ckpt.pt` (every --checkpoint-every steps and on Ctrl-C) lets `--resume`
continue bit-for-bit; Ctrl-C finishes the step and writes a partial file marked `interrupted`.
"""

from __future__ import annotations

import os
import platform
import signal
import threading
import time
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

import torch
from budgetdsl.calibrate import distributed
from budgetdsl.calibrate.config import RunConfig
from budgetdsl.calibrate.factory import Proxy, build_proxy
from budgetdsl.calibrate.hardware import (
    StepTimer,
    cuda_memory_profile,
    device_name,
    resolve_amp,
    resolve_device,
)
from budgetdsl.calibrate.noise import NoiseScaleTracker
from budgetdsl.calibrate.out_lock import OutLocked, out_lock
from budgetdsl.calibrate.progress import Progress
from budgetdsl.calibrate.record import RunRecord
from budgetdsl.calibrate.step import Stepper, to_device

from budgetdsl import __version__
from budgetdsl.io.atomic_write import remove_stale_temps
from budgetdsl.plan.calibration_file import (
    BatchSetup,
    CalibrationFile,
    DataInfo,
    EstimatorInfo,
    HardwareProfile,
    ModelInfo,
    OptimizerInfo,
    Provenance,
    sequence_context,
    write_calibration,
)


class UsageError(ValueError):
    """The run cannot start as asked (bad settings, missing data, checkpoint mismatch)."""


@dataclass(frozen=True)
class Outcome:
    calibration: CalibrationFile
    path: Path
    status: Literal["complete", "interrupted", "failed"]


def checkpoint_path(out: Path) -> Path:
    return out.with_name(out.name + ".ckpt.pt")


def _read_checkpoint(path: Path) -> dict:
    """The checkpoint at `path`; UsageError naming it when it cannot be read (a copy cut short, a
    disk that filled up, a file that is not ours): the run cannot resume from it, but starting
    afresh can, once the file is deleted."""
    import pickle
    import zipfile

    try:
        ckpt = torch.load(path, map_location="cpu", weights_only=True)
    except PermissionError:
        raise  # not damaged: the command says which file cannot be read
    except (OSError, RuntimeError, EOFError, ValueError, pickle.UnpicklingError, zipfile.BadZipFile) as exc:
        # torch's zip reader says RuntimeError or EINVAL for a file cut short, pickle EOFError
        text = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        why = (text.strip().splitlines() or [""])[0].split(". ")[0][:120] or type(exc).__name__
        raise UsageError(f"--resume: cannot read the checkpoint {path} ({why}); it is damaged or "
                         f"not a budgetdsl checkpoint: delete it and run again without --resume") from None
    if not isinstance(ckpt, dict) or not isinstance(ckpt.get("config"), dict):
        raise UsageError(f"--resume: {path} is not a budgetdsl calibration checkpoint; delete it "
                         "and run again without --resume")
    return ckpt


class _StopRequest:
    """Turns the first SIGINT (and any of `signals`: a cluster task takes SIGTERM, which Slurm sends
    on scancel and preemption) into a flag checked between steps (a step is never cut in half);
    the handler then steps aside, so a second Ctrl-C raises KeyboardInterrupt at once."""

    def __init__(self, signals: tuple[int, ...] = (signal.SIGINT,)) -> None:
        self.requested = False
        self.signum: int | None = None
        self._signals = signals
        self._previous: dict[int, object] = {}

    def _handle(self, signum, frame) -> None:
        self.requested, self.signum = True, signum
        signal.signal(signum, self._previous[signum])

    def __enter__(self) -> _StopRequest:
        if threading.current_thread() is threading.main_thread():
            self._previous = {sig: signal.signal(sig, self._handle) for sig in self._signals}
        return self

    def __exit__(self, *exc) -> None:
        for sig, previous in self._previous.items():
            signal.signal(sig, previous)


def _make_optimizer(cfg: RunConfig, model: torch.nn.Module) -> torch.optim.Optimizer:
    params = [p for p in model.parameters() if p.requires_grad]
    if cfg.optimizer == "sgd":
        return torch.optim.SGD(params, lr=cfg.lr, momentum=0.9, weight_decay=cfg.weight_decay)
    return torch.optim.AdamW(params, lr=cfg.lr, betas=(0.9, 0.95), weight_decay=cfg.weight_decay)


def _lr_at(step: int, peak: float, warmup: int) -> float:
    """Linear warmup, then constant: the noise scale depends on the learning rate, so a schedule
    that keeps it fixed keeps the measurement interpretable (Goyal et al. 2017 warmup)."""
    return peak * min(1.0, (step + 1) / warmup) if warmup > 0 else peak


def _provenance(cfg: RunConfig, proxy: Proxy, ctx, amp: str, optimizer, warmup: int, command) -> Provenance:
    betas = optimizer.defaults.get("betas")
    return Provenance(
        tool=f"budgetdsl {__version__}",
        created_at=datetime.now(UTC).isoformat(timespec="seconds"),
        command=list(command),
        torch_version=torch.__version__,
        python_version=platform.python_version(),
        platform=platform.platform(),
        seed=cfg.seed,
        model=ModelInfo(**proxy.model_info),
        data=DataInfo(**proxy.data_info),
        optimizer=OptimizerInfo(
            name=cfg.optimizer,
            lr=cfg.lr,
            weight_decay=cfg.weight_decay,
            betas=tuple(betas) if betas else None,
            warmup_steps=warmup,
            grad_clip=cfg.grad_clip,
        ),
        batch=BatchSetup(
            global_batch_examples=cfg.batch,
            micro_batch_examples=cfg.micro_batch,
            accumulation=cfg.accumulation(ctx.world_size),
            world_size=ctx.world_size,
            tokens_per_example=proxy.tokens_per_example,
            context=sequence_context(proxy.tokens_per_example),
        ),
        estimator=EstimatorInfo(ema_beta=cfg.beta, confidence=cfg.confidence),
        amp=amp,
    )


def calibrate(
    cfg: RunConfig,
    out: Path,
    *,
    resume: bool = False,
    quiet: bool = True,
    command: tuple[str, ...] = (),
    on_step: Callable[[int], None] | None = None,
) -> Outcome:
    """Run a calibration and write its file. Raises UsageError before training if the settings
    cannot work; a failed measurement returns status "failed" with a partial file."""
    out = Path(out)
    try:
        device = resolve_device(cfg.device)
        amp = resolve_amp(cfg.amp, device)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    ctx = distributed.init(device.type)
    try:
        if ctx.is_main:  # the API makes the folder (the CLI has refused a missing one); the lock is in it
            out.parent.mkdir(parents=True, exist_ok=True)
        # One writer per file: a second run on the same out stops here, not after minutes of training.
        with out_lock(out) if ctx.is_main else nullcontext():
            return _calibrate(cfg, out, device, amp, ctx, resume, quiet, command, on_step)
    except OutLocked as exc:
        raise UsageError(str(exc)) from None
    finally:
        distributed.shutdown(ctx)


def _calibrate(cfg, out, device, amp, ctx, resume, quiet, command, on_step) -> Outcome:
    try:
        cfg.validate(ctx.world_size)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    if device.type == "cuda" and ctx.active:
        device = torch.device("cuda", ctx.local_rank)
    accum = cfg.accumulation(ctx.world_size)
    ckpt_path = checkpoint_path(out)
    ckpt = _resumable_checkpoint(cfg, ckpt_path) if resume else None
    run = _Session.start(cfg, out, device, amp, ctx, accum, ckpt_path, ckpt)
    start = run.restore(ckpt) if ckpt is not None else 0
    run.memory = cuda_memory_profile(run.model, run.forward_backward, cfg.micro_batch, device)
    run.provenance = _provenance(cfg, run.proxy, ctx, amp, run.optimizer, run.warmup, command)
    status, reason, synced = run.train(start, quiet, on_step)
    run.close_trajectory(status, synced)
    outcome = run.write(status, reason)
    if status == "complete" and ctx.is_main:
        ckpt_path.unlink(missing_ok=True)
    return outcome


def _resumable_checkpoint(cfg: RunConfig, ckpt_path: Path) -> dict:
    """The checkpoint `--resume` continues from; UsageError when there is none or its settings differ."""
    if not ckpt_path.exists():
        raise UsageError(
            f"--resume: no checkpoint at {ckpt_path} (a finished run deletes its checkpoint)"
        )
    ckpt = _read_checkpoint(ckpt_path)
    if diff := cfg.mismatches(ckpt["config"]):
        shown = ", ".join(f"{k}: {ckpt['config'].get(k)!r} -> {getattr(cfg, k)!r}" for k in diff)
        raise UsageError(f"--resume: the settings differ from the checkpoint's ({shown})")
    return ckpt


class _Session:
    """One run's objects: the proxy and its optimizer, the data generators, the fixed held-out set
    and the record being measured; with the steps of the run (train, evaluate, checkpoint, write)."""

    memory: list
    provenance: Provenance

    def __init__(self, cfg, out, device, amp, ctx, accum, ckpt_path, proxy, ckpt) -> None:
        self.cfg, self.out, self.device, self.ctx, self.accum, self.ckpt_path = (
            cfg, out, device, ctx, accum, ckpt_path)
        self.proxy = proxy
        self.model = model = proxy.model.to(device)
        model.train()
        self.optimizer = _make_optimizer(cfg, model)
        self.scaler = torch.amp.GradScaler(device.type, init_scale=2.0**12) if amp == "fp16" else None
        self.autocast = (
            torch.autocast(device.type, dtype=torch.bfloat16 if amp == "bf16" else torch.float16)
            if amp != "none"
            else nullcontext()
        )
        self.data_gen = torch.Generator().manual_seed(cfg.seed)
        # A fixed held-out set, drawn once: every evaluation compares the same examples.
        eval_gen = torch.Generator().manual_seed(cfg.seed + 1)
        self.eval_set = (
            [to_device(proxy.heldout(cfg.micro_batch, eval_gen), device) for _ in range(cfg.eval_batches)]
            if proxy.heldout is not None
            else []
        )
        self.stepper = Stepper(model, self.optimizer, device, self.autocast, self.scaler, cfg.grad_clip, ctx)
        self.warmup = int(ckpt["warmup"]) if ckpt else cfg.warmup_steps
        tracker = NoiseScaleTracker(cfg.beta, cfg.confidence)
        self.record = RunRecord(tracker, cfg.batch, cfg.micro_batch, proxy.tokens_per_example)
        self.timer = StepTimer()

    @classmethod
    def start(cls, cfg, out, device, amp, ctx, accum, ckpt_path, ckpt) -> _Session:
        """The proxy built under the seed (model init), its samplers drawing from our own generators."""
        torch.manual_seed(cfg.seed)
        try:
            proxy = build_proxy(
                cfg.model, cfg.data, block_size=cfg.block_size, n_layer=cfg.n_layer, n_head=cfg.n_head,
                n_embd=cfg.n_embd, vocab_size=cfg.vocab_size, data_bytes=cfg.data_bytes,
                tokens_per_example=cfg.tokens_per_example,
            )
        except ValueError as exc:
            raise UsageError(str(exc)) from None
        return cls(cfg, out, device, amp, ctx, accum, ckpt_path, proxy, ckpt)

    def restore(self, ckpt: dict) -> int:
        """Load the checkpoint's state; the step to continue from."""
        self.model.load_state_dict(ckpt["model"])
        self.optimizer.load_state_dict(ckpt["optimizer"])
        if self.scaler is not None and ckpt.get("scaler"):
            self.scaler.load_state_dict(ckpt["scaler"])
        self.data_gen.set_state(ckpt["data_rng"])
        torch.set_rng_state(ckpt["torch_rng"])
        self.record.load_state_dict(ckpt["record"])
        times, examples, total = ckpt["timer"]
        timer = self.timer
        timer.times, timer.examples, timer.total = list(times), int(examples), float(total)
        return int(ckpt["next_step"])

    def forward_backward(self, n: int) -> None:
        with self.autocast:
            loss = self.model(to_device(self.proxy.train(n, torch.Generator().manual_seed(0)), self.device))
        loss.backward()

    @torch.no_grad()
    def evaluate(self) -> float:
        model, ctx, eval_set = self.model, self.ctx, self.eval_set
        model.eval()
        total = torch.zeros(2, dtype=torch.float64, device=self.device)  # (loss sum, batches)
        for i in range(ctx.rank, len(eval_set), ctx.world_size):
            with self.autocast:
                total[0] += model(eval_set[i]).double()
            total[1] += 1
        model.train()
        total = distributed.all_reduce_sum(ctx, total)
        return (total[0] / total[1]).item()

    def save_checkpoint(self, next_step: int) -> None:
        if not self.ctx.is_main:
            return
        timer, ckpt_path = self.timer, self.ckpt_path
        state = {
            "config": self.cfg.to_dict(),
            "warmup": self.warmup,
            "next_step": next_step,
            "model": self.model.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "scaler": self.scaler.state_dict() if self.scaler is not None else {},
            "data_rng": self.data_gen.get_state(),
            "torch_rng": torch.get_rng_state(),
            "record": self.record.state_dict(),
            "timer": [timer.times, timer.examples, timer.total],
        }
        tmp = ckpt_path.with_name(ckpt_path.name + f".{os.getpid()}.tmp")
        remove_stale_temps(ckpt_path)  # a run killed mid-save left its NAME.PID.tmp
        torch.save(state, tmp)
        os.replace(tmp, ckpt_path)

    def write(self, status: str, reason: str | None) -> Outcome:
        device = self.device
        hardware = HardwareProfile(
            device=device.type,
            device_name=device_name(device),
            world_size=self.ctx.world_size,
            threads=torch.get_num_threads() if device.type == "cpu" else None,
            memory=self.memory,
            **self.timer.profile(self.proxy.tokens_per_example),
        )
        now = datetime.now(UTC).isoformat(timespec="seconds")
        prov = self.provenance.model_copy(update={"created_at": now})
        cal = self.record.to_file(prov, hardware, self.warmup, interrupted=status != "complete",
                                  stop_reason=reason)
        if self.ctx.is_main:
            write_calibration(self.out, cal)
        return Outcome(cal, self.out, status)

    def step(self, step: int, stop: _StopRequest, bar: Progress):
        """One optimizer step: its learning rate, an evaluation when due, the measured gradients."""
        cfg, ctx, record, device = self.cfg, self.ctx, self.record, self.device
        lr = _lr_at(step, cfg.lr, self.warmup)
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        is_eval = step % cfg.eval_every == 0 or step == cfg.steps - 1
        if is_eval and self.eval_set:
            record.evaluated(step, self.evaluate())  # at this step's weights, before its update

        t0 = time.perf_counter()
        # Every replica draws the whole global batch's micro-batches in one global order
        # and keeps its own slice: the data (and so the result) does not depend on the
        # number of replicas, and a 2-process run reproduces a 1-process one.
        accum = self.accum
        micro = [self.proxy.train(cfg.micro_batch, self.data_gen) for _ in range(accum * ctx.world_size)]
        micro = micro[ctx.rank * accum : (ctx.rank + 1) * accum]
        m = self.stepper.step(micro, stop.requested)
        if m.finite:
            record.measured(step, m.train_loss, m.sq_small, m.sq_big, pre=(m.sq_small_pre, m.sq_big_pre))
        else:
            record.skip(step)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        self.timer.add(time.perf_counter() - t0, cfg.batch)

        if is_eval and not self.eval_set and m.finite:
            record.evaluated(step, m.train_loss)  # no held-out data: the training loss
        if is_eval and record.eval_steps and record.eval_steps[-1] == step:
            p = record.point(step)
            if p is not None:
                bar.update(step + 1, loss=p["loss"], b_simple=p["b_simple"])
        bar.update(step + 1)
        return m

    def train(self, start: int, quiet: bool, on_step) -> tuple[str, str | None, bool]:
        """The loop from `start`: (status, why it stopped, whether every replica stopped at the same
        step so collectives are still safe)."""
        cfg, record = self.cfg, self.record
        limit = cfg.nonfinite_limit
        status, reason, step = "complete", None, start - 1
        synced = True
        with _StopRequest() as stop, Progress(cfg.steps, enabled=not quiet and self.ctx.is_main,
                                              done=start) as bar:
            try:
                for step in range(start, cfg.steps):
                    m = self.step(step, stop, bar)
                    if len(record.skipped) > limit:
                        status = "failed"
                        reason = (
                            f"aborted at step {step}: {len(record.skipped)} steps with a non-finite loss or "
                            f"gradient (limit {limit}); lower --lr, use --amp none, or check the model"
                        )
                        break
                    if m.stop_votes > 0:
                        status, reason = "interrupted", f"interrupted by the user after step {step}"
                        self.save_checkpoint(step + 1)
                        break
                    if cfg.checkpoint_every and (step + 1) % cfg.checkpoint_every == 0 and step + 1 < cfg.steps:
                        self.save_checkpoint(step + 1)
                    if on_step is not None:
                        on_step(step)
            except KeyboardInterrupt:
                # A second Ctrl-C: the current step may be half applied, so no new checkpoint (the
                # last periodic one stays valid); what was measured so far is still written.
                status, reason, synced = "interrupted", f"interrupted by the user during step {step + 1}", False
        return status, reason, synced

    def close_trajectory(self, status: str, synced: bool) -> None:
        """A run stopped early ends with a trajectory point at its last measured step, so the
        summary describes everything that was measured."""
        record, eval_set = self.record, self.eval_set
        last_measured = record.tracker.steps[-1] if len(record.tracker) else None
        while record.eval_steps and (last_measured is None or record.eval_steps[-1] > last_measured):
            record.eval_steps.pop()  # an evaluation of a step that was never measured
            record.eval_losses.pop()
        has_point = bool(record.trajectory) and record.trajectory[-1]["step"] == last_measured
        if status != "complete" and last_measured is not None and not has_point:
            if eval_set and (synced or not self.ctx.active):
                record.evaluated(last_measured, self.evaluate())
            elif not eval_set:
                record.evaluated(last_measured, record.train_loss[-1])
            if record.eval_steps and record.eval_steps[-1] == last_measured:
                record.point(last_measured)
