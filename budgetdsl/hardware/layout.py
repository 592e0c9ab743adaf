"""Which GPU counts can launch a layout, and how a layout places its ranks: the one home of these
rules, asked by the plan validator, the solver, the cost model and the exports.

A layout (t, p, dp = G/(t·p)) launches on G GPUs when G mod t·p = 0 and the job fills whole nodes (G
≤ gpus_per_node, or G mod gpus_per_node = 0); with context parallelism cp, dp = G/(t·p·cp), and a
mixture-of-experts layout's etp·ep expert groups must divide each stage's G/p GPUs (`gpu_unit`).
Ranks follow Megatron-LM's order (Narayanan et al. 2021, section 3.3): tensor innermost, then data-
parallel, then pipeline stages. Stages may be uneven (Llama 3 405B: 126 layers on 16):
`stage_layers` balances them, the LM head on the last; a plan may pin its own split
(`hardware.stage_layers`, checked by `split_problem`), or let Megatron-Core split with the embedding
and/or the loss counted as layers (`accounted_split`, checked by `accounted_problem`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable

# ZeRO-2 and ZeRO-3 do not run under a pipeline: DeepSpeed's pipeline engine asserts it
# (deepspeed/runtime/pipe/engine.py: "ZeRO-2 and ZeRO-3 are incompatible with pipeline
# parallelism"); FSDP under torch.distributed.pipelining keeps parameters and gradients whole until
# a step's last micro-batch (torchtitan does not reshard after the forward), which is ZeRO-1's
# memory; Megatron-LM's distributed optimizer shards the optimizer state only (ZeRO-1). One in-house
# stack did run ZeRO-2 under a pipeline: Meta's for Llama 3 405B (Dubey et al. 2024 section 3.3.2: FSDP
# sharding the optimizer states and the gradients, the weights not resharded after the forward), so a
# plan that pins it is priced as ZeRO-2 is defined, with the warning below, and the search keeps to 0–1.
ZERO_MAX_WITH_PIPELINE = 1


def zero_problem(zero: int, pipeline_parallel: int) -> str | None:
    """Why ZeRO stage `zero` does not run with `pipeline_parallel` stages, or None when it does."""
    if pipeline_parallel > 1 and zero > ZERO_MAX_WITH_PIPELINE:
        return (f"ZeRO-{zero} with a {pipeline_parallel}-stage pipeline is not a layout public frameworks run "
                "(DeepSpeed's pipeline engine refuses ZeRO-2/3; FSDP under pipelining keeps weights and "
                "gradients whole through a step, which is ZeRO-1"
                + ("; Meta's in-house stack sharded gradients under its pipeline for Llama 3, Dubey et al. "
                   "2024 section 3.3.2)" if zero == 2 else ")"))
    return None


def gpu_unit(tensor_parallel: int = 1, pipeline_parallel: int = 1, context_parallel: int = 1,
             expert_group: int = 1) -> int:
    """The GPU counts a layout launches on are multiples of this: t·p·cp (GPUs = t·p·cp·dp, Megatron-
    Core's order tp-cp-ep-dp-pp), and of p·etp·ep (`expert_group` = etp·ep): the routed experts'
    expert-tensor × expert-parallel ranks fold into each stage's t·cp·dp GPUs, the rest forming the
    experts' own data-parallel domain (Megatron-Core's MoE parallel folding, Liu et al. 2025)."""
    return math.lcm(tensor_parallel * pipeline_parallel * context_parallel, pipeline_parallel * expert_group)


def launch_problem(gpus: int, tensor_parallel: int = 1, pipeline_parallel: int = 1,
                   gpus_per_node: int = 8, context_parallel: int = 1, expert_group: int = 1) -> str | None:
    """Why `gpus` GPUs cannot launch the layout, or None when they can."""
    split = tensor_parallel * pipeline_parallel * context_parallel
    if gpus < 1:
        return f"{gpus} GPUs: need at least one"
    if gpus % split:
        if context_parallel > 1:
            return (f"{gpus} GPUs cannot be split into tensor_parallel × pipeline_parallel × context_parallel "
                    f"= {split} groups")
        return (f"{gpus} GPUs cannot be split into tensor_parallel × pipeline_parallel = {split} "
                "groups")
    if (gpus // pipeline_parallel) % expert_group:
        return (f"the {gpus // pipeline_parallel} GPUs of a pipeline stage (tensor × context × data parallel) "
                f"cannot be split into expert_tensor_parallel × expert_parallel = {expert_group} expert groups")
    if gpus > gpus_per_node and gpus % gpus_per_node:
        return f"{gpus} GPUs do not fill whole nodes of {gpus_per_node}"
    return None


def launchable(gpus: int, tensor_parallel: int = 1, pipeline_parallel: int = 1,
               gpus_per_node: int = 8, context_parallel: int = 1, expert_group: int = 1) -> bool:
    return launch_problem(gpus, tensor_parallel, pipeline_parallel, gpus_per_node, context_parallel,
                          expert_group) is None


def launchable_counts(counts: Iterable[int], tensor_parallel: int = 1, pipeline_parallel: int = 1,
                      gpus_per_node: int = 8, context_parallel: int = 1, expert_group: int = 1) -> list[int]:
    """The counts of `counts` that launch the layout."""
    return [g for g in counts if launchable(g, tensor_parallel, pipeline_parallel, gpus_per_node, context_parallel,
                                            expert_group)]


def nodes_of(gpus: int, gpus_per_node: int) -> tuple[int, int]:
    """(nodes, GPUs used per node) of a launchable count: one partly used node, or whole nodes."""
    if gpus <= gpus_per_node:
        return 1, gpus
    return gpus // gpus_per_node, gpus_per_node


def data_parallel_peers_in_node(data_parallel: int, tensor_parallel: int, gpus_per_node: int) -> int:
    """How many of a GPU's data-parallel group share its node (Megatron's rank order: tensor
    innermost, then data): min(dp, gpus_per_node / t), at least 1."""
    if tensor_parallel >= gpus_per_node:
        return 1
    return max(1, min(data_parallel, gpus_per_node // tensor_parallel))


def _ends(rest: int, h: float) -> tuple[float, int, int] | None:
    """The best (cost, first, last) with first + last = rest, both ≥ 1, for a last stage that also
    carries h layers' worth: O(1), the optimum is next to first = last + h."""
    lo_c, hi_c = 1, rest - 1
    if lo_c > hi_c:
        return None
    ideal = (rest - h) / 2.0
    best = None
    for c in {lo_c, hi_c, min(hi_c, max(lo_c, math.floor(ideal))), min(hi_c, max(lo_c, math.ceil(ideal)))}:
        a = rest - c
        key = (max(float(a), c + h), a, c)
        if best is None or key < best:
            best = key
    return best


def stage_layers(layers: int, stages: int, last_extra: float = 0.0) -> tuple[int, ...]:
    """Transformer layers per pipeline stage, first to last, that minimise the slowest stage when
    the last stage also carries `last_extra` layers' worth of work (the LM head and the loss).

    The split is one Megatron-Core can launch: every middle stage holds the same k layers, the
    first and the last may differ (`--decoder-first-pipeline-num-layers`,
    `--decoder-last-pipeline-num-layers`), so L mod p ≠ 0 is allowed. Ties go to the fewest layers
    on the first stage, which holds p micro-batches of activations under 1F1B and the most memory.
    An even split (L mod p = 0, no head to balance) comes out even.

    The slowest stage is max(k, ends(k)): k grows and the ends' best (first + last = L − (p−2)·k)
    shrinks with k, so the optimum sits where they cross — found by bisection, O(log L)."""
    if stages <= 1:
        return (layers,)
    if layers < stages:
        raise ValueError(f"{layers} layers cannot fill {stages} pipeline stages")
    h = max(0.0, last_extra)
    if stages == 2:
        end = _ends(layers, h)
        assert end is not None
        return (end[1], end[2])
    middle = stages - 2
    k_lo, k_hi = 1, (layers - 2) // middle  # first + last ≥ 2
    lo, hi = k_lo, k_hi  # the smallest k whose own size reaches the ends' best
    while lo < hi:
        mid = (lo + hi) // 2
        end = _ends(layers - middle * mid, h)
        if end is not None and mid >= end[0]:
            hi = mid
        else:
            lo = mid + 1
    best: tuple[float, int, tuple[int, ...]] | None = None
    for k in {max(k_lo, lo - 1), lo, min(k_hi, lo + 1)}:
        end = _ends(layers - middle * k, h)
        if end is None:
            continue
        cost, a, c = max(float(k), end[0]), end[1], end[2]
        key = (cost, a, (a,) + (k,) * middle + (c,))
        if best is None or key < best:
            best = key
    assert best is not None
    return best[2]


def balanced_split(layers: int, stages: int, virtual_stages: int = 1, last_extra: float = 0.0) -> tuple[int, ...]:
    """The split the cost model takes when the plan pins none: `stage_layers`, in chunks of v
    layers with interleaving (each of a GPU's v chunks holds the same layers, so every stage holds a
    multiple of v, as Megatron-Core requires) where v divides the layers; plain layers otherwise."""
    v = max(1, virtual_stages)
    if v == 1 or layers % v or layers // v < stages:
        return stage_layers(layers, stages, last_extra)
    return tuple(n * v for n in stage_layers(layers // v, stages, last_extra / v))


def interleavings(split: tuple[int, ...], limit: int = 8) -> list[int]:
    """The virtual-stage counts v a split runs: powers of two up to `limit` dividing every stage's
    layers (1 always)."""
    out, v = [1], 2
    while v <= limit and all(n % v == 0 for n in split):
        out.append(v)
        v *= 2
    return out


def split_problem(split: list[int] | tuple[int, ...], layers: int | None, stages: int,
                  virtual_stages: int = 1) -> tuple[int | None, str] | None:
    """Why a pinned split (`hardware.stage_layers`: layers per stage, first to last) cannot run, as
    (the offending entry's index, or None for the whole list; the reason), or None when it can.

    Megatron-Core's uneven pipeline rules (TransformerConfig: num_layers_in_first/last_pipeline_stage
    with the rest split evenly; each stage's layers divisible by the virtual pipeline size): one
    entry per stage, every stage at least one layer, the entries summing to the model's layers, and
    each a multiple of v, the interleaved chunks per GPU (each chunk holds the same layers)."""
    if len(split) != stages:
        return None, (f"{len(split)} entries for pipeline_parallel = {stages} stages: one entry per stage, "
                      "first to last")
    for i, n in enumerate(split):
        if n < 1:
            return i, f"stage {i + 1} holds {n} layers: every stage holds at least one"
    if layers is not None and sum(split) != layers:
        return None, f"the stages hold {sum(split)} layers and the model has {layers} (model.layers)"
    if virtual_stages > 1:
        for i, n in enumerate(split):
            if n % virtual_stages:
                return i, (f"stage {i + 1} holds {n} layers, not a multiple of virtual_pipeline_stages = "
                           f"{virtual_stages}: each of a GPU's {virtual_stages} interleaved chunks holds the same "
                           "layers")
    return None


def split_hint(layers: int, stages: int, virtual_stages: int = 1) -> str:
    """A split that runs, for a located error's hint: `stage_layers` balanced in chunks of v layers
    (no LM head weighed in: the cost model weighs it when the split is left to it)."""
    v = max(1, virtual_stages)
    if layers < stages * v or layers % v:
        return f"leave stage_layers out: {layers} layers do not split into {stages} stages of whole {v}-layer chunks"
    split = [n * v for n in stage_layers(layers // v, stages)]
    return f"e.g. stage_layers: [{', '.join(str(n) for n in split)}], or leave it out (the tool balances it)"


# Megatron-Core's --account-for-embedding-in-pipeline-split and --account-for-loss-in-pipeline-split
# (TransformerConfig.account_for_embedding_in_pipeline_split / account_for_loss_in_pipeline_split):
# the input embedding, and the output head with the loss, each take one transformer layer's slot in
# the pipeline split. The plan's keys (hardware.<key>) and the flag each one sets, in this order.
SPLIT_SLOTS = (("embedding_in_pipeline_split", "embedding", "--account-for-embedding-in-pipeline-split"),
               ("loss_in_pipeline_split", "loss", "--account-for-loss-in-pipeline-split"))


def slot_names(slots: tuple[bool, bool], pipeline_parallel: int = 2) -> tuple[str, ...]:
    """The accounted parts by name ("embedding", "loss"), as reports and exports write them; none
    without a pipeline (one stage holds every layer whatever is accounted)."""
    if pipeline_parallel <= 1:
        return ()
    return tuple(name for (_, name, _), on in zip(SPLIT_SLOTS, slots) if on)


def accounted_split(layers: int, stages: int, embedding: bool = False, loss: bool = False) -> tuple[int, ...]:
    """Transformer layers per stage, first to last, when the embedding and/or the loss count as one
    layer each in the split (Megatron-Core's --account-for-embedding/loss-in-pipeline-split; Dubey et
    al. 2024, section 3.3.2: Llama 3 405B's first and last stages hold one layer fewer): every stage
    holds S = (L + e + l)/p slots, the first stage's first chunk gives one to the embedding, the last
    stage's last chunk one to the loss. With interleaving every one of a stage's v chunks holds S/v
    slots, so the stages' layers are the same for every v. Assumes `accounted_problem` is None."""
    if stages <= 1:
        return (layers,)
    slots = accounted_slots(layers, embedding, loss) // stages
    return (slots - int(embedding),) + (slots,) * (stages - 2) + (slots - int(loss),)


def accounted_slots(layers: int, embedding: bool = False, loss: bool = False) -> int:
    """The layer slots the accounted split divides: L, plus one each for the embedding and the loss."""
    return layers + int(embedding) + int(loss)


def accounted_problem(layers: int, stages: int, virtual_stages: int = 1, embedding: bool = False,
                      loss: bool = False) -> str | None:
    """Why Megatron-Core refuses the accounted split (TransformerConfig.__post_init__ and
    validate_args: L + e + l divisible by the pipeline size, and the slots per stage by the virtual
    pipeline size), or why a stage would hold no transformer layer; None when it runs (or nothing
    is accounted)."""
    if not (embedding or loss) or stages <= 1:
        return None
    slots = accounted_slots(layers, embedding, loss)
    what = " + ".join(name for on, name in ((embedding, "the embedding"), (loss, "the loss")) if on)
    if slots % stages:
        return (f"{layers} layers + {what} = {slots} slots do not divide into pipeline_parallel = {stages} "
                "stages (Megatron-Core counts each accounted part as one layer and splits the slots evenly)")
    per = slots // stages
    v = max(1, virtual_stages)
    if per % v:
        return (f"the {per} slots of each of the {stages} stages ({slots} = {layers} layers + {what}) do not divide "
                f"into virtual_pipeline_stages = {v} chunks (Megatron-Core: each chunk holds the same slots)")
    if per - 1 < 1:
        return (f"each of the {stages} stages holds {per} slot, and the embedding's or the loss's stage would "
                "hold no transformer layer")
    return None


def accounted_hint(layers: int, stages: int, virtual_stages: int = 1, embedding: bool = False,
                   loss: bool = False) -> str:
    """What would divide, for a located error's hint: pipeline sizes near `stages` the slots split
    into, the other accountings that divide, or the chunk counts the slots per stage split into."""
    slots = accounted_slots(layers, embedding, loss)
    if slots % stages:
        near = sorted((q for q in range(2, slots // 2 + 1) if slots % q == 0), key=lambda q: (abs(q - stages), q))[:2]
        parts = [f"pipeline_parallel: {' or '.join(str(q) for q in sorted(near))} (dividing {slots})"] if near else []
        if embedding and loss and (layers + 1) % stages == 0:
            parts.append("account for only one of the embedding and the loss")
        if embedding != loss and (layers + 2) % stages == 0:
            parts.append("account for both the embedding and the loss")
        parts.append("leave the accounting out")
        return "e.g. " + ", or ".join(parts)
    per = slots // stages
    fits = [v for v in (1, 2, 4, 8) if per % v == 0]
    return (f"e.g. virtual_pipeline_stages: {fits[-1]}, or auto (the {per} slots of a stage split into "
            f"{', '.join(str(v) for v in fits)} chunks)")
