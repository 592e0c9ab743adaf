"""Benchmark of budgetdsl.calibrate.gns: what recording B_simple inside a training loop costs.

One plain nanoGPT step on two copies of a model (same weights, same pre-drawn micro-batches), one
with GradientNoiseScale attached, alternated step by step (and which goes first) so load falls on
both alike. Prints the median paired ratio (steadier than a ratio of medians on a shared machine)
with a bootstrap 95% interval, the ratio of medians, and the time inside the recorder's own code.
Run: .venv/bin/python bench/bench_gns_overhead.py [--quick] [--device cuda] [--control]
"""

from __future__ import annotations

import argparse
import copy
import random
import statistics
import sys
import time

import torch
from budgetdsl.calibrate.data import TokenSampler, stdlib_corpus
from budgetdsl.calibrate.gns import GradientNoiseScale
from budgetdsl.calibrate.model import GPT, gpt_config


class TimedGNS(GradientNoiseScale):
    """The recorder with a stopwatch around each of its entry points (bench only)."""

    seconds = 0.0

    def _timed(self, method, *args):
        t0 = time.perf_counter()
        try:
            return method(*args)
        finally:
            self.seconds += time.perf_counter() - t0

    def _on_grad(self, i, grad):
        return self._timed(super()._on_grad, i, grad)

    def _after_sync(self, task):
        return self._timed(super()._after_sync, task)

    def end_step(self):
        return self._timed(super().end_step)

    def flush(self):
        return self._timed(super().flush)


def train_step(model, optimizer, micro, clip: float) -> float:
    """nanoGPT's step: accumulate, clip, update, read the loss for the log."""
    optimizer.zero_grad(set_to_none=True)
    for batch in micro:
        loss = model(batch) / len(micro)
        loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
    optimizer.step()
    return loss.item()


def median_interval(xs: list[float], n: int = 2000, seed: int = 0) -> tuple[float, float]:
    """Bootstrap 95% interval of the median of xs."""
    rng = random.Random(seed)
    ms = sorted(statistics.median(rng.choices(xs, k=len(xs))) for _ in range(n))
    return ms[int(0.025 * n)], ms[int(0.975 * n) - 1]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="gpt-mini")
    ap.add_argument("--batch", type=int, default=64, help="global batch, sequences")
    ap.add_argument("--micro-batch", type=int, default=8)
    ap.add_argument("--pairs", type=int, default=None, help="measured steps of each loop (default 40)")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's)")
    ap.add_argument("--quick", action="store_true", help="gpt-nano, 16 of 4, 20 pairs")
    ap.add_argument("--control", action="store_true",
                    help="an A/A control: the recorder is detached, both loops are plain (the noise floor)")
    args = ap.parse_args(argv)
    if args.quick:
        args.model, args.batch, args.micro_batch = "gpt-nano", 16, 4
        args.pairs = args.pairs or 20
    args.pairs = args.pairs or 40
    device = torch.device(args.device)
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    corpus = stdlib_corpus(2_000_000)
    cfg = gpt_config(args.model, vocab_size=corpus.vocab_size)
    plain = GPT(cfg).to(device)
    measured = copy.deepcopy(plain)
    accum = args.batch // args.micro_batch
    sampler, gen = TokenSampler(corpus.train, cfg.block_size), torch.Generator().manual_seed(0)
    micro = [[sampler(args.micro_batch, gen).to(device) for _ in range(accum)] for _ in range(8)]
    opts = [torch.optim.AdamW(m.parameters(), lr=1e-3, betas=(0.9, 0.95)) for m in (plain, measured)]
    gns = TimedGNS(measured, opts[1], micro_batch=args.micro_batch, accumulation=accum,
                   tokens_per_example=cfg.block_size)
    if args.control:
        gns.close()
    times: tuple[list[float], list[float]] = ([], [])
    for i in range(args.pairs + 2):  # two warm-up pairs
        for which in ((0, 1) if i % 2 == 0 else (1, 0)):
            model = (plain, measured)[which]
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            t0 = time.perf_counter()
            train_step(model, opts[which], micro[i % len(micro)], clip=1.0)
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            if i >= 2:
                times[which].append(time.perf_counter() - t0)
    med_plain, med_gns = statistics.median(times[0]), statistics.median(times[1])
    paired = [b / a for a, b in zip(*times)]
    ratio = statistics.median(paired)
    lo, hi = median_interval(paired)
    inside = gns.seconds / (args.pairs + 2)  # per step, warm-up included (the stopwatch ran throughout)
    cal = None if args.control else gns.calibration(model_name=args.model, data="stdlib")
    n_tensors = len(gns.params)
    print(f"{args.model} ({sum(p.numel() for p in plain.parameters()):,} params in {n_tensors} tensors), "
          f"batch {args.batch} = {accum} x {args.micro_batch} sequences of {cfg.block_size} tokens, "
          f"{device}, {torch.get_num_threads()} threads, {args.pairs} steps each")
    print(f"  step without GNS  {med_plain * 1e3:8.1f} ms (median)")
    print(f"  step with GNS     {med_gns * 1e3:8.1f} ms (median)")
    print(f"  ratio             {ratio:8.3f}  paired median (bootstrap 95% interval {lo:.3f} to {hi:.3f}); "
          f"ratio of medians {med_gns / med_plain:.3f}; aim <= 1.03")
    print(f"  inside the recorder {inside * 1e3:8.2f} ms per step = {inside / med_plain:.2%} of the plain step")
    if cal is None:
        print("  (control: the recorder was detached; the ratio shows the noise floor)")
        return 0
    print(f"  measured {cal.summary.steps_measured} steps, B_simple {cal.summary.b_simple:.3g} examples")
    return 0


if __name__ == "__main__":
    sys.exit(main())
