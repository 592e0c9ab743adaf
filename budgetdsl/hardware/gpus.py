"""Accelerator presets: peak dense 16-bit matrix throughput, memory and bandwidths, from datasheets.

Peaks are dense (no 2:4 sparsity) bf16 tensor-core rates (V100: fp16); `fp8_peak_flops` the dense
FP8 rate of the parts `hardware.precision: fp8` runs on (Hopper and Blackwell: the datasheets quote
FP8 and BF16 "with sparsity", twice the dense figure). Memory is what the
framework sees: NVIDIA's "80GB" parts expose 80 GiB (nvidia-smi: 81920 MiB), parts quoted in
decimal GB (H200, MI300X, B200) are decimal. `network` is the reference system's per-GPU
inter-node bandwidth, `intra_node` half the bidirectional NVLink / Infinity Fabric / PCIe figure.
`kernel_efficiency` (the fraction of peak a training step's matmuls reach) is the throughput
model's only fitted number, with its source; a plan may override any of them.
"""

from __future__ import annotations

from dataclasses import dataclass

from budgetdsl.hardware.gemm_curves import BLACKWELL_GEMM, HOPPER_GEMM, GemmCurve

GiB = 2.0**30
GB = 1e9
Gbps = 1e9 / 8  # bytes/s


@dataclass(frozen=True, slots=True)
class GpuPreset:
    name: str
    peak_flops: float  # FLOP/s, dense bf16 (fp16 where no bf16)
    memory: float  # bytes
    network: float  # bytes/s per GPU, reference system (one NIC per GPU): override with the cluster's
    source: str
    intra_node: float  # bytes/s per GPU and direction between GPUs of one node (NVLink, xGMI, PCIe)
    hbm_bandwidth: float = 0.0  # bytes/s, datasheet: prices memory-bound kernels (norms, softmax, optimizer)
    kernel_efficiency: float = 0.0  # fraction of peak_flops reached by the step's matmuls (fitted)
    efficiency_source: str = ""
    fp8_peak_flops: float = 0.0  # FLOP/s, dense FP8 tensor cores (Hopper, Blackwell); 0: no FP8 GEMMs
    gemm: GemmCurve | None = None  # the generation's GEMM-shape curve (gemm_curves); None: no shape factor


# Fitted once: the value that makes the throughput model's predicted per-GPU TFLOP/s of the ten rows
# of Narayanan et al. 2021 (Megatron-LM, Table 1: 1.7B–1T GPT models, 32–3,072 A100 80GB, full
# recomputation, FLOPs counted with recomputation) have a geometric-mean ratio of 1 to the
# published figures. One scalar for all rows; the rows' spread (±13 %) is the model's, not tuned.
# `bench/published_runs.py --fit` recomputes both fits (tests/budgetdsl/test_published_runs.py
# checks they are current). Parts with no fitted measurement take the A100's value (flagged in
# their source); a plan that knows better declares hardware.mfu or hardware.kernel_efficiency.
A100_EFFICIENCY = 0.652
A100_SOURCE = "fitted to Narayanan et al. 2021 Table 1 (10 runs, 32–3,072 A100; geometric mean)"
# The same fit over MosaicML's llm-foundry H100 80GB BF16 benchmarks (scripts/train/benchmarking/
# README.md: 17 runs of MPT 1B–70B on 8–64 H100 with FSDP and flash attention, 2k and 4k tokens):
# H100s reach a smaller share of their peak than A100s (the spread of those rows is ±25 %).
H100_EFFICIENCY = 0.531
H100_SOURCE = "fitted to MosaicML llm-foundry H100 BF16 benchmarks (17 runs, 8–64 H100; geometric mean)"
HOPPER = "the H100 SXM's fit (the same compute die; not measured separately)"
# No B200 training run is fitted: the H100's fit times the ratio of the two chips' large-GEMM limits
# in OpenXLA's measured tables (gemm_curves: B200 reaches 0.78 of its peak where H100 reaches 0.91).
B200_EFFICIENCY = H100_EFFICIENCY * HOPPER_GEMM.c_inf / BLACKWELL_GEMM.c_inf
B200_SOURCE = "the H100 SXM's fit × the B200/H100 ratio of large-GEMM limits (OpenXLA's GEMM tables)"
UNFITTED = "A100's value (no public measurement of this part fitted yet)"

PRESETS: dict[str, GpuPreset] = {
    p.name: p
    for p in (
        # NVIDIA A100 datasheet (2021): BF16 312 TFLOPS dense; NVLink 3 600 GB/s (SXM), PCIe Gen4
        # 64 GB/s (PCIe card); DGX A100: 8x 200 Gb/s HDR InfiniBand.
        GpuPreset("A100-SXM4-40GB", 312e12, 40 * GiB, 200 * Gbps, "NVIDIA A100 datasheet", 300 * GB,
                  1555 * GB, A100_EFFICIENCY, A100_SOURCE),
        GpuPreset("A100-SXM4-80GB", 312e12, 80 * GiB, 200 * Gbps, "NVIDIA A100 datasheet", 300 * GB,
                  2039 * GB, A100_EFFICIENCY, A100_SOURCE),
        GpuPreset("A100-PCIE-80GB", 312e12, 80 * GiB, 200 * Gbps, "NVIDIA A100 datasheet", 32 * GB,
                  1935 * GB, A100_EFFICIENCY, A100_SOURCE),
        # NVIDIA H100 datasheet: SXM BF16 989 TFLOPS dense (1979 sparse), FP8 1979 dense (3958
        # sparse), NVLink 4 900 GB/s; PCIe BF16 756 dense, FP8 1513 dense (3026 sparse), PCIe Gen5
        # 128 GB/s; DGX H100: 8x 400 Gb/s ConnectX-7.
        GpuPreset("H100-SXM5-80GB", 989e12, 80 * GiB, 400 * Gbps, "NVIDIA H100 datasheet", 450 * GB,
                  3350 * GB, H100_EFFICIENCY, H100_SOURCE, 1979e12, gemm=HOPPER_GEMM),
        GpuPreset("H100-PCIE-80GB", 756e12, 80 * GiB, 400 * Gbps, "NVIDIA H100 datasheet", 64 * GB,
                  2000 * GB, H100_EFFICIENCY, HOPPER, 1513e12, gemm=HOPPER_GEMM),
        # NVIDIA H800 datasheet (the H100 SXM's compute die for the Chinese market): SXM BF16 989
        # TFLOPS dense (1979 sparse), FP8 1979 dense (3958 sparse), 80 GB HBM3 at 3.35 TB/s, NVLink
        # 400 GB/s (bidirectional: 200 GB/s each way, less than half the H100's); 400 Gb/s InfiniBand
        # per GPU, as DeepSeek-V3's H800 cluster (DeepSeek-AI 2024, section 3.1: "IB (50 GB/s)").
        GpuPreset("H800-SXM5-80GB", 989e12, 80 * GiB, 400 * Gbps, "NVIDIA H800 datasheet", 200 * GB,
                  3350 * GB, H100_EFFICIENCY, HOPPER, 1979e12, gemm=HOPPER_GEMM),
        # NVIDIA H200 datasheet: SXM BF16 989 TFLOPS dense, FP8 1979 dense (3958 sparse), 141 GB
        # HBM3e at 4.8 TB/s, NVLink 900 GB/s.
        GpuPreset("H200-SXM-141GB", 989e12, 141 * GB, 400 * Gbps, "NVIDIA H200 datasheet", 450 * GB,
                  4800 * GB, H100_EFFICIENCY, HOPPER, 1979e12, gemm=HOPPER_GEMM),
        # NVIDIA DGX B200 datasheet: 8 GPUs, 1,440 GB HBM3e, 72 PFLOPS FP8 training (sparse) ->
        # FP8 4.5 PFLOPS and BF16 2.25 PFLOPS dense per GPU; HGX B200: 8 TB/s HBM3e per GPU;
        # NVLink 5 1.8 TB/s; 8x 400 Gb/s ConnectX-7.
        GpuPreset("B200-SXM-180GB", 2.25e15, 180 * GB, 400 * Gbps, "NVIDIA DGX B200 datasheet", 900 * GB,
                  8000 * GB, B200_EFFICIENCY, B200_SOURCE, 4.5e15, BLACKWELL_GEMM),
        # AMD Instinct MI300X datasheet: BF16 1307.4 TFLOPS dense, 192 GB HBM3, Infinity Fabric
        # 896 GB/s aggregate peak.
        GpuPreset("MI300X", 1307.4e12, 192 * GB, 400 * Gbps, "AMD Instinct MI300X datasheet", 448 * GB,
                  5300 * GB, A100_EFFICIENCY, UNFITTED),
        # NVIDIA L40S datasheet: BF16 362.05 TFLOPS dense (733 sparse), 48 GB GDDR6, no NVLink
        # (PCIe Gen4 x16, 64 GB/s).
        GpuPreset("L40S", 362.05e12, 48 * GB, 200 * Gbps, "NVIDIA L40S datasheet", 32 * GB,
                  864 * GB, A100_EFFICIENCY, UNFITTED),
        # NVIDIA V100 datasheet: FP16 tensor 125 TFLOPS (SXM2), 32 GB HBM2 (no bf16), NVLink 2
        # 300 GB/s.
        GpuPreset("V100-SXM2-32GB", 125e12, 32 * GiB, 100 * Gbps, "NVIDIA V100 datasheet", 150 * GB,
                  900 * GB, A100_EFFICIENCY, UNFITTED),
        # Google Cloud TPU v5p documentation: 459 TFLOPS bf16 per chip, 95 GB HBM2e; inter-chip
        # interconnect 4,800 Gbps per chip (the same links within and between hosts).
        GpuPreset("TPU-v5p", 459e12, 95 * GB, 4800 * Gbps, "Google Cloud TPU v5p documentation", 4800 * Gbps,
                  2765 * GB, A100_EFFICIENCY, UNFITTED),
        # Google Cloud TPU v4 documentation: 275 TFLOPS bf16 per chip, 32 GiB HBM2; ICI 2,400 Gbps.
        GpuPreset("TPU-v4", 275e12, 32 * GiB, 2400 * Gbps, "Google Cloud TPU v4 documentation", 2400 * Gbps,
                  1200 * GB, A100_EFFICIENCY, UNFITTED),
    )
}

_ALIASES = {name.lower(): name for name in PRESETS}


def find_preset(name: str) -> GpuPreset | None:
    """The preset of that name, case-insensitively (`h100-sxm5-80gb` works too)."""
    canonical = _ALIASES.get(name.lower())
    return PRESETS[canonical] if canonical else None
