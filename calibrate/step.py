"""One optimizer step that also measures: gradient accumulation over micro-batches at the same
weights, the big batch all-reduced over replicas, then clipping and the update — returning the
squared norms the estimator needs. The loop (run.py) and the benchmark (bench/) share it.

Norms are taken before clipping, with the AMP loss scale and the 1/accumulation factor divided out.
A step whose loss or norms are not finite is not applied (the GradScaler skips it itself under
fp16), and says so; the caller counts it.
"""

from __future__ import annotations

import math
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any

import torch
from budgetdsl.calibrate import distributed
from budgetdsl.calibrate.distributed import DistContext
from budgetdsl.calibrate.gradients import Accumulator


@dataclass(frozen=True)
class Measurement:
    train_loss: float  # mean over the global batch
    sq_small: float  # mean over all micro-batches (all replicas) of |g_small|², micro-batch mean loss
    sq_big: float  # |g_big|² of the global-batch mean loss
    stop_votes: float  # replicas that asked to stop (Ctrl-C) during this step
    # The same norms of Adam's preconditioned gradient P⊙g, P = 1/(√v̂ + ε) of the step's start;
    # None with another optimizer or before Adam has a second moment (its first step).
    sq_small_pre: float | None = None
    sq_big_pre: float | None = None

    @property
    def finite(self) -> bool:
        return all(math.isfinite(v) for v in (self.train_loss, self.sq_small, self.sq_big))


def adam_preconditioner(optimizer: torch.optim.Optimizer) -> dict[torch.nn.Parameter, torch.Tensor] | None:
    """Adam's (and AdamW's) diagonal preconditioner at the start of a step, P = 1/(√v̂ + ε) with
    v̂ = v/(1 − β₂^t) its bias-corrected second moment (Kingma & Ba 2015, algorithm 1): the update
    is lr·m̂·P, so the noise scale of the direction Adam moves in is that of P⊙g. None for another
    optimizer, or before the first step (no v yet)."""
    if not isinstance(optimizer, (torch.optim.Adam, torch.optim.AdamW)):
        return None
    out: dict[torch.nn.Parameter, torch.Tensor] = {}
    for group in optimizer.param_groups:
        beta2, eps = group["betas"][1], group["eps"]
        for p in group["params"]:
            state = optimizer.state.get(p, {})
            v, t = state.get("exp_avg_sq"), state.get("step")
            if v is None or t is None or float(t) < 1:
                return None
            v_hat = v / (1.0 - beta2 ** float(t))
            out[p] = 1.0 / (v_hat.sqrt() + eps)
    return out or None


def to_device(batch: Any, device: torch.device) -> Any:
    """Move a batch (a tensor or nested tuples/lists/dicts of them) to the device."""
    if isinstance(batch, torch.Tensor):
        return batch.to(device)
    if isinstance(batch, (list, tuple)):
        return type(batch)(to_device(b, device) for b in batch)
    if isinstance(batch, dict):
        return {k: to_device(v, device) for k, v in batch.items()}
    return batch


@dataclass
class Stepper:
    model: torch.nn.Module
    optimizer: torch.optim.Optimizer
    device: torch.device
    autocast: AbstractContextManager
    scaler: torch.amp.GradScaler | None = None
    grad_clip: float | None = None
    ctx: DistContext = DistContext()

    def __post_init__(self) -> None:
        self.acc = Accumulator(list(self.model.parameters()))

    def step(self, micro: list, stop_requested: bool = False) -> Measurement:
        """One optimizer step over this replica's micro-batches."""
        accum, dev = len(micro), self.device
        loss_scale = self.scaler.get_scale() if self.scaler is not None else 1.0
        self.acc.begin(adam_preconditioner(self.optimizer))
        loss_sum = torch.zeros((), dtype=torch.float64, device=dev)
        for batch in micro:  # gradient accumulation: each micro-batch is a B_small sample
            with self.autocast:
                loss = self.model(to_device(batch, dev))
            scaled = loss / accum  # the mean over the global batch, as plain accumulation
            (self.scaler.scale(scaled) if self.scaler is not None else scaled).backward()
            self.acc.after_backward()
            loss_sum += loss.detach().double()
        distributed.all_reduce_mean_(self.ctx, self.acc.flats())  # the big batch: all replicas
        norms = self.acc.finish()
        f64 = dict(dtype=torch.float64, device=dev)  # torch.full: a fill kernel, no host copy
        scalars = torch.stack([
            norms.sq_small_sum,
            torch.full((), float(norms.n_small), **f64),
            loss_sum,
            torch.full((), 1.0 if stop_requested else 0.0, **f64),
            norms.sq_big / self.ctx.world_size,  # identical on every replica: the sum restores it
            *((norms.sq_small_pre_sum, norms.sq_big_pre / self.ctx.world_size)
              if norms.sq_big_pre is not None and norms.sq_small_pre_sum is not None else ()),
        ])
        reduced = distributed.all_reduce_sum(self.ctx, scalars).tolist()  # one sync per step
        sq_small_sum, n_small, loss_total, stop_votes, sq_big = reduced[:5]
        pre = reduced[5:]
        # Undo the loss scale and the 1/accum factor: |g_micro|² of the micro-batch mean loss, and
        # |g_big|² of the global-batch mean loss.
        m = Measurement(
            train_loss=loss_total / n_small,
            sq_small=sq_small_sum / n_small * (accum / loss_scale) ** 2,
            sq_big=sq_big / loss_scale**2,
            stop_votes=stop_votes,
            sq_small_pre=pre[0] / n_small * (accum / loss_scale) ** 2 if pre else None,
            sq_big_pre=pre[1] / loss_scale**2 if pre else None,
        )
        if self.scaler is not None:
            self.scaler.unscale_(self.optimizer)  # .grad are views of the flat buffer: in place
        if m.finite and self.grad_clip is not None:
            coef = self.grad_clip / (math.sqrt(m.sq_big) + 1e-6)  # clip_grad_norm_, reusing |g_big|
            if coef < 1.0:
                for flat in self.acc.flats():
                    flat.mul_(coef)
        if self.scaler is not None:
            self.scaler.step(self.optimizer)  # skips the update itself when it saw inf/NaN
            self.scaler.update()
        elif m.finite:
            self.optimizer.step()
        return m
