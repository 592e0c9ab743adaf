"""What a PyTorch/NCCL training process keeps on each GPU outside the tensors `budgetdsl.cost.memory`
counts (weights, gradients, optimizer state, activations, logits): the default of
`hardware.memory_reserve`. Three parts, each from its source:

- **CUDA context and the math libraries' workspaces**, a fixed amount per device. PyTorch measured
  the context of a process at 287 MB with CUDA's lazy module loading and 667 MB loading every module
  at start-up (pytorch/pytorch PR #86509, which made lazy loading PyTorch's default); a training step
  loads most of the kernels it links (cuBLAS, cuDNN, NCCL, attention), so the eager figure is taken.
  cuBLAS and cuBLASLt each get a workspace per handle and stream: 32 MiB, the cuBLAS guide's
  recommended size on Hopper (cublasSetWorkspace) and PyTorch's cuBLASLt default there
  (pytorch/pytorch PR #120925; 4 MiB on earlier parts, the larger size kept for every part).
- **NCCL's communicator buffers**, per communicator the layout opens (a group of one rank has no
  peer and no buffer). Each connection of a channel holds one buffer per protocol: Simple
  `NCCL_BUFFSIZE` = 4 MiB (NCCL user guide, Environment Variables, NCCL_BUFFSIZE; src/init.cc
  DEFAULT_BUFFSIZE), LL128 120 elements × 640 threads × 8 steps × 8 B = 4.69 MiB and LL 8 lines ×
  512 threads × 8 steps × 16 B = 0.5 MiB (src/init.cc DEFAULT_LL128_BUFFSIZE, DEFAULT_LL_BUFFSIZE;
  src/include/device.h). A collective communicator (tensor and data parallelism) connects each rank
  to its ring's two neighbours, whatever the group's size ("Ring uses a limited amount of memory as
  it only has 2 connections regardless of the scale"; memory "linearly tied to the number of
  channels": NCCL's maintainer in NVIDIA/nccl#864 and #986), on up to 32 channels on NVLink/NVSwitch
  nodes: 32 × 2 × 9.19 MiB = 588 MiB, as measured for one 4 MB all-reduce per group on 4 A100
  (544–688 MB, NVIDIA/nccl#964). A point-to-point communicator (pipeline sends, context
  parallelism's ring attention, the experts' all-to-all) keeps Simple buffers only, on
  `NCCL_NCHANNELS_PER_NET_PEER` = 2 channels per peer (NCCL user guide, its default): 2 peers
  for a pipeline stage (the previous and the next) and a ring-attention rank, ep − 1 for the
  all-to-all. Within one NVLink node NCCL may open more channels per peer than that (32 per pair
  for an all-to-all on 8 H100, ~3.3 GB: NVIDIA/nccl#1685), which the reserve leaves out; so are
  the communicators a framework opens beside these (the gradient-norm and embedding groups) and
  the buffers of a DeepEP dispatcher.
- **The caching allocator's fragmentation**: blocks freed and split between differently sized
  requests that no later request fits. GMLake (Guo et al., ASPLOS 2024, evaluation) measured the
  default PyTorch allocator training eight LLMs on A100 80GB and removed 15 % fragmentation on
  average (up to 33 %; 9.2 GB of memory, up to 25 GB) under memory-reduction techniques that stress it
  (recomputation, ZeRO-3, offloading, LoRA); the stacks the tool plans allocate their persistent
  state in contiguous buffers (Megatron-Core's parameter and gradient buffers) and can map
  segments that grow in place (PYTORCH_CUDA_ALLOC_CONF=expandable_segments, PyTorch "CUDA
  semantics", Memory management), so the reserve takes FRAGMENTATION = 5 % of the counted bytes, a
  stated assumption at the low end of that range. A plan that measured its own process declares
  `hardware.memory_reserve`, which replaces all three parts.
"""

from __future__ import annotations

from typing import NamedTuple

MiB = 2.0**20

CUDA_CONTEXT = 666_632_192.0  # B: pytorch/pytorch PR #86509, a process's context loading every module
CUBLAS_WORKSPACE = 32 * MiB  # B per handle: cuBLAS guide, cublasSetWorkspace (Hopper); PyTorch PR #120925
CUBLAS_HANDLES = 2  # cuBLAS and cuBLASLt on the compute stream

NCCL_BUFFSIZE = 4 * MiB  # Simple protocol, per connection and channel (NCCL_BUFFSIZE default)
NCCL_LL128_BUFFSIZE = 120 * 640 * 8 * 8.0  # NCCL_LL128_ELEMS_PER_THREAD × MAX_NTHREADS × NCCL_STEPS × 8 B
NCCL_LL_BUFFSIZE = 8 * 512 * 8 * 16.0  # NCCL_LL_LINES_PER_THREAD × LL_MAX_NTHREADS × NCCL_STEPS × 16 B
NCCL_CHANNELS = 32  # collective channels on an NVLink/NVSwitch node (NVIDIA/nccl#964's 544–688 MB per group)
NCCL_RING_CONNECTIONS = 2  # a ring's two neighbours, whatever the group's size (NVIDIA/nccl#986)
NCCL_P2P_CHANNELS_PER_PEER = 2  # NCCL_NCHANNELS_PER_NET_PEER default

FRAGMENTATION = 0.05  # of the counted bytes: the low end of GMLake's measured range (module docstring)

COLLECTIVE = NCCL_CHANNELS * NCCL_RING_CONNECTIONS * (NCCL_BUFFSIZE + NCCL_LL128_BUFFSIZE + NCCL_LL_BUFFSIZE)
P2P_PEER = NCCL_P2P_CHANNELS_PER_PEER * NCCL_BUFFSIZE


class Reserve(NamedTuple):
    """The default reserve of one layout: `fixed` bytes (context, workspaces, NCCL buffers) plus
    `fragmentation` × the counted bytes; `data_parallel` the data-parallel communicator's buffers,
    in `fixed` where dp·cp > 1, which a search over replica counts adds or removes; `comms` the
    communicators (`communicators`), which `detail` words (written when read: a layout search
    builds thousands of cost models and reports one)."""

    fixed: float
    fragmentation: float
    data_parallel: float
    comms: list[tuple[str, float]]

    @property
    def detail(self) -> str:
        gib = 2.0**30
        nccl = sum(b for _, b in self.comms)
        listed = ", ".join(f"{n} {b / gib:.2f}" for n, b in self.comms) or "none"
        return (f"CUDA context {CUDA_CONTEXT / gib:.2f} GiB (PyTorch PR #86509) + cuBLAS/cuBLASLt workspaces "
                f"{CUBLAS_HANDLES * CUBLAS_WORKSPACE / gib:.2f} GiB + NCCL buffers {nccl / gib:.2f} GiB ({listed}; "
                f"collective {NCCL_CHANNELS} channels × {NCCL_RING_CONNECTIONS} ring connections × Simple + LL128 + "
                f"LL, point to point {NCCL_P2P_CHANNELS_PER_PEER} channels × 4 MiB per peer: NCCL_BUFFSIZE); plus "
                f"{self.fragmentation:.0%} of the counted bytes for the caching allocator's fragmentation "
                "(budgetdsl.cost.reserve)")


def communicators(t: int, p: int, cp: int, ep: int, dp: int) -> list[tuple[str, float]]:
    """(name, bytes) of each NCCL communicator a rank of the layout holds buffers for: tensor
    parallelism (t > 1) and the gradients' data-parallel group over dp·cp (> 1), collective; the
    pipeline's sends (p > 1), ring attention's (cp > 1) and the experts' all-to-all (ep > 1),
    point to point."""
    out: list[tuple[str, float]] = []
    if t > 1:
        out.append((f"TP {t}", COLLECTIVE))
    if dp * cp > 1:
        out.append((f"DP {dp * cp}", COLLECTIVE))
    if p > 1:
        out.append((f"PP {p}", 2 * P2P_PEER))
    if cp > 1:
        out.append((f"CP {cp}", 2 * P2P_PEER))
    if ep > 1:
        out.append((f"EP {ep}", (ep - 1) * P2P_PEER))
    return out


def default_reserve(t: int, p: int, cp: int, ep: int, dp: int) -> Reserve:
    """The reserve of a rank of the layout t·p·cp·dp (experts over ep) where the plan declares no
    `hardware.memory_reserve` (module docstring)."""
    comms = communicators(t, p, cp, ep, dp)
    fixed = CUDA_CONTEXT + CUBLAS_HANDLES * CUBLAS_WORKSPACE + sum(b for _, b in comms)
    return Reserve(fixed, FRAGMENTATION, COLLECTIVE, comms)
