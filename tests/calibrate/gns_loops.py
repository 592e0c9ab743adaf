"""Plain PyTorch training loops with budgetdsl.calibrate.gns attached, for the integration tests
and bench/bench_gns_overhead.py. Run as a script under torchrun for the DDP case:

    python -m torch.distributed.run --nproc-per-node 2 tests/calibrate/gns_loops.py OUT [--steps N]

Every replica draws the whole global batch's micro-batches in one global order and keeps its own
slice (as `budgetdsl calibrate` does), so a 2-process run sees the data of a 1-process run.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from pathlib import Path

import torch
import torch.distributed as dist

sys.path.insert(0, str(Path(__file__).parent))
import linreg_proxy  # noqa: E402
from budgetdsl.calibrate.gns import GradientNoiseScale  # noqa: E402


def _to(batch, device):
    return tuple(t.to(device) for t in batch)


def linreg_loop(out: Path | None, *, steps: int = 200, batch: int = 64, micro: int = 4, seed: int = 3,
                lr: float = 0.0, measure: bool = True, ddp: bool = False, device: str = "cpu",
                examples: int | None = None, model=None, ema_beta: float | None = None):
    """The linear-regression proxy trained at `lr` (0: fixed weights, the closed form holds at every
    step). Returns the calibration (None when not measuring).

    examples: a finite training set of that many examples, iterated epoch after epoch in micro-batches
    of `micro`; the optimizer steps every `batch / micro` micro-batches and at each epoch's end (on
    the leftover ones), as the Hugging Face and Lightning trainers do. model: another module of the
    same problem (e.g. linreg_proxy.CheckpointedLinearRegression)."""
    rank, world = (dist.get_rank(), dist.get_world_size()) if ddp else (0, 1)
    torch.manual_seed(seed)
    model = (model or linreg_proxy.make_model()).to(device)
    sampler = linreg_proxy.make_data("train")
    gen = torch.Generator().manual_seed(seed)
    accum = batch // (micro * world)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.95), weight_decay=0.0)
    gns = (GradientNoiseScale(model, opt, micro_batch=micro, accumulation=accum, world_size=world,
                              ema_beta=ema_beta, point_every=50) if measure else None)
    ids = [torch.device(device).index or 0] if device.startswith("cuda") else None
    net = torch.nn.parallel.DistributedDataParallel(model, device_ids=ids) if ddp else model
    for draws in _step_draws(sampler, gen, steps, micro, accum * world, examples):
        mine = draws[rank * len(draws) // world:(rank + 1) * len(draws) // world]
        for i, mb in enumerate(mine):
            sync = contextlib.nullcontext() if not ddp or i == len(mine) - 1 else net.no_sync()
            with sync:
                loss = net(_to(mb, device)) / accum  # a short step's losses too: the usual loop
                loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    if gns is None:
        return None
    if out is None:
        return gns.calibration(seed=seed)
    return gns.write(out, seed=seed, model_name="linreg_proxy", data="linreg_proxy gaussian")


def _step_draws(sampler, gen, steps: int, micro: int, per_step: int, examples: int | None):
    """The micro-batches of each optimizer step: fresh draws, or epochs over a finite set (a step
    ends every `per_step` micro-batches and at the end of the epoch)."""
    if examples is None:
        for _ in range(steps):
            yield [sampler(micro, gen) for _ in range(per_step)]
        return
    x, y = sampler(examples, gen)
    done = 0
    while True:
        order = torch.randperm(examples, generator=gen)
        batches = [(x[idx], y[idx]) for idx in order.split(micro)]
        for k in range(0, len(batches), per_step):
            if done == steps:
                return
            yield batches[k:k + per_step]
            done += 1


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("out", type=Path)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--device", default="cpu", help="cpu (gloo) or cuda (nccl, one GPU per process)")
    args = ap.parse_args()
    ddp = int(os.environ.get("WORLD_SIZE", "1")) > 1
    device = args.device
    if device == "cuda":
        device = f"cuda:{int(os.environ.get('LOCAL_RANK', '0'))}"
        torch.cuda.set_device(device)
    if ddp:
        dist.init_process_group("nccl" if device.startswith("cuda") else "gloo")
    try:
        cal = linreg_loop(args.out, steps=args.steps, ddp=ddp, device=device)
        if not ddp or dist.get_rank() == 0:
            lo, hi = cal.summary.ci_low, cal.summary.ci_high
            print(f"B_simple {cal.summary.b_simple:.4g} [{lo:.4g}, {hi:.4g}] examples; closed form "
                  f"{linreg_proxy.truth()[2]:g}; {cal.provenance.batch.world_size} replica(s) on {device}")
    finally:
        if ddp:
            dist.destroy_process_group()


if __name__ == "__main__":
    main()
