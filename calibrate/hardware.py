"""What the calibration learns about the machine besides B_simple: its name, the throughput of the
proxy's training step, and (on CUDA) the peak memory of a forward+backward per micro-batch size —
the numbers a plan's cost model can use instead of datasheet guesses."""

from __future__ import annotations

import os
import platform
import statistics
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch


def resolve_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise ValueError("--device cuda, but torch sees no CUDA device (use --device cpu or auto)")
    return torch.device(name)


def resolve_amp(name: str, device: torch.device) -> str:
    """auto: bf16 on a CUDA device that supports it (no loss scaling needed), else none. fp16
    (with a GradScaler) also runs on CPU — slowly, but it exercises the loss-scale path anywhere."""
    if name == "auto":
        return "bf16" if device.type == "cuda" and torch.cuda.is_bf16_supported() else "none"
    return name


def device_name(device: torch.device) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


class StepTimer:
    """Wall time of optimizer steps (evaluation excluded). Throughput comes from the median step,
    which ignores the first steps' warm-up (allocator, kernel selection) without a cut-off."""

    def __init__(self) -> None:
        self.times: list[float] = []
        self.examples = 0
        self.total = 0.0

    def add(self, seconds: float, examples: int) -> None:
        self.times.append(seconds)
        self.total += seconds
        self.examples += examples

    def profile(self, tokens_per_example: int) -> dict[str, Any]:
        if not self.times:
            return {}
        median = statistics.median(self.times)
        eps = self.examples / len(self.times) / median if median > 0 else None
        return {
            "step_time_s": median,
            "examples_per_s": eps,
            "tokens_per_s": eps * tokens_per_example if eps is not None else None,
        }


def cuda_memory_profile(
    model: torch.nn.Module, forward_backward: Callable[[int], None], micro_batch: int, device: torch.device
) -> list[dict[str, int]]:
    """Peak allocated memory of one forward+backward at micro-batch 1, 2, 4, ... up to the run's
    micro-batch (and it). Gradients are dropped afterwards; CPU returns []."""
    if device.type != "cuda":
        return []
    sizes = sorted({min(2**i, micro_batch) for i in range(micro_batch.bit_length() + 1)})
    out = []
    for n in sizes:
        for p in model.parameters():
            p.grad = None
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
        forward_backward(n)
        torch.cuda.synchronize(device)
        out.append({"micro_batch_examples": n, "peak_bytes": int(torch.cuda.max_memory_allocated(device))})
    for p in model.parameters():
        p.grad = None
    return out


# A micro-batch is run at a context only where its activations take at most this share of the free
# memory: the weights, gradients, optimizer state and the allocator's slack need the rest.
FREE_FRACTION = 0.5


def free_memory(device: torch.device) -> int:
    """Bytes free on `device`: CUDA's own count, or the host's available physical memory."""
    if device.type == "cuda":
        return int(torch.cuda.mem_get_info(device)[0])
    return int(os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))


def micro_batch_bytes(n_layer: int, n_embd: int, n_head: int, vocab: int, context: int, micro_batch: int) -> float:
    """Activation bytes of one forward+backward of a GPT proxy micro-batch: Korthikanti et al.
    (2022) per layer with the attention scores kept (budgetdsl.cost.memory, 16-bit) doubled for
    fp32, plus the fp32 logits and their gradient."""
    from budgetdsl.cost.memory import activation_bytes_per_layer

    per_layer = activation_bytes_per_layer(context, n_embd, n_head, "none", False)
    assert per_layer is not None  # the heads are known
    return micro_batch * (2.0 * n_layer * per_layer + 2 * 4.0 * context * vocab)


def context_that_fits(n_layer: int, n_embd: int, n_head: int, vocab: int, seq_len: int, micro_batch: int,
                      free: int) -> tuple[int, float]:
    """The context to calibrate a plan of `seq_len` at: seq_len itself where one micro-batch fits in
    FREE_FRACTION of `free` bytes, else the longest seq_len/2^k that does; with the bytes one
    micro-batch at seq_len would need."""
    def need(context: int) -> float:
        return micro_batch_bytes(n_layer, n_embd, n_head, vocab, context, micro_batch)

    context = seq_len
    while context > 1 and need(context) > FREE_FRACTION * free:
        context //= 2
    return context, need(seq_len)
