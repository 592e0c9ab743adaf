"""How much of a chip's large-GEMM rate a GEMM of a given shape reaches, per GPU generation: what a
preset's kernel efficiency is multiplied by for a layer's matmuls (`budgetdsl.cost.gemm_shape`).

An (M×K)·(K×N) GEMM runs at η(M, N, K) of the chip's peak,

    1/η = c∞ + c_k/K + c_a/(M·N) + c_t/(M·N·K)

c∞ the large-GEMM limit; c_k/K each output tile's fixed prologue and epilogue against its K loop;
c_a/(M·N) too few output tiles to fill the SMs (a wave part empty); c_t/(M·N·K) a fixed time per
launch (t₀ = 2·c_t/peak). Fitted per generation by linear least squares on 1/η, weighted to
relative error, to OpenXLA's measured bf16 GEMM tables (tests/fixtures/xla-matmul: 375 shapes per
chip, M = 256–16,384, N and K = 256–4,096); `bench/gemm_fit.py` refits them, a test checks the
constants below are that fit. The throughput model reads η·c∞ (`GemmCurve.relative`, 1 for an
unbounded GEMM): a preset's fitted kernel efficiency is what a step's large matmuls reach, and
narrow ones — a tensor-parallel shard of a small model — reach less of it. Parts of a generation
with no table (A100, V100, L40S, MI300X, TPUs) take no shape factor.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class GemmCurve:
    """One generation's fit of 1/η (module docstring) and where it comes from."""

    c_inf: float
    c_k: float
    c_area: float
    c_launch: float
    source: str

    def relative(self, m: float, n: float, k: float) -> float:
        """η(M, N, K) as a share of the large-GEMM limit 1/c∞: 1 for an unbounded GEMM, less for a
        narrow, short or small one (a dimension below 1 counts as 1)."""
        m, n, k = max(m, 1.0), max(n, 1.0), max(k, 1.0)
        area = m * n
        return self.c_inf / (self.c_inf + self.c_k / k + self.c_area / area + self.c_launch / (area * k))


XLA_TABLES = ("OpenXLA GPU cost model, xla/service/gpu/model/matmul_interpolator_data.h at e97611c (2026-02-13): "
              "measured bf16 GEMMs")
# bench/gemm_fit.py over tests/fixtures/xla-matmul (training shapes M ≥ 2,048, N, K ≥ 512: H100 rms
# 4.1 %, worst 10.0 %; B200 rms 4.7 %, worst 20.7 %)
HOPPER_GEMM = GemmCurve(1.0952, 203.78, 4.0333e5, 2.6186e9, f"{XLA_TABLES}, sm_90 (H100 SXM), 375 shapes")
BLACKWELL_GEMM = GemmCurve(1.2839, 332.37, 8.2292e5, 5.9737e9, f"{XLA_TABLES}, sm_100 (B200), 375 shapes")
