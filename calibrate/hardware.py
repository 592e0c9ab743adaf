"""What the calibration learns about the machine besides B_simple: its name, the throughput of the
proxy's training step, and (on CUDA) the peak memory of a forward+backward per micro-batch size —
the numbers a plan's cost model can use instead of datasheet guesses."""

from __future__ import annotations

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
