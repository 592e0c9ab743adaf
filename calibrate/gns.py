"""Record B_simple inside an existing training loop and write the file `budgetdsl calibrate` writes:
no extra forward or backward pass, no change to the gradients or the update.

The two batch sizes of McCandlish et al. 2018 appendix A.1 are already in a loop that accumulates
gradients or runs data-parallel: B_small is one micro-batch on one replica, B_big the whole step.
Adapters: gns_hf (Hugging Face Trainer), gns_lightning. Not supported: FSDP/ZeRO-3 (a gradient is
sharded before the hooks see it whole), DDP without `no_sync` during accumulation.
"""

from __future__ import annotations

import functools
import math
import platform
import statistics
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from budgetdsl.calibrate.config import default_ema_beta
from budgetdsl.calibrate.hardware import device_name
from budgetdsl.calibrate.noise import NoiseScaleTracker
from budgetdsl.calibrate.record import RunRecord

from budgetdsl import __version__
from budgetdsl.plan.calibration_file import (
    BatchSetup,
    CalibrationFile,
    DataInfo,
    EstimatorInfo,
    HardwareProfile,
    MemoryPoint,
    ModelInfo,
    OptimizerInfo,
    Provenance,
    sequence_context,
    write_calibration,
)

_engine = torch.autograd.Variable._execution_engine  # queue_callback: what DDP and FSDP use too


def _graph_task() -> int:
    """The id of the autograd graph task running now: a reentrant backward (activation
    checkpointing with use_reentrant=True) runs a graph task of its own inside the step's."""
    current = getattr(torch._C, "_current_graph_task_id", None)
    return int(current()) if current is not None else -1


def _world() -> tuple[int, int]:
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def loss_of(output: Any) -> torch.Tensor | None:
    """The loss in a model's output: a scalar tensor, `.loss` (Hugging Face), or a "loss" key."""
    if isinstance(output, torch.Tensor):
        return output if output.dim() == 0 else None
    loss = output.get("loss") if isinstance(output, dict) else getattr(output, "loss", None)
    return loss if isinstance(loss, torch.Tensor) and loss.dim() == 0 else None


def leading_dim(batch: Any) -> int | None:
    """The leading dimension of the first tensor in a batch (nested tuples, lists, dicts)."""
    if isinstance(batch, torch.Tensor):
        return int(batch.shape[0]) if batch.dim() else None
    items = batch.values() if isinstance(batch, dict) else batch if isinstance(batch, (list, tuple)) else ()
    for item in items:
        n = leading_dim(item)
        if n is not None:
            return n
    return None


class SplitGradientError(ValueError):
    """A parameter received its gradient of one micro-batch in pieces: its per-micro-batch norm
    (B_small) would be wrong."""


# Why a step was not measured: the reasons the file's summary counts.
SKIP_NONFINITE = "non-finite"  # an AMP overflow step: the optimizer skips it too
SKIP_ONE_MICRO_BATCH = "one micro-batch"  # B_small = B_big: nothing to compare (single replica)
SKIP_UNEQUAL = "unequal micro-batches"  # micro-batches of different sizes in one step
SKIP_DISCARDED = "gradients discarded"  # .grad cleared without an optimizer step
SKIP_SPLIT = "split gradient"  # a parameter's gradient arrived in pieces (reentrant checkpointing)
SKIP_UNEQUAL_ITEMS = "unequal num_items_in_batch"  # micro-batch losses weighted by unequal item counts


# How, with public hooks only (nanoGNS and AdaptDL/Pollux measure the same way):
# - a tensor hook on every trainable parameter sees that parameter's gradient of the current
#   micro-batch before it is added into `.grad` (under DDP, before the all-reduce) and takes its
#   norm: one fused reduction per parameter and micro-batch;
# - at the end of every backward an autograd final callback, re-queued once so it runs after DDP's
#   own final callback has written the all-reduced gradient, reads |.grad|² in one `_foreach_norm`
#   (before clipping and unscaling, which come later in the step); the last one read before the
#   step boundary is the big batch. A reentrant backward inside the step's (checkpoint with
#   use_reentrant=True) is a graph task of its own: each task gets its callback, the outer one ends last;
# - the step boundary is observed, not counted: the optimizer's step (a step pre-hook) or the
#   framework's own event (`end_step`). The micro-batches seen since the previous boundary set
#   B_big of that step, so a short step (the leftover micro-batches at an epoch's end) is
#   measured at its own size;
# - the norms stay on the device; every `flush_every` steps one `.tolist()` (with several replicas,
#   one all-reduce of a small matrix averaging their micro-batch norms) turns them into numbers.
# Both norms carry the loss multiplier (1/divisor when each micro-batch's loss is divided) and
# the AMP loss scale; they are divided out per step so the file holds |g|² of mean losses, as
# `budgetdsl calibrate` writes them (B_simple, a ratio, does not depend on a common factor).
class GradientNoiseScale:
    """Measures B_simple at every optimizer step of the loop `model` trains in.

        gns = GradientNoiseScale(model, optimizer, micro_batch=8, accumulation=4, tokens_per_example=1024)
        for step in range(steps):
            for batch in micro_batches:          # `accumulation` of them (fewer at an epoch's end is fine)
                loss = model(batch) / 4          # (under DDP: inside model.no_sync() but the last)
                loss.backward()
            optimizer.step(); optimizer.zero_grad()
        gns.write("calibration.json")            # every replica calls it; rank 0 writes

    optimizer: its `step` marks the end of each optimizer step (a step pre-hook); None when an
    adapter calls `end_step` at its framework's own event. micro_batch: examples per
    forward/backward on one replica (B_small). accumulation: backwards per full optimizer step
    (the loss divisor). world_size: data-parallel replicas (default: torch.distributed's).
    loss_divided_by_accumulation: whether each micro-batch's loss is divided by `accumulation`
    before backward (the usual accumulation; it sets the absolute |G|², not B_simple).
    loss_divisor: instead, the divisor given a step's number of micro-batches (Hugging Face
    divides a short step's losses by its own count).
    grad_scale: returns the AMP loss scale in force (e.g. `scaler.get_scale`); None for fp32/bf16.
    capture_loss: record the training loss from the model's output (`loss_of`) on each training
    forward; adapters whose model returns no loss pass False and call `observe_loss`.
    ema_beta: the estimator's smoothing; None: `config.default_ema_beta` of the learning rates the
    optimizer ran at (1.0, the plain mean, when every step was at lr 0). confidence: the interval's.
    point_every: steps between trajectory points. flush_every: steps between host reads.
    """

    def __init__(
        self,
        model: torch.nn.Module,
        optimizer: torch.optim.Optimizer | None = None,
        *,
        micro_batch: int,
        accumulation: int = 1,
        tokens_per_example: int = 1,
        world_size: int | None = None,
        loss_divided_by_accumulation: bool = True,
        loss_divisor: Callable[[int], float] | None = None,
        grad_scale: Callable[[], float] | None = None,
        capture_loss: bool = True,
        ema_beta: float | None = None,
        confidence: float = 0.95,
        point_every: int = 10,
        flush_every: int | None = None,
    ):
        if micro_batch < 1 or accumulation < 1 or tokens_per_example < 1:
            raise ValueError("micro_batch, accumulation and tokens_per_example must be at least 1")
        rank, world = _world()
        self.rank, self.world_size = rank, world_size or world
        if self.world_size * accumulation < 2:
            raise ValueError("B_simple needs two batch sizes at the same weights: gradient "
                             "accumulation (accumulation >= 2) or data-parallel replicas")
        self.model = model
        self.micro_batch, self.accumulation = micro_batch, accumulation
        self.tokens_per_example = tokens_per_example
        if loss_divisor is None:
            loss_divisor = (lambda n: float(accumulation)) if loss_divided_by_accumulation else (lambda n: 1.0)
        self.loss_divisor = loss_divisor
        self.grad_scale = grad_scale
        self._ema_beta, self.confidence = ema_beta, confidence
        self.point_every = max(1, point_every)
        self.flush_every = flush_every or self.point_every
        self.params = [p for p in model.parameters() if p.requires_grad]
        groups: dict[tuple, list[torch.nn.Parameter]] = {}
        for p in self.params:
            groups.setdefault((p.device, p.dtype), []).append(p)
        self._groups = list(groups.values())
        self.device = self.params[0].device
        self.enabled = True
        # Per step, on the device until flushed.
        self._counts = [0] * len(self.params)
        self._parts: list[torch.Tensor] = []
        self._big: torch.Tensor | None = None  # |.grad|² at the end of the latest backward
        self._big_scale = 1.0  # the loss scale in force then
        self._open: set[int] = set()  # graph tasks whose end-of-backward callback is queued
        self._task_of = [-1] * len(self.params)  # the graph task of each parameter's latest gradient
        self._sizes: set[int] = set()  # micro-batch sizes seen by the forward pre-hook this step
        self._items: list[torch.Tensor] = []  # item counts weighting each micro-batch's loss (HF)
        self._loss_sum: torch.Tensor | float = 0.0
        self._loss_n = 0
        # (step, small_sum, n_small, big, loss_sum, loss_n, spread, divisor_small, divisor_big)
        self._pending: list[tuple] = []
        self._last_time: float | None = None
        # Flushed: plain numbers.
        self.step = 0  # optimizer steps observed (measured or skipped) so far
        self.steps: list[int] = []
        self.sq_small: list[float] = []
        self.sq_big: list[float] = []
        self.b_big: list[int] = []  # examples of each measured step (all replicas)
        self.train_losses: list[float | None] = []
        self.skipped: list[int] = []
        self.skip_reasons: dict[str, int] = {}
        self.split: str | None = None  # the first parameter whose gradient came in pieces
        self.step_times: list[float] = []
        self.heldout: list[tuple[int, float]] = []
        self.logged: list[tuple[int, float]] = []  # training losses reported by a framework's log
        self.peak_bytes: int | None = None
        self.lr_max = 0.0
        self.lr_seen = False
        self._handles = [p.register_hook(functools.partial(self._on_grad, i)) for i, p in enumerate(self.params)]
        self._handles.append(model.register_forward_pre_hook(self._on_forward_pre, with_kwargs=True))
        self._handles.append(model.register_forward_hook(self._on_forward))
        if optimizer is not None:
            self._handles.append(optimizer.register_step_pre_hook(self._on_optimizer_step))
        self.optimizer = optimizer
        self.capture_loss = capture_loss

    @property
    def ema_beta(self) -> float:
        """The EMA β the record uses: given, or the one policy (`config.default_ema_beta`)."""
        if self._ema_beta is not None:
            return self._ema_beta
        return default_ema_beta(self.lr_max if self.lr_seen else None)

    # -- hooks ------------------------------------------------------------------------------------

    def _on_grad(self, i: int, grad: torch.Tensor) -> None:
        if not self.enabled:
            return
        if self._counts[i] and self.params[i].grad is None:
            self._discard()  # .grad was cleared without a step (an fp16 overflow skip): not one step
        self._counts[i] += 1
        # Hooks run without grad mode: no detach. Half-precision gradients are summed in fp32.
        self._parts.append(torch.linalg.vector_norm(grad) if grad.dtype == torch.float32
                           else torch.linalg.vector_norm(grad, dtype=torch.float32))
        task = _graph_task()
        # Graph task ids grow: a nested (reentrant) backward has a larger id than the one it runs
        # in. A parameter that got a gradient from a task nested in this one gets its micro-batch
        # gradient in pieces, and the norms of the pieces are not the norm of the whole.
        if self._task_of[i] > task and self.split is None:
            names = {id(p): name for name, p in self.model.named_parameters()}
            self.split = names.get(id(self.params[i]), f"parameter {i}")
        self._task_of[i] = task
        if task not in self._open:
            self._open.add(task)
            _engine.queue_callback(functools.partial(self._end_of_backward, task))

    def _end_of_backward(self, task: int) -> None:
        # Queued during this backward, so it runs before callbacks queued later in it — DDP's
        # finalize (the all-reduced gradient) among them. Run once more, after those.
        _engine.queue_callback(functools.partial(self._after_sync, task))

    def _after_sync(self, task: int) -> None:
        self._open.discard(task)
        with torch.no_grad():
            big = torch.zeros((), dtype=torch.float32, device=self.device)
            for ps in self._groups:
                grads = [p.grad for p in ps if p.grad is not None]
                if grads:
                    big = big + torch.stack(torch._foreach_norm(grads)).float().square().sum().to(self.device)
        self._big = big
        self._big_scale = float(self.grad_scale()) if self.grad_scale is not None else 1.0

    def _on_optimizer_step(self, optimizer: torch.optim.Optimizer, args: Any, kwargs: Any) -> None:
        self.end_step()

    def end_step(self) -> None:
        """The step's gradient is complete (after its last backward, before the update): measure
        it. The optimizer's step pre-hook calls this; an adapter calls it at its framework's event."""
        if not self.enabled:
            return
        if self.optimizer is not None:
            self.observe_optimizer(self.optimizer)
        counts = [c for c in self._counts if c]
        if not counts or self._big is None:
            self._reset()  # no backward since the last step: nothing to measure
            return
        n = max(counts)  # micro-batches: one gradient per parameter and backward (fewer: unused)
        reason = None
        if self.split is not None:
            reason = SKIP_SPLIT
        elif len(self._sizes) > 1:
            reason = SKIP_UNEQUAL
        elif n * self.world_size < 2:
            reason = SKIP_ONE_MICRO_BATCH
        if reason is not None:
            self._skip(reason)
            self._reset()
            return
        small = torch.stack(self._parts).square().sum()
        # Micro-batch losses weighted by their item counts (num_items_in_batch) weigh the micro-batches
        # equally only when the counts are equal: their spread, checked when flushed.
        spread = (torch.stack([c.reshape(-1).float() for c in self._items]).aminmax(dim=0)
                  if len(self._items) > 1 else None)
        unequal = (spread.max - spread.min).sum() if spread is not None else 0.0
        c = 1.0 / self.loss_divisor(n)
        # .grad = c·s·n·(mean gradient); a micro-batch's hook saw c·s·(its gradient).
        s_small = float(self.grad_scale()) if self.grad_scale is not None else 1.0
        self._pending.append((self.step, small, n, self._big, self._loss_sum, self._loss_n, unequal,
                              (c * s_small) ** 2, (c * self._big_scale * n) ** 2))
        now = time.perf_counter()
        if self._last_time is not None:
            self.step_times.append(now - self._last_time)
        self._last_time = now
        self.step += 1
        self._reset()

    def _skip(self, reason: str) -> None:
        self.skipped.append(self.step)
        self.skip_reasons[reason] = self.skip_reasons.get(reason, 0) + 1
        self.step += 1
        self._last_time = None

    def _discard(self) -> None:
        self._skip(SKIP_DISCARDED)
        self._reset()

    def _reset(self) -> None:
        self._counts = [0] * len(self.params)
        self._parts = []
        self._big = None
        self._sizes = set()
        self._items = []
        self._loss_sum, self._loss_n = 0.0, 0

    def _on_forward_pre(self, module: torch.nn.Module, args: Any, kwargs: Any) -> None:
        if module.training and torch.is_grad_enabled() and self.enabled:
            size = leading_dim((args, kwargs))
            if size is not None:
                self._sizes.add(size)

    def _on_forward(self, module: torch.nn.Module, args: Any, output: Any) -> None:
        if not (module.training and torch.is_grad_enabled()):
            return
        if len(self._pending) >= self.flush_every:
            self.flush()
        if self.capture_loss:
            loss = loss_of(output)
            if loss is not None:
                self.observe_loss(loss)

    # -- what the loop or an adapter reports -----------------------------------------------------

    def observe_micro_batch(self, examples: int) -> None:
        """The size of a micro-batch of the current step, where the model's forward does not show
        it (an adapter's batch hook): a step of unequal micro-batches is skipped and counted."""
        self._sizes.add(int(examples))

    def observe_items(self, count: torch.Tensor) -> None:
        """The item count (e.g. labels that are not -100) of a micro-batch whose loss is a sum over
        its items divided by the step's total (Hugging Face's `num_items_in_batch`): the micro-
        batches then weigh in proportion to their counts, and a step whose counts differ is
        skipped and counted (B_small's norms assume equal weights)."""
        self._items.append(count.detach())

    def observe_loss(self, loss: torch.Tensor | float) -> None:
        """The mean loss of one micro-batch of the current step (summed on the device)."""
        self._loss_sum = self._loss_sum + (loss.detach().float() if isinstance(loss, torch.Tensor) else float(loss))
        self._loss_n += 1

    def evaluated(self, loss: float, step: int | None = None) -> None:
        """A held-out loss at the weights after `step` updates (default: now). With any held-out
        loss the trajectory's loss axis is held-out, interpolated between evaluations."""
        self.heldout.append((self.step if step is None else step, float(loss)))

    def logged_loss(self, loss: float, step: int | None = None) -> None:
        """A training loss a framework logged (e.g. averaged over its logging interval)."""
        self.logged.append((self.step if step is None else step, float(loss)))

    def observe_optimizer(self, optimizer: torch.optim.Optimizer) -> None:
        """The learning rates in force (the file records the largest; all 0: fixed weights)."""
        self.lr_max = max([self.lr_max, *(float(g.get("lr", 0.0)) for g in optimizer.param_groups)])
        self.lr_seen = True

    def flush(self) -> None:
        """Read the pending steps' norms to the host (one transfer; with replicas, one all-reduce
        that averages their micro-batch norms and losses). Every replica must call it together:
        the hooks do, on the same step, and so do `calibration` and `write`."""
        if not self._pending:
            return
        if self.device.type == "cuda":
            self.peak_bytes = max(self.peak_bytes or 0, int(torch.cuda.max_memory_allocated(self.device)))
        rows = torch.stack([
            torch.stack([torch.as_tensor(v, dtype=torch.float64, device=self.device).reshape(())
                         for v in (small, n, big, loss_sum, loss_n, spread)])
            for _, small, n, big, loss_sum, loss_n, spread, _, _ in self._pending])
        if self.world_size > 1 and dist.is_initialized():
            dist.all_reduce(rows, op=dist.ReduceOp.SUM)
        for (step, *_, div_small, div_big), (small, n, big, loss_sum, loss_n, spread) in zip(self._pending,
                                                                                              rows.tolist()):
            if spread > 0:
                self.skipped.append(step)
                self.skip_reasons[SKIP_UNEQUAL_ITEMS] = self.skip_reasons.get(SKIP_UNEQUAL_ITEMS, 0) + 1
                continue
            big /= self.world_size  # identical on every replica: the sum restores it
            sq_small, sq_big = small / n / div_small, big / div_big
            loss = loss_sum / loss_n if loss_n else None
            if all(math.isfinite(v) for v in (sq_small, sq_big)) and (loss is None or math.isfinite(loss)):
                self.steps.append(step)
                self.sq_small.append(sq_small)
                self.sq_big.append(sq_big)
                self.b_big.append(round(n) * self.micro_batch)  # n: micro-batches of all replicas
                self.train_losses.append(loss)
            else:
                self.skipped.append(step)
                self.skip_reasons[SKIP_NONFINITE] = self.skip_reasons.get(SKIP_NONFINITE, 0) + 1
        self._pending = []

    def close(self) -> None:
        """Remove the hooks (the loop trains on unmeasured)."""
        for h in self._handles:
            h.remove()
        self._handles = []
        self.enabled = False

    # -- the file -------------------------------------------------------------------------------

    def record(self, warmup: int = 0) -> RunRecord:
        """The measurements replayed through the calibration run's own record: the estimator,
        the trajectory points (every `point_every` steps and the last) and the fit."""
        self.flush()
        if self.split is not None:
            raise SplitGradientError(
                f"{self.split}: this parameter's gradient of one micro-batch arrived in pieces, so its "
                "micro-batch norm is not B_small's; this is reentrant activation checkpointing "
                "(checkpoint(..., use_reentrant=True)) around a parameter also used outside the "
                "checkpointed part: use checkpoint(..., use_reentrant=False)")
        if not self.steps:
            seen = ", ".join(f"{k}: {v}" for k, v in sorted(self.skip_reasons.items())) or "no step boundary"
            raise ValueError(f"no optimizer step was measured ({seen}); pass the optimizer to "
                             "GradientNoiseScale, or call end_step() after each step's last backward")
        batch = self.micro_batch * self.accumulation * self.world_size
        rec = RunRecord(NoiseScaleTracker(self.ema_beta, self.confidence), batch, self.micro_batch,
                        self.tokens_per_example)
        rec.skipped = list(self.skipped)
        rec.skip_reasons = dict(self.skip_reasons)
        losses = self._loss_axis()
        if losses is None:
            raise ValueError("no loss to place B_simple at: the model's output carries none; report "
                             "losses with observe_loss, logged_loss or evaluated")
        for i, step in enumerate(self.steps):
            known = losses(step)
            rec.eval_steps, rec.eval_losses = known
            train = self.train_losses[i]
            if train is None and known[1]:  # no per-step training loss: the latest one known
                train = known[1][-1]
            rec.measured(step, train, self.sq_small[i], self.sq_big[i], self.b_big[i])
            # A point needs a loss at or before its step: none is borrowed from the future.
            if (i % self.point_every == 0 or i == len(self.steps) - 1) and known[0]:
                rec.point(step)
        if not rec.trajectory:
            raise ValueError(f"no loss was observed at or before the last measured step ({self.steps[-1]}): "
                             "log the training loss more often (e.g. a smaller logging_steps), or "
                             "report losses with observe_loss or evaluated")
        return rec

    def _loss_axis(self) -> Callable[[int], tuple[list[int], list[float]]] | None:
        """The loss observations known up to a step: held-out if any, else training losses."""
        if self.heldout:
            obs = sorted(self.heldout)
        elif self.logged:
            obs = sorted(self.logged)
        else:
            obs = [(s, loss) for s, loss in zip(self.steps, self.train_losses) if loss is not None]
        if not obs:
            return None

        def upto(step: int) -> tuple[list[int], list[float]]:
            known = [o for o in obs if o[0] <= step]  # never a later one
            return [s for s, _ in known], [loss for _, loss in known]

        return upto

    def calibration(
        self,
        *,
        model_name: str | None = None,
        data: str = "user data",
        data_kind: str = "factory",
        vocab_size: int | None = None,
        seed: int | None = None,
        optimizer: torch.optim.Optimizer | None = None,
        warmup_steps: int = 0,
        grad_clip: float | None = None,
        amp: str = "none",
        flops_per_token: float | None = None,
        integration: str = "budgetdsl.calibrate.gns",
    ) -> CalibrationFile:
        """The calibration file of what was measured, with its provenance."""
        optimizer = optimizer if optimizer is not None else self.optimizer
        if optimizer is not None:
            self.observe_optimizer(optimizer)
        rec = self.record(warmup_steps)
        opt = optimizer.defaults if optimizer is not None else {}
        betas = opt.get("betas")
        n_params = sum(p.numel() for p in self.params)
        model_cls = type(self.model)
        prov = Provenance(
            tool=f"budgetdsl {__version__} ({integration})",
            created_at=datetime.now(UTC).isoformat(timespec="seconds"),
            command=list(sys.argv),
            torch_version=torch.__version__,
            python_version=platform.python_version(),
            platform=platform.platform(),
            seed=int(seed if seed is not None else torch.initial_seed() % 2**63),
            model=ModelInfo(name=model_name or f"{model_cls.__module__}.{model_cls.__qualname__}", kind="factory",
                            config={}, n_params=n_params, flops_per_token=flops_per_token),
            data=DataInfo(kind=data_kind, source=data, sha256=None, heldout=bool(self.heldout),
                          vocab_size=vocab_size),
            optimizer=OptimizerInfo(
                name=type(optimizer).__name__.lower() if optimizer is not None else "unknown",
                lr=self.lr_max, weight_decay=float(opt.get("weight_decay", 0.0) or 0.0),
                betas=tuple(betas) if betas else None, warmup_steps=warmup_steps, grad_clip=grad_clip),
            batch=BatchSetup(global_batch_examples=rec.batch, micro_batch_examples=self.micro_batch,
                             accumulation=self.accumulation, world_size=self.world_size,
                             tokens_per_example=self.tokens_per_example,
                             context=sequence_context(self.tokens_per_example)),
            estimator=EstimatorInfo(ema_beta=self.ema_beta, confidence=self.confidence),
            amp=amp,
        )
        hardware = HardwareProfile(device=self.device.type, device_name=device_name(self.device),
                                   world_size=self.world_size,
                                   threads=torch.get_num_threads() if self.device.type == "cpu" else None,
                                   memory=[MemoryPoint(micro_batch_examples=self.micro_batch,
                                                       peak_bytes=self.peak_bytes)] if self.peak_bytes else [],
                                   **self._throughput(rec.batch))
        return rec.to_file(prov, hardware, warmup_steps)

    def _throughput(self, batch: int) -> dict[str, float]:
        if not self.step_times:
            return {}
        median = statistics.median(self.step_times)  # whole optimizer steps of the user's loop
        eps = batch / median if median > 0 else None
        return {"step_time_s": median, "examples_per_s": eps,
                "tokens_per_s": eps * self.tokens_per_example if eps else None}

    def write(self, path: str | Path, **provenance: Any) -> CalibrationFile:
        """Build the file on every replica (flushing together), write it on rank 0 only."""
        cal = self.calibration(**provenance)
        if self.rank == 0:
            write_calibration(path, cal)
        return cal
