"""The share of peak a GPU's GEMMs reach at the shapes training runs them (not a test): for issue
24's item 6, kernel efficiency as a function of the GEMM shapes, fitted to chip measurements
rather than to end-to-end runs. `python bench/gemm_sweep.py [--device cuda] [--out FILE.csv]`.

The shapes are the layers' own: each model's matmuls in forward order (`flops.layer_matmuls`),
sharded as Megatron and torchtitan shard them under tensor parallelism t (the column-parallel
projections' outputs ÷ t, the output and down projections' inputs ÷ t), at M tokens a
micro-batch, and each as the training step runs it: the forward (M×K)·(K×N), the backward's input
gradient (M×N)·(N×K) and weight gradient (K×M)·(M×N). Timed with CUDA events (median of
`--repeats` after warm-up); on CPU with the wall clock (the numbers then mean nothing for a GPU:
the CPU path exists so the script can be tested anywhere). Efficiency is against the preset's
dense bf16 peak (`hardware.gpus`, found from the device name, or `--peak`).

Prepared for the device machine (bench/device_check.sh step 4): its CSV puts the measured share of
peak beside the one the preset's GEMM-shape curve predicts (`hardware.gemm_curves`, fitted to
OpenXLA's tables), at the shapes training runs, M up to 32k tokens where the tables stop at 16k.
"""

from __future__ import annotations

import argparse
import csv
import statistics
import sys
import time
from dataclasses import dataclass

# Model shapes whose layers are swept: Llama 3 8B and 70B (GQA, SwiGLU), GPT-3 175B (MHA, GeLU).
MODELS = {
    "llama3-8b": dict(d_model=4096, heads=32, kv_heads=8, ffn_hidden=14336, mlp="swiglu"),
    "llama3-70b": dict(d_model=8192, heads=64, kv_heads=8, ffn_hidden=28672, mlp="swiglu"),
    "gpt3-175b": dict(d_model=12288, heads=96, kv_heads=None, ffn_hidden=4 * 12288, mlp="gelu"),
}
TENSOR_PARALLEL = (1, 2, 4, 8)
TOKENS = (2048, 8192, 32768)  # M: tokens a micro-batch (a sequence of 2k-32k, or several)
QUICK = ("llama3-8b", (1, 8), (128,))  # --quick: one model, two degrees, a few tokens (a smoke run)


@dataclass(frozen=True)
class Gemm:
    """One timed GEMM: (M×K)·(K×N), with where it comes from."""

    model: str
    tensor_parallel: int
    matmul: int  # its place in the layer's forward order (`flops.layer_matmuls`)
    kind: str  # fwd | dgrad | wgrad
    m: int
    n: int
    k: int


def layer_gemms(model: str, shape: dict, t: int, tokens: int) -> list[Gemm]:
    """The training step's GEMMs of one layer of `shape` on one GPU at tensor parallelism t, each
    projection its own GEMM as torchtitan runs them (`gemm_shape.sharded_matmuls`, unfused)."""
    from budgetdsl.cost.gemm_shape import sharded_matmuls

    matmuls = sharded_matmuls(shape["d_model"], shape["heads"], shape["kv_heads"], shape["ffn_hidden"],
                              shape["mlp"], t, fused=False)
    out = []
    for i, (k_in, n_out) in enumerate(matmuls):
        k, n = int(k_in), int(n_out)
        out += [Gemm(model, t, i, "fwd", tokens, n, k), Gemm(model, t, i, "dgrad", tokens, k, n),
                Gemm(model, t, i, "wgrad", k, n, tokens)]
    return out


def sweep_shapes(models: dict, tps: tuple[int, ...], tokens: tuple[int, ...]) -> list[Gemm]:
    """Every distinct GEMM of the sweep (a shape met twice is timed once)."""
    seen, out = set(), []
    for model, shape in models.items():
        for t in tps:
            for m in tokens:
                for g in layer_gemms(model, shape, t, m):
                    if (g.m, g.n, g.k) not in seen:
                        seen.add((g.m, g.n, g.k))
                        out.append(g)
    return out


def time_gemm(torch, g: Gemm, device: str, dtype, repeats: int) -> float:
    """Median seconds of one (M×K)·(K×N) on `device`."""
    a = torch.randn(g.m, g.k, device=device, dtype=dtype)
    b = torch.randn(g.k, g.n, device=device, dtype=dtype)
    for _ in range(3):  # warm-up: the library picks its kernel
        torch.matmul(a, b)
    times = []
    for _ in range(repeats):
        if device == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            torch.matmul(a, b)
            end.record()
            torch.cuda.synchronize()
            times.append(start.elapsed_time(end) / 1e3)
        else:
            t0 = time.perf_counter()
            torch.matmul(a, b)
            times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default=None, help="cuda (default where there is one) or cpu")
    ap.add_argument("--out", default="gemm-sweep.csv")
    ap.add_argument("--gpu", default=None, help="the preset whose bf16 peak the efficiency is against (default: the "
                    "first whose family the device's name holds, `calibration_hardware.same_part`)")
    ap.add_argument("--peak", type=float, default=None, help="peak FLOP/s, instead of a preset's")
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--quick", action="store_true", help="one model, t 1 and 8, 128 tokens (a smoke run)")
    args = ap.parse_args(argv)
    import torch

    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    from budgetdsl.hardware.calibration_hardware import same_part
    from budgetdsl.hardware.gpus import PRESETS, find_preset

    name = torch.cuda.get_device_name() if device == "cuda" else "cpu"
    preset = find_preset(args.gpu) if args.gpu else next(
        (p for p in PRESETS.values() if device == "cuda" and same_part(name, p.name)), None)
    if args.gpu and preset is None:
        print(f"gemm_sweep: unknown preset {args.gpu!r}", file=sys.stderr)
        return 2
    peak = args.peak or (preset.peak_flops if preset is not None else None)
    curve = preset.gemm if preset is not None else None  # the fitted share of peak beside the measured one
    print(f"efficiency against {'--peak' if args.peak else preset.name if preset else 'nothing (no preset)'}")
    quick, quick_tps, quick_tokens = QUICK
    models = {quick: MODELS[quick]} if args.quick else MODELS
    gemms = sweep_shapes(models, quick_tps if args.quick else TENSOR_PARALLEL, quick_tokens if args.quick else TOKENS)
    with open(args.out, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["device", "model", "tensor_parallel", "matmul", "kind", "m", "n", "k", "seconds", "tflops",
                    "efficiency", "curve"])
        for g in gemms:
            s = time_gemm(torch, g, device, dtype, args.repeats)
            flops = 2.0 * g.m * g.n * g.k
            w.writerow([name, g.model, g.tensor_parallel, g.matmul, g.kind, g.m, g.n, g.k, f"{s:.6g}",
                        f"{flops / s / 1e12:.4g}", f"{flops / s / peak:.4g}" if peak else "",
                        f"{curve.relative(g.m, g.n, g.k) / curve.c_inf:.4g}" if curve else ""])
    print(f"{len(gemms)} GEMMs on {name} ({dtype}) -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
