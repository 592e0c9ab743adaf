"""Benchmark of `budgetdsl calibrate`: what measuring B_simple costs, and how fast it converges.

Overhead: the calibration step (calibrate.step.Stepper) against a plain nanoGPT accumulation step on
the same model and batches, alternated step by step so load affects both alike (ratio of medians).
Convergence: B_simple's relative standard error against steps at fixed weights (lr 0), from the
delta method and from disjoint blocks. Run: .venv/bin/python bench/bench_calibrate.py [--quick]
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
from contextlib import nullcontext

import numpy as np
import torch
from budgetdsl.calibrate.data import TokenSampler, stdlib_corpus
from budgetdsl.calibrate.model import GPT, gpt_config
from budgetdsl.calibrate.noise import (
    NoiseScaleTracker,
    successive_difference_covariance,
)
from budgetdsl.calibrate.step import Stepper


def plain_step(model, optimizer, micro, clip):
    """The training step without measurement, as nanoGPT's train.py does it."""
    optimizer.zero_grad(set_to_none=True)
    for batch in micro:
        loss = model(batch) / len(micro)
        loss.backward()
    if clip is not None:
        torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
    optimizer.step()
    return loss.item()


def overhead(model, optimizer, micro_batches, pairs, clip=1.0):
    stepper = Stepper(model, optimizer, torch.device("cpu"), nullcontext(), None, clip)
    plain, calib = [], []
    for i in range(pairs + 2):  # the first two pairs warm up allocator and kernels
        order = (0, 1) if i % 2 == 0 else (1, 0)  # alternate which goes first
        for which in order:
            micro = micro_batches[(2 * i + which) % len(micro_batches)]
            t0 = time.perf_counter()
            if which == 0:
                plain_step(model, optimizer, micro, clip)
            else:
                stepper.step(micro)
            dt = time.perf_counter() - t0
            if i >= 2:
                (plain if which == 0 else calib).append(dt)
    return plain, calib


def rse_curve(tracker_g2, tracker_trace, ns, z=1.0):
    """Relative standard error of B = mean(tr Σ)/mean(|G|²) over the first n steps (delta method
    with the successive-difference covariance), and the empirical spread over disjoint blocks."""
    g2, tr = np.asarray(tracker_g2), np.asarray(tracker_trace)
    rows = []
    for n in ns:
        if n > len(g2):
            break
        G, S = g2[:n].mean(), tr[:n].mean()
        B = S / G
        cov, _ = successive_difference_covariance(np.column_stack([tr[:n], g2[:n]]))
        var = (cov[0, 0] - 2 * B * cov[0, 1] + B * B * cov[1, 1]) / n / G**2  # Var of a ratio of means
        blocks = [tr[k : k + n].mean() / g2[k : k + n].mean() for k in range(0, len(g2) - n + 1, n)]
        emp = statistics.stdev(blocks) / statistics.fmean(blocks) if len(blocks) >= 4 else None
        rows.append((n, B, math.sqrt(max(var, 0.0)) / B, emp, len(blocks)))
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="gpt-nano, few steps: a smoke run")
    ap.add_argument("--model", default=None)
    ap.add_argument("--batch", type=int, default=None)
    ap.add_argument("--micro-batch", type=int, default=None)
    ap.add_argument("--pairs", type=int, default=None, help="alternated plain/calibration step pairs")
    ap.add_argument("--train-steps", type=int, default=None, help="training before the fixed-weight measurement")
    ap.add_argument("--measure-steps", type=int, default=None, help="steps at fixed weights for the RSE curve")
    a = ap.parse_args()
    sys.stdout.reconfigure(line_buffering=True)  # figures appear as they are measured, even in a pipe
    q = a.quick
    model_name = a.model or ("gpt-nano" if q else "gpt-mini")
    batch, micro_batch = a.batch or (16 if q else 64), a.micro_batch or (4 if q else 8)
    pairs = a.pairs or (10 if q else 20)
    train_steps = a.train_steps if a.train_steps is not None else (30 if q else 100)
    measure_steps = a.measure_steps or (60 if q else 200)
    accum = batch // micro_batch

    torch.manual_seed(0)
    corpus = stdlib_corpus(1_000_000 if q else 8_000_000)
    cfg = gpt_config(model_name, vocab_size=corpus.vocab_size)
    model = GPT(cfg)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, betas=(0.9, 0.95))  # the default run's
    sample = TokenSampler(corpus.train, cfg.block_size)
    gen = torch.Generator().manual_seed(0)
    draw = lambda: [sample(micro_batch, gen) for _ in range(accum)]  # noqa: E731

    print(f"bench_calibrate: {model_name} ({model.num_params():,} params), batch {batch} = {accum} x "
          f"micro-batch {micro_batch}, {cfg.block_size} tokens/example, torch {torch.__version__}, "
          f"{torch.get_num_threads()} threads")
    plain, calib = overhead(model, optimizer, [draw() for _ in range(8)], pairs)
    mp, mc = statistics.median(plain), statistics.median(calib)
    print(f"\n1. step time, {pairs} alternated pairs: plain {mp * 1e3:.1f} ms, calibration {mc * 1e3:.1f} ms "
          f"(medians); ratio {mc / mp:.3f}  (aim <= 1.05)")

    stepper = Stepper(model, optimizer, torch.device("cpu"), nullcontext(), None, 1.0)
    for _ in range(train_steps):
        m = stepper.step(draw())
    for group in optimizer.param_groups:
        group["lr"] = 0.0  # fixed weights from here on: every step measures the same B_simple
    tracker = NoiseScaleTracker(beta=1.0)
    for i in range(measure_steps):
        m = stepper.step(draw())
        tracker.update(i, m.sq_small, m.sq_big, micro_batch, batch)
    print(f"\n2. B_simple at fixed weights after {train_steps} training steps (train loss {m.train_loss:.3f}), "
          f"{measure_steps} steps:")
    print(f"   {'steps':>6} {'B_simple':>9} {'RSE (estimator)':>16} {'RSE (blocks)':>13}")
    ns = [n for n in (5, 10, 20, 50, 100, 200, 400, 1000) if n <= measure_steps]
    for n, b, rse, emp, k in rse_curve(tracker.g2, tracker.trace, ns):
        emp_s = f"{emp:.3f} ({k})" if emp is not None else "-"
        print(f"   {n:>6} {b:>9.2f} {rse:>16.3f} {emp_s:>13}")
    print("   RSE falls as 1/sqrt(steps): the relative error of B_simple is about "
          f"{rse_curve(tracker.g2, tracker.trace, [ns[-1]])[0][2] * math.sqrt(ns[-1]):.2f}/sqrt(steps).")


if __name__ == "__main__":
    main()
