"""A layer's matmuls as one GPU runs them, and how much longer they take than at the large-GEMM
rate a preset's kernel efficiency stands for (issue 24, item 6): the shapes of a tensor-parallel
shard (Megatron's column and row split, fused or not as the stack runs them) through the chip's
GEMM-shape curve (`budgetdsl.hardware.gemm_curves`). The throughput model multiplies a layer's
GEMM time by the slowdown; the attention scores and values (flash attention's own kernel) keep the
preset's efficiency.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from budgetdsl.cost.flops import layer_matmuls
from budgetdsl.hardware.gemm_curves import GemmCurve

if TYPE_CHECKING:
    from budgetdsl.plan.model import LatentAttention


def sharded_matmuls(d_model: float, heads: float | None, kv_heads: float | None, ffn_hidden: float | None,
                    mlp: str, t: int, fused: bool,
                    mla: LatentAttention | None = None) -> tuple[tuple[float, float], ...]:
    """(input, output) widths of a layer's matmuls (`flops.layer_matmuls`) on one of t
    tensor-parallel GPUs (Megatron's split, Shoeybi et al. 2019 section 3): the projections into
    heads and into the MLP split their output (column-parallel), the attention's output projection
    and the MLP's down projection their input (row-parallel); multi-latent attention's low-rank
    down-projections (out of d into a narrower latent) are not split. `fused`: the stack runs the
    query, key and value projections as one GEMM and the gated MLP's gate and up projections as one
    (Megatron-Core's linear_qkv and linear_fc1; `stacks.Stack.fused`)."""
    mats = layer_matmuls(d_model, heads, kv_heads, ffn_hidden, mlp, mla)
    n_mlp = 3 if mlp == "swiglu" else 2
    blocks = [mats[:-n_mlp], mats[-n_mlp:]]
    if fused:
        blocks = [((b[0][0], sum(o for _, o in b[:-1])), b[-1]) if mla is None or k else b
                  for k, b in enumerate(blocks)]
    d = float(d_model)
    out: list[tuple[float, float]] = []
    for *column, row in blocks:
        out += [(i, o) if mla is not None and i == d and o < d else (i, o / t) for i, o in column]
        out.append((row[0] / t, row[1]))
    return tuple(out)


@dataclass(frozen=True, slots=True)
class GemmTime:
    """A set of matmuls' time per token against the large-GEMM rate (how many times longer than
    their FLOPs at it): all three GEMMs of each (`per_row`), the forward alone (`forward_per_row`,
    what recomputation runs again)."""

    per_row: float = 1.0
    forward_per_row: float = 1.0


def gemm_time(curve: GemmCurve | None, matmuls: tuple[tuple[float, float], ...]) -> GemmTime:
    """`GemmTime` of `matmuls` (one GPU's (input, output) widths, `sharded_matmuls`). Each runs as
    its forward (rows × out, over in), its input gradient (rows × in, over out) and its weight
    gradient (in × out, over the rows), equal FLOPs each. With the curve's 1/η = c∞ + c_k/K +
    c_a/(M·N) + c_t/(M·N·K), 2·M·N·K FLOPs take, in FLOPs at the large-GEMM rate, 2·M·N·K +
    2·M·N·c_k/c∞ + 2·K·c_a/c∞ + 2·c_t/c∞: per row, the c_k term where K is a weight's width and the
    c_a term of the weight gradient (whose M·N is the weight) — what is counted. The rest is a
    fixed time per micro-batch (the waves a short M leaves part empty, the launch, the weight
    gradient's epilogue over K = rows), not counted: for a micro-batch of 8,192 rows it is 9 % of
    the counted time on a TP-8 shard of Llama 3 8B, 2 % unsharded, less with more rows.
    (A per-micro-batch time would join the collectives' latency; the pipelines' time-limit
    intervals, taken at one micro-batch's line, are not a bound with it: docs/cost-model.md.)
    No curve: the FLOPs alone."""
    if curve is None or not matmuls:
        return GemmTime()
    c_k, c_a = curve.c_k / curve.c_inf, curve.c_area / curve.c_inf
    work = forward = backward = 0.0
    for i, o in matmuls:
        i, o = max(i, 1.0), max(o, 1.0)
        work += i * o  # FLOPs per row of each of the three: 2·i·o
        forward += i * o + o * c_k
        backward += i * o + i * c_k + i * o + c_a
    return GemmTime((forward + backward) / (3.0 * work), forward / work)
