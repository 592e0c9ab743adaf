"""torch.distributed for calibration: under torchrun each replica accumulates its own micro-batches,
the all-reduced gradient is the big batch, and the replicas' squared micro-batch norms travel as
scalars. Without torchrun's environment everything here is a no-op for a single process.

We all-reduce the flat gradient buffer ourselves instead of wrapping the model in DDP: the
estimator needs the per-replica gradients before the reduction, and one call on one buffer is
what DDP's buckets amount to when nothing overlaps (a calibration run measures, it does not race).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch
import torch.distributed as dist


@dataclass(frozen=True)
class DistContext:
    rank: int = 0
    world_size: int = 1
    local_rank: int = 0

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def active(self) -> bool:
        return self.world_size > 1


def launched_by_torchrun() -> bool:
    return "RANK" in os.environ and "WORLD_SIZE" in os.environ and int(os.environ["WORLD_SIZE"]) > 1


def init(device_type: str) -> DistContext:
    """Join the process group torchrun describes (gloo on CPU, nccl on CUDA)."""
    if not launched_by_torchrun():
        return DistContext()
    if not dist.is_initialized():
        # torch.distributed.nn binds `group.WORLD` as a default argument when first imported (the
        # first optimizer imports it, through torch._dynamo): imported after the group exists, it
        # keeps the group past destroy_process_group, and a gloo worker thread still alive at
        # interpreter exit aborts the process (SIGABRT) when it frees a finished collective's tensor.
        import torch.distributed.nn  # noqa: F401
        dist.init_process_group(backend="nccl" if device_type == "cuda" else "gloo")
    ctx = DistContext(dist.get_rank(), dist.get_world_size(), int(os.environ.get("LOCAL_RANK", 0)))
    if device_type == "cuda":
        torch.cuda.set_device(ctx.local_rank)
    return ctx


def shutdown(ctx: DistContext) -> None:
    if ctx.active and dist.is_initialized():
        dist.destroy_process_group()


def all_reduce_mean_(ctx: DistContext, tensors: list[torch.Tensor]) -> None:
    """Average gradient buffers over the replicas, in place."""
    if not ctx.active:
        return
    for t in tensors:
        dist.all_reduce(t, op=dist.ReduceOp.SUM)
        t.div_(ctx.world_size)


def all_reduce_sum(ctx: DistContext, values: torch.Tensor) -> torch.Tensor:
    """Sum a small vector of scalars (squared norms, counts, losses) over the replicas."""
    if ctx.active:
        values = values.clone()
        dist.all_reduce(values, op=dist.ReduceOp.SUM)
    return values
