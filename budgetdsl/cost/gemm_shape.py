"""A layer's matmuls as one GPU runs them, and how much longer they take than at the large-GEMM
rate a preset's kernel efficiency stands for (issue 24, item 6): the shapes of a tensor-parallel
shard (Megatron's column and row split, fused or not as the stack runs them) through the chip's
GEMM-shape curve (`budgetdsl.hardware.gemm_curves`): the throughput model adds their time per
token and per micro-batch; the attention scores and values (flash attention's own kernel) keep the
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
    """A set of matmuls' time against the large-GEMM rate, split as the step's closed form is
    (`throughput.StepCost`): `per_row` multiplies their FLOPs (linear in the rows, so in the
    micro-batch); `fixed` is FLOPs' worth each micro-batch adds whatever its rows (the waves a
    short M leaves part empty, the launch, the weight gradient's tiles over K = rows). The
    `forward_` pair: the same of the forward alone (what recomputation runs again)."""

    per_row: float = 1.0
    fixed: float = 0.0
    forward_per_row: float = 1.0
    forward_fixed: float = 0.0


def gemm_time(curve: GemmCurve | None, matmuls: tuple[tuple[float, float], ...]) -> GemmTime:
    """`GemmTime` of `matmuls` (one GPU's (input, output) widths, `sharded_matmuls`) over a
    micro-batch's rows. Each runs as its forward (rows × out, over in), its input gradient (rows ×
    in, over out) and its weight gradient (in × out, over the rows), equal FLOPs each; with the
    curve's 1/η = c∞ + c_k/K + c_a/(M·N) + c_t/(M·N·K) the time of 2·M·N·K FLOPs is, in FLOPs at
    the large-GEMM rate, 2·M·N·K + 2·M·N·c_k/c∞ + 2·K·c_a/c∞ + 2·c_t/c∞: the first two grow with
    the rows wherever the rows are M, the others do not. No curve: the FLOPs alone."""
    if curve is None or not matmuls:
        return GemmTime()
    c_k, c_a, c_t = curve.c_k / curve.c_inf, curve.c_area / curve.c_inf, curve.c_launch / curve.c_inf
    work = forward = backward = fixed_f = fixed_b = 0.0
    for i, o in matmuls:
        i, o = max(i, 1.0), max(o, 1.0)
        work += i * o  # FLOPs per row of each of the three: 2·i·o
        forward += i * o + o * c_k
        backward += i * o + i * c_k + i * o + c_a
        fixed_f += 2.0 * (i * c_a + c_t)
        fixed_b += 2.0 * (o * c_a + c_t) + 2.0 * (i * o * c_k + c_t)
    return GemmTime((forward + backward) / (3.0 * work), fixed_f + fixed_b, forward / work, fixed_f)
