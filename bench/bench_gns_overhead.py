"""Benchmark of budgetdsl.calibrate.gns: what recording B_simple costs a training step, in a plain
PyTorch loop and in the Hugging Face and Lightning integrations.

plain: one nanoGPT step on two copies of a model (same weights, same pre-drawn micro-batches), one
with GradientNoiseScale attached, alternated step by step (and which goes first) so load falls on
both alike: the median paired ratio with a bootstrap 95% interval, and the time inside the
recorder's own code. hf, lightning: the framework's own Trainer on a model of the same shape, with
and without the callback, in alternated rounds of a few steps from the same weights: the median of
the rounds' ratios. The CPU allocator is held steady (`STEADY`) unless --allocator default.
Run: .venv/bin/python bench/bench_gns_overhead.py [--integration plain|hf|lightning|all] [--quick]
"""

from __future__ import annotations

import argparse
import copy
import logging
import os
import platform
import random
import resource
import statistics
import sys
import tempfile
import time
import warnings

import torch
from budgetdsl.calibrate.data import TokenSampler, stdlib_corpus
from budgetdsl.calibrate.gns import GradientNoiseScale
from budgetdsl.calibrate.model import GPT, gpt_config

# glibc's malloc gives the top of its heap back to the kernel whenever more than a moving threshold
# is free there, so a CPU step that frees its activations page-faults them in again on the next
# forward: thousands of faults a step, a count that moves with any other allocation (the recorder's
# small tensors among them) and swamps a 1 % effect. Fixed thresholds keep the heap, as jemalloc and
# tcmalloc do (PyTorch's CPU performance guide recommends them for training) and as the CUDA caching
# allocator does on a GPU. glibc reads it at process start: the benchmark re-executes itself.
STEADY = "glibc.malloc.trim_threshold=1073741824:glibc.malloc.mmap_threshold=33554432"


class TimedGNS(GradientNoiseScale):
    """The recorder with a stopwatch around each of its entry points (bench only)."""

    def _timed(self, name, method, *args):
        t0 = time.perf_counter()
        try:
            return method(*args)
        finally:
            self.seconds[name] = self.seconds.get(name, 0.0) + time.perf_counter() - t0

    def _on_grad(self, i, grad):
        return self._timed("gradient hooks", super()._on_grad, i, grad)

    def _after_sync(self, task):
        return self._timed("end of backward", super()._after_sync, task)

    def _on_forward_pre(self, module, args, kwargs):
        return self._timed("forward hooks", super()._on_forward_pre, module, args, kwargs)

    def _on_forward(self, module, args, output):
        return self._timed("forward hooks", super()._on_forward, module, args, output)

    def end_step(self):
        return self._timed("end of step", super().end_step)

    def flush(self):
        return self._timed("flush", super().flush)


def faults() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


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


def report(name: str, plain: list[float], with_gns: list[float], ratios: list[float], unit: str) -> None:
    lo, hi = median_interval(ratios)
    print(f"  {name}: step without {statistics.median(plain) * 1e3:.1f} ms, with the recorder "
          f"{statistics.median(with_gns) * 1e3:.1f} ms (medians)")
    print(f"  {name}: ratio {statistics.median(ratios):.3f}, median of {len(ratios)} {unit} (bootstrap 95% "
          f"interval {lo:.3f} to {hi:.3f}); ratio of medians "
          f"{statistics.median(with_gns) / statistics.median(plain):.3f}; aim <= 1.03")


def plain_loop(args, corpus, cfg) -> None:
    """The two loops alternated step by step in one process."""
    device = torch.device(args.device)
    torch.manual_seed(0)
    plain = GPT(cfg).to(device)
    measured = copy.deepcopy(plain)
    accum = args.batch // args.micro_batch
    sampler, gen = TokenSampler(corpus.train, cfg.block_size), torch.Generator().manual_seed(0)
    micro = [[sampler(args.micro_batch, gen).to(device) for _ in range(accum)] for _ in range(8)]
    opts = [torch.optim.AdamW(m.parameters(), lr=1e-3, betas=(0.9, 0.95)) for m in (plain, measured)]
    gns = TimedGNS(measured, opts[1], micro_batch=args.micro_batch, accumulation=accum,
                   tokens_per_example=cfg.block_size)
    gns.seconds = {}
    if args.control:
        gns.close()
    times: tuple[list[float], list[float]] = ([], [])
    faulted = [0, 0]
    for i in range(args.pairs + 2):  # two warm-up pairs
        for which in ((0, 1) if i % 2 == 0 else (1, 0)):
            model = (plain, measured)[which]
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            f0, t0 = faults(), time.perf_counter()
            train_step(model, opts[which], micro[i % len(micro)], clip=1.0)
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            if i >= 2:
                times[which].append(time.perf_counter() - t0)
                faulted[which] += faults() - f0
    print(f"plain loop: {args.model} ({sum(p.numel() for p in plain.parameters()):,} params in "
          f"{len(gns.params)} tensors), batch {args.batch} = {accum} x {args.micro_batch} sequences of "
          f"{cfg.block_size} tokens, {device}, {args.pairs} steps each")
    report("plain loop", times[0], times[1], [b / a for a, b in zip(*times)], "paired steps")
    per_step = statistics.median(times[0])
    inside = sum(gns.seconds.values()) / (args.pairs + 2)  # per step, warm-up included
    print(f"  plain loop: inside the recorder {inside * 1e3:.2f} ms per step = {inside / per_step:.2%} of the "
          f"plain step; page faults per step {faulted[0] / args.pairs:.0f} without, {faulted[1] / args.pairs:.0f} with")
    print("  plain loop: of which " + ", ".join(f"{name} {t / (args.pairs + 2) * 1e3:.2f} ms"
                                               for name, t in sorted(gns.seconds.items(), key=lambda kv: -kv[1])))
    if args.control:
        print("  (control: the recorder was detached; the ratio shows the noise floor)")


def framework_rounds(args, corpus, cfg, run) -> None:
    """`run(windows, with_gns, steps)` trains from seed 0 and returns its step times; rounds alternate
    which goes first. Each round's ratio is of the medians of its steps after two warm-up steps."""
    sampler, gen = TokenSampler(corpus.train, cfg.block_size), torch.Generator().manual_seed(0)
    steps = args.steps + 2
    windows = sampler(args.batch * steps, gen)
    plain: list[float] = []
    with_gns: list[float] = []
    ratios = []
    for r in range(args.rounds):
        got = {}
        for flag in ((False, True) if r % 2 == 0 else (True, False)):
            got[flag] = run(windows, flag, steps)[2:]
        plain += got[False]
        with_gns += got[True]
        ratios.append(statistics.median(got[True]) / statistics.median(got[False]))
    report(args.integration_name, plain, with_gns, ratios, "rounds")


def hf_run(args, cfg):
    import transformers
    from budgetdsl.calibrate.gns_hf import GradientNoiseScaleCallback

    transformers.logging.set_verbosity_error()

    class Clock(transformers.TrainerCallback):
        def __init__(self):
            self.marks: list[float] = []

        def on_step_end(self, *a, **k):
            self.marks.append(time.perf_counter())

    class Windows(torch.utils.data.Dataset):
        def __init__(self, w):
            self.w = w

        def __len__(self):
            return len(self.w)

        def __getitem__(self, i):
            return {"input_ids": self.w[i, :-1], "labels": self.w[i, :-1]}

    def run(windows, with_gns, steps):
        torch.manual_seed(0)
        config = transformers.GPT2Config(vocab_size=cfg.vocab_size, n_positions=cfg.block_size, n_embd=cfg.n_embd,
                                         n_layer=cfg.n_layer, n_head=cfg.n_head)
        model = transformers.GPT2LMHeadModel(config)
        clock = Clock()
        callbacks = [clock]
        if with_gns:
            callbacks.append(GradientNoiseScaleCallback(os.path.join(args.tmp, "hf.json"), data="stdlib"))
        targs = transformers.TrainingArguments(
            output_dir=os.path.join(args.tmp, "hf"), per_device_train_batch_size=args.micro_batch,
            gradient_accumulation_steps=args.batch // args.micro_batch, max_steps=steps, learning_rate=1e-3,
            max_grad_norm=1.0, logging_steps=1, save_strategy="no", report_to=[], disable_tqdm=True,
            use_cpu=True, dataloader_num_workers=0, seed=0)
        trainer = transformers.Trainer(model=model, args=targs, train_dataset=Windows(windows), callbacks=callbacks)
        trainer.remove_callback(transformers.PrinterCallback)  # disable_tqdm prints each log instead
        trainer.train()
        return [b - a for a, b in zip(clock.marks, clock.marks[1:])]

    return run


def lightning_run(args, cfg):
    import lightning as L
    from budgetdsl.calibrate.gns_lightning import GradientNoiseScaleCallback

    for name in ("lightning.pytorch", "lightning.fabric"):
        logging.getLogger(name).setLevel(logging.ERROR)

    class Clock(L.Callback):
        def __init__(self):
            self.marks: list[float] = []

        def on_before_zero_grad(self, trainer, pl_module, optimizer):
            self.marks.append(time.perf_counter())

    class Proxy(L.LightningModule):
        def __init__(self):
            super().__init__()
            self.model = GPT(cfg)

        def training_step(self, batch, batch_idx):
            return self.model(batch)

        def configure_optimizers(self):
            return torch.optim.AdamW(self.parameters(), lr=1e-3, betas=(0.9, 0.95))

    def run(windows, with_gns, steps):
        torch.manual_seed(0)
        module, clock = Proxy(), Clock()
        callbacks = [clock]
        if with_gns:
            callbacks.append(GradientNoiseScaleCallback(os.path.join(args.tmp, "pl.json"), data="stdlib",
                                                        tokens_per_example=cfg.block_size))
        trainer = L.Trainer(accelerator="cpu", devices=1, max_steps=steps, gradient_clip_val=1.0,
                            accumulate_grad_batches=args.batch // args.micro_batch, callbacks=callbacks,
                            logger=False, enable_progress_bar=False, enable_checkpointing=False,
                            enable_model_summary=False, default_root_dir=args.tmp)
        loader = torch.utils.data.DataLoader(windows, batch_size=args.micro_batch, shuffle=False)
        trainer.fit(module, loader)
        return [b - a for a, b in zip(clock.marks, clock.marks[1:])]

    return run


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--integration", choices=["plain", "hf", "lightning", "all"], default="plain")
    ap.add_argument("--model", default="gpt-mini")
    ap.add_argument("--batch", type=int, default=64, help="global batch, sequences")
    ap.add_argument("--micro-batch", type=int, default=8)
    ap.add_argument("--pairs", type=int, default=None, help="plain: measured steps of each loop (default 40)")
    ap.add_argument("--rounds", type=int, default=8, help="hf, lightning: rounds of each (default 8)")
    ap.add_argument("--steps", type=int, default=8, help="hf, lightning: measured steps a round (default 8)")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--threads", type=int, default=1, help="torch CPU threads (default 1)")
    ap.add_argument("--allocator", choices=["steady", "default"], default="steady",
                    help="steady: fixed glibc heap thresholds (STEADY); default: glibc's moving ones")
    ap.add_argument("--quick", action="store_true", help="gpt-nano, 16 of 4, 20 pairs, 4 rounds of 4")
    ap.add_argument("--control", action="store_true",
                    help="plain: an A/A control, the recorder detached (the noise floor)")
    args = ap.parse_args(argv)
    if (args.allocator == "steady" and platform.system() == "Linux" and platform.libc_ver()[0] == "glibc"
            and os.environ.get("GLIBC_TUNABLES") != STEADY):
        sys.stdout.flush()
        os.execve(sys.executable, [sys.executable, *sys.argv], {**os.environ, "GLIBC_TUNABLES": STEADY})
    if args.quick:
        args.model, args.batch, args.micro_batch = "gpt-nano", 16, 4
        args.pairs, args.rounds, args.steps = args.pairs or 20, 4, 4
    args.pairs = args.pairs or 40
    torch.set_num_threads(args.threads)
    warnings.filterwarnings("ignore")  # the frameworks' advice on workers and loggers, each round
    corpus = stdlib_corpus(2_000_000)
    cfg = gpt_config(args.model, vocab_size=corpus.vocab_size)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} thread(s), allocator "
          f"{'GLIBC_TUNABLES=' + os.environ['GLIBC_TUNABLES'] if 'GLIBC_TUNABLES' in os.environ else 'default'}")
    names = ["plain", "hf", "lightning"] if args.integration == "all" else [args.integration]
    with tempfile.TemporaryDirectory() as tmp:
        args.tmp = tmp
        for name in names:
            args.integration_name = name
            if name == "plain":
                plain_loop(args, corpus, cfg)
            else:
                print(f"{name}: {args.model}-shaped model, batch {args.batch} = {args.batch // args.micro_batch} x "
                      f"{args.micro_batch}, {args.rounds} rounds of {args.steps} steps after 2 warm-up steps")
                framework_rounds(args, corpus, cfg, (hf_run if name == "hf" else lightning_run)(args, cfg))
    return 0


if __name__ == "__main__":
    sys.exit(main())
