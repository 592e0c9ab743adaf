"""A tiny data-parallel training run that the Slurm export test really launches: `srun torchrun`
starts one process per (fake) GPU; they train on the CPU with gloo, reading the plan's numbers
from the BUDGETDSL_* variables the export sets, with gradient accumulation as an explicit inner
loop. Rank 0 writes what it saw to the JSON file named by argv[1].
"""

from __future__ import annotations

import contextlib
import json
import os
import sys

import torch
import torch.distributed as dist
import torch.distributed.nn  # noqa: F401  (before the group exists: see main)
import torch.nn.functional as F


def main(out: str) -> None:
    """Train, then tear the group down once nothing holds it, so that its gloo worker threads are
    joined before the interpreter exits. A thread still alive then aborts the process (SIGABRT,
    "terminate called without an active exception") when it frees a finished collective's tensor,
    which needs the GIL. Two things kept the group alive past destroy_process_group: the DDP
    wrapper (so `train` returns before the group is destroyed) and torch.distributed.nn, which the
    first optimizer imports (through torch._dynamo) and which binds `group.WORLD` as a default
    argument when imported while a group exists (so it is imported above, before any)."""
    dist.init_process_group("gloo")
    try:
        train(out)
    finally:
        dist.destroy_process_group()


def train(out: str) -> None:
    rank, world = dist.get_rank(), dist.get_world_size()
    micro = int(os.environ["BUDGETDSL_MICRO_BATCH"])
    accum = int(os.environ["BUDGETDSL_GRAD_ACCUM"])
    steps = int(os.environ["BUDGETDSL_STEPS"])
    lr = float(os.environ["BUDGETDSL_LR"])
    assert world == int(os.environ["BUDGETDSL_DATA_PARALLEL"]), (world, os.environ["BUDGETDSL_DATA_PARALLEL"])
    assert micro * accum * world == int(os.environ["BUDGETDSL_GLOBAL_BATCH"])

    torch.manual_seed(0)  # the same initial weights on every replica
    model = torch.nn.Linear(4, 1)
    ddp = torch.nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.SGD(ddp.parameters(), lr=lr)
    data = torch.Generator().manual_seed(1 + rank)  # each replica its own shard
    target = torch.tensor([[1.0], [-2.0], [0.5], [3.0]])
    samples = 0
    for _ in range(steps):
        opt.zero_grad(set_to_none=True)
        for i in range(accum):
            x = torch.randn(micro, 4, generator=data)  # (micro, 4)
            sync = contextlib.nullcontext() if i == accum - 1 else ddp.no_sync()
            with sync:
                loss = F.mse_loss(ddp(x), x @ target) / accum
                loss.backward()
            samples += micro
        opt.step()

    weights = [torch.zeros_like(model.weight) for _ in range(world)]
    dist.all_gather(weights, model.weight.detach())
    assert all(torch.equal(weights[0], w) for w in weights), "replicas diverged"
    total = torch.tensor([samples])
    dist.all_reduce(total)
    if rank == 0:
        with open(out, "w") as f:
            json.dump({"world_size": world, "steps": steps, "samples": int(total),
                       "local_world_size": int(os.environ["LOCAL_WORLD_SIZE"]),
                       "slurm_job_id": os.environ.get("SLURM_JOB_ID"),
                       "run_name": os.environ["BUDGETDSL_RUN_NAME"]}, f)


if __name__ == "__main__":
    main(sys.argv[1])
