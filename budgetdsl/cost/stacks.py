"""Training stacks (`hardware.stack`): which communication a framework overlaps with compute, and
how finely it cuts the data-parallel collectives (each collective pays NCCL's latency α once:
`throughput.collective_latency`).

A stack says what the framework does by default in its recommended large-model configuration; a
plan that declares `hardware.overlap` still sets the data-parallel share hidden by hand.

- default: what budgetdsl priced before stacks existed, plus the latency of every collective: the
  gradients reduced (and with ZeRO-1/2 the weights gathered) in one collective per step over a
  contiguous buffer — Megatron-LM's local DDP of Narayanan et al. 2021 (`allreduce_gradients`: one
  all-reduce of the flat gradient buffer), the runs the A100 preset is fitted to — hidden behind
  the last micro-batch's backward; ZeRO-3's gathers and reduce-scatters one transformer block at a
  time (FSDP's per-block wrapping, as under every stack here) prefetched behind compute; the
  ZeRO-1/2 weights' all-gather, tensor-parallel collectives and pipeline sends exposed.
- megatron-core: Megatron-Core's DDP buckets of max(40M, 1M × dp) parameters
  (megatron/core/distributed/distributed_data_parallel.py, `bucket_size` when unset) with
  `--overlap-grad-reduce`; `--overlap-param-gather` (distributed optimizer): the weights'
  all-gather dispatched bucket by bucket under the next step's first forward (⅓ of a micro-batch's
  compute); `--tp-comm-overlap` (Transformer Engine userbuffers): each tensor-parallel collective
  split into t chunks pipelined with the GEMM that consumes or produces it (Wang et al. 2023,
  "Overlap Communication with Dependent Computation via Decomposition in Large Deep Learning
  Models", ASPLOS), so one chunk in t is exposed; `overlap_p2p_comm` with the interleaved schedule:
  the pipeline sends run under the other chunks' compute (exposed only without interleaving).
- fsdp2: PyTorch FSDP2 (`fully_shard` per transformer block, as torchtitan wraps it): every
  data-parallel collective one block at a time (gradients reduce-scattered per block, weights
  gathered per block and prefetched behind the previous block's compute, also for ZeRO-1/2:
  `reshard_after_forward=False` gathers once per step, under the forward); tensor-parallel
  collectives and pipeline sends exposed (torchtitan's async TP is opt-in).
- What `recompute: selective` recomputes is the stack's named policy (`Stack.selective`): Megatron's
  and DeepSpeed's is Korthikanti et al.'s (the attention's core: scores, softmax, the product with V);
  torchtitan's is its op-level selective checkpointing ("ops": torchtitan/models/llama3/
  parallelize_llama.py at b5bcd76, `_save_list` and `_apply_ac_to_transformer_block`, the policy of
  its Llama 3 configs' `selective_ac_option = 'op'`): a layer keeps its input, the outputs of its
  matmuls but every second one (counted in the order the forward runs them: `op_checkpoint_kept`)
  and the attention kernel's output, and recomputes everything else in the backward — the other
  matmuls and every norm, rotary embedding, activation and residual add. A mixture-of-experts
  layer is priced with its dense MLP's matmul list (torchtitan's routed experts run grouped GEMMs,
  which the policy does not keep: their recomputation is not counted).
- The loss: Megatron's vocabulary-parallel cross-entropy holds fp32 logits (LOGIT_BYTES);
  torchtitan's casts the bf16 logits to fp32 for PyTorch's cross-entropy, so the last stage holds
  TORCH_LOSS_LOGIT_BYTES a logit at the loss.
- fsdp2 runs torchtitan's default `compile = false`: every elementwise op its own eager kernel
  (`throughput.RMS_NORM_BYTES` and beside it: the op list of torchtitan's Llama). fsdp2-compile:
  the same with `compile = true` (torch.compile per transformer block), the elementwise ops fused
  as the other stacks' are priced. (Mixture-of-experts layers: the dense MLP's elementwise ops.)
- GEMM shapes (`budgetdsl.cost.gemm_shape`): Megatron-Core runs a layer's query, key and value
  projections as one GEMM (`linear_qkv`) and a gated MLP's gate and up projections as one
  (`linear_fc1`, 2·ffn wide), as do Megatron-LM and Megatron-DeepSpeed; torchtitan's Llama runs
  wq, wk, wv, w1 and w3 as separate `nn.Linear`s (torchtitan/models/llama3/model.py), so under
  tensor parallelism its key and value GEMMs are d_kv/t wide.
- deepspeed: DeepSpeed ZeRO with its defaults `reduce_bucket_size` and `allgather_bucket_size` of
  5e8 elements (deepspeed/runtime/zero/config.py) and `overlap_comm`: gradients reduced under the
  backward; ZeRO-1/2's all-gather of the updated weights runs in `step()`, exposed.
"""

from __future__ import annotations

from dataclasses import dataclass

MEGATRON_BUCKET_PARAMS = 40e6  # Megatron-Core DDP: bucket_size = max(40_000_000, 1_000_000 * dp)
MEGATRON_BUCKET_PER_DP = 1e6
DEEPSPEED_BUCKET_ELEMENTS = 5e8  # DeepSpeed ZeRO reduce_bucket_size / allgather_bucket_size defaults
LOGIT_BYTES = 4.0  # per logit at the loss: fp32 logits (Megatron's fused vocab-parallel cross-entropy)
# torchtitan's loss, F.cross_entropy(pred.flatten(0, 1).float(), labels) (torchtitan/train.py at
# b5bcd76): at the loss the bf16 logits (2), their fp32 copy (4) and log-softmax's fp32 output (4)
TORCH_LOSS_LOGIT_BYTES = 10.0
FORWARD_SHARE = 1.0 / 3.0  # the forward's share of a micro-batch's compute (the backward's is ⅔)


@dataclass(frozen=True, slots=True)
class Stack:
    """One training stack's communication: see the module docstring for each profile's sources."""

    name: str
    tp_overlap: bool = False  # TP collectives pipelined in t chunks with their GEMMs: 1/t exposed
    pp_overlap: bool = False  # pipeline sends hidden under compute with the interleaved schedule
    gather_share: float = 0.0  # share of a micro-batch's compute hiding ZeRO-1/2's weights' all-gather
    bucket: str = "one"  # one | block | megatron | deepspeed: how the ZeRO 0–2 collectives are cut
    selective: str = "attention"  # attention | ops: what `recompute: selective` recomputes (module docstring)
    logit_bytes: float = LOGIT_BYTES  # bytes per logit the last stage holds at the loss
    eager: bool = False  # elementwise ops run as PyTorch's eager kernels, one each (no torch.compile)
    fused: bool = True  # Q, K, V one GEMM and the gated MLP's gate and up one (cost.gemm_shape); torchtitan: apart

    def checkpoint(self, recompute: str) -> str:
        """The recomputation the cost model prices for the plan's `recompute`: "ops" where this stack's
        selective checkpointing is torchtitan's op-level policy, else `recompute` itself."""
        return "ops" if recompute == "selective" and self.selective == "ops" else recompute

    def collectives(self, nbytes: float, value_bytes: float, dp: int, blocks: int) -> int:
        """How many collectives carry `nbytes` (values of `value_bytes` each) over dp ranks for a
        GPU holding `blocks` transformer blocks: the stack's buckets, each paying the collective
        latency once; 0 for nothing to move."""
        if nbytes <= 0:
            return 0
        if self.bucket == "one":
            return 1
        if self.bucket == "block":
            return max(1, blocks)
        if self.bucket == "megatron":
            per = max(MEGATRON_BUCKET_PARAMS, MEGATRON_BUCKET_PER_DP * dp) * value_bytes
        elif self.bucket == "deepspeed":
            per = DEEPSPEED_BUCKET_ELEMENTS * value_bytes
        else:
            raise ValueError(f"unknown bucketing {self.bucket!r}")
        return max(1, -int(-nbytes // per))


STACKS: dict[str, Stack] = {s.name: s for s in (
    Stack("default"),
    Stack("megatron-core", tp_overlap=True, pp_overlap=True, gather_share=FORWARD_SHARE, bucket="megatron"),
    Stack("fsdp2", gather_share=FORWARD_SHARE, bucket="block", selective="ops",
          logit_bytes=TORCH_LOSS_LOGIT_BYTES, eager=True, fused=False),
    Stack("fsdp2-compile", gather_share=FORWARD_SHARE, bucket="block", selective="ops",
          logit_bytes=TORCH_LOSS_LOGIT_BYTES, fused=False),
    Stack("deepspeed", bucket="deepspeed"),
)}
DEFAULT_STACK = STACKS["default"]


def op_checkpoint_kept(matmuls: tuple[tuple[float, float], ...]) -> tuple[bool, ...]:
    """Which of a layer's matmuls (in forward order) torchtitan's op-level policy keeps: the 1st,
    3rd, 5th … — its policy counts the layer's `aten.mm` calls and recomputes every second one."""
    return tuple(i % 2 == 0 for i in range(len(matmuls)))


__all__ = ["Stack", "STACKS", "DEFAULT_STACK", "FORWARD_SHARE", "LOGIT_BYTES", "op_checkpoint_kept"]
