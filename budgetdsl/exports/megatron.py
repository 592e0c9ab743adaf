"""`megatron`: Megatron-LM's model-shape, batch, schedule and parallelism arguments, as a bash array.

    source run.megatron.sh && torchrun ... pretrain_gpt.py "${MEGATRON_ARGS[@]}" <data and tokenizer args>

The flags are those of `megatron/training/arguments.py` in Megatron-LM core_r0.16.0 (FLAGS), and
`validate_args` accepts the file on its own; what the plan does not know (the position embedding,
and --ffn-hidden-size, --swiglu, the query groups where it does not describe the layer) is left to
Megatron's defaults and the user.
"""

from __future__ import annotations

import math

from budgetdsl.exports._text import fmt_lr, hash_comments, header, sh
from budgetdsl.exports.spec import TP_ENV, ExportError, LaunchSpec, format_float
from budgetdsl.hardware.layout import SPLIT_SLOTS

MEGATRON_VERSION = "Megatron-LM core_r0.16.0 (megatron-core 0.16)"
USES = frozenset({"optimizer.lr", "budget.deadline"})
MODEL_FLAGS = frozenset({
    "--num-layers", "--hidden-size", "--num-attention-heads", "--max-position-embeddings",
    "--vocab-size", "--recompute-granularity", "--recompute-method", "--recompute-num-layers",
    "--group-query-attention", "--num-query-groups", "--ffn-hidden-size", "--swiglu",
    "--untie-embeddings-and-output-weights", "--fp8-format",
    "--num-experts", "--moe-router-topk", "--moe-ffn-hidden-size", "--moe-shared-expert-intermediate-size",
    "--moe-layer-freq", "--moe-expert-capacity-factor", "--moe-pad-expert-input-to-capacity",
    "--moe-token-dispatcher-type", "--moe-grouped-gemm", "--disable-bias-linear",
    "--moe-router-num-groups", "--moe-router-group-topk", "--moe-flex-dispatcher-backend",
    "--overlap-moe-expert-parallel-comm",
    "--multi-latent-attention", "--q-lora-rank", "--kv-lora-rank", "--qk-head-dim", "--qk-pos-emb-head-dim",
    "--v-head-dim",
})
FLAGS = MODEL_FLAGS | frozenset({
    "--tensor-model-parallel-size", "--pipeline-model-parallel-size", "--micro-batch-size",
    "--global-batch-size", "--seq-length", "--train-iters", "--lr", "--lr-warmup-iters",
    "--lr-decay-style", "--use-distributed-optimizer", "--exit-duration-in-mins", "--bf16", "--fp16",
    "--context-parallel-size", "--expert-model-parallel-size", "--expert-tensor-parallel-size",
    "--sequence-parallel", "--decoder-first-pipeline-num-layers", "--decoder-last-pipeline-num-layers",
    "--num-virtual-stages-per-pipeline-rank", "--account-for-embedding-in-pipeline-split",
    "--account-for-loss-in-pipeline-split",
})
RAMP_FLAGS = frozenset({"--step-batch-size-schedule", "--train-samples", "--lr-warmup-samples"})
# validate_args' required_args, and the plan keys that give them.
REQUIRED = (("--num-layers", "layers", "model.layers"), ("--hidden-size", "hidden_size", "model.d_model"),
            ("--num-attention-heads", "heads", "model.heads"))


def model_arguments(spec: LaunchSpec) -> list[tuple[str, str | None]]:
    """The model's shape: layers, width and heads (validate_args requires them), the sequence length
    as --max-position-embeddings (validate_args: ≥ --seq-length), --vocab-size when the plan knows
    it (the Null and TikToken tokenizers read it), and the recomputation the memory model assumed."""
    missing = [(flag, key) for flag, attr, key in REQUIRED if getattr(spec, attr) is None]
    if missing:
        raise ExportError("Megatron-LM's validate_args requires the model's shape ("
                          + ", ".join(flag for flag, _ in missing) + "): set "
                          + ", ".join(key for _, key in missing) + " in the plan")
    args: list[tuple[str, str | None]] = [
        ("--num-layers", str(spec.layers)),
        ("--hidden-size", str(spec.hidden_size)),
        ("--num-attention-heads", str(spec.heads)),
        ("--max-position-embeddings", str(spec.seq_len)),
    ]
    if spec.vocab is not None:
        args.append(("--vocab-size", str(spec.vocab)))
    args += shape_arguments(spec)
    if spec.recompute == "full" and spec.recompute_layers is not None:  # block: the first N layers of each chunk
        if spec.recompute_layers > 0:  # 0 recomputes nothing, which Megatron spells as no recomputation flags
            args += [("--recompute-granularity", "full"), ("--recompute-method", "block"),
                     ("--recompute-num-layers", str(spec.recompute_layers))]
    elif spec.recompute == "full":  # every layer's input kept, the layer recomputed in the backward
        args += [("--recompute-granularity", "full"), ("--recompute-method", "uniform"),
                 ("--recompute-num-layers", "1")]
    elif spec.recompute == "selective":  # attention's core recomputed (Korthikanti et al. 2022)
        args.append(("--recompute-granularity", "selective"))
    return args


def shape_arguments(spec: LaunchSpec) -> list[tuple[str, str | None]]:
    """The layer the plan describes (model.kv_heads, ffn_hidden, mlp, tied_embeddings) and FP8
    GEMMs: grouped-query attention's --num-query-groups, the MLP width (always written with
    --swiglu, whose own default is 8/3 of the width, not the plan's 4·d), an untied LM head, and
    Transformer Engine's hybrid FP8 recipe (E4M3 forward, E5M2 gradients) beside --bf16."""
    args: list[tuple[str, str | None]] = []
    if spec.kv_heads is not None and spec.kv_heads != spec.heads:
        args += [("--group-query-attention", None), ("--num-query-groups", str(spec.kv_heads))]
    if spec.mla is not None:  # Megatron-Core's MLATransformerConfig (_add_mla_args; --qk-head-dim is the no-RoPE part)
        q_lora, kv_lora, nope, rope, v = spec.mla
        args.append(("--multi-latent-attention", None))
        if q_lora is not None:
            args.append(("--q-lora-rank", str(q_lora)))
        args += [("--kv-lora-rank", str(kv_lora)), ("--qk-head-dim", str(nope)), ("--qk-pos-emb-head-dim", str(rope)),
                 ("--v-head-dim", str(v))]
    if spec.ffn_hidden is not None or spec.swiglu:
        ffn = spec.ffn_hidden if spec.ffn_hidden is not None else 4 * (spec.hidden_size or 0)
        args.append(("--ffn-hidden-size", str(ffn)))
    if spec.swiglu:
        args.append(("--swiglu", None))
    if spec.untied_embeddings:
        args.append(("--untie-embeddings-and-output-weights", None))
    if spec.fp8:
        args.append(("--fp8-format", "hybrid"))
    return args + expert_arguments(spec)


def expert_arguments(spec: LaunchSpec) -> list[tuple[str, str | None]]:
    """The mixture-of-experts layers (model.experts, ...): Megatron-Core's --num-experts and top-k,
    the expert width, the shared experts' total width (--moe-shared-expert-intermediate-size, S·F_e),
    the leading dense layers as --moe-layer-freq's list ([0]*dense+[1]*moe, integers only), the
    capacity factor with its padding (what the plan prices) or dropless, the all-to-all dispatcher
    the plan's dispatch time models, and grouped GEMMs."""
    if spec.experts is None:
        return []
    ffn = spec.expert_ffn_hidden or spec.ffn_hidden or 4 * (spec.hidden_size or 0)
    args: list[tuple[str, str | None]] = [("--num-experts", str(spec.experts)),
                                          ("--moe-router-topk", str(spec.experts_per_token)),
                                          ("--moe-ffn-hidden-size", str(ffn))]
    if spec.shared_experts:
        args.append(("--moe-shared-expert-intermediate-size", str(spec.shared_experts * ffn)))
    if spec.dense_layers:
        moe = (spec.layers or 0) - spec.dense_layers
        args.append(("--moe-layer-freq", f"[0]*{int(spec.dense_layers)}+[1]*{int(moe)}"))
    if spec.capacity_factor is not None:
        args += [("--moe-expert-capacity-factor", format_float(spec.capacity_factor)),
                 ("--moe-pad-expert-input-to-capacity", None)]
    if spec.expert_groups is not None:  # group-limited routing (TransformerConfig.moe_router_num_groups)
        args += [("--moe-router-num-groups", str(spec.expert_groups)),
                 ("--moe-router-group-topk", str(spec.expert_groups_per_token))]
    # the shape counts no biases (plan.model.transformer_params), and Megatron-Core's experts take
    # none with expert tensor parallelism (TransformerConfig: "Bias in Moe is only supported when ETP==1")
    if spec.expert_dispatch == "deepep":  # the flex dispatcher with its DeepEP backend
        args += [("--moe-token-dispatcher-type", "flex"), ("--moe-flex-dispatcher-backend", "deepep")]
    else:
        args.append(("--moe-token-dispatcher-type", "alltoall"))
    args += [("--moe-grouped-gemm", None), ("--disable-bias-linear", None)]
    if spec.expert_overlap and spec.expert_parallel > 1:
        # TransformerConfig.__post_init__ (core_r0.16.0) asserts no full recomputation and, under a
        # pipeline, interleaved stages for the EP all-to-all overlap
        full = spec.recompute == "full" and spec.recompute_layers != 0  # block with N = 0 recomputes nothing
        if full or (spec.pipeline_parallel > 1 and spec.virtual_stages == 1):
            why = ("full recomputation" if full else
                   f"a pipeline of {spec.pipeline_parallel} stages without interleaving")
            raise ExportError("the plan overlaps the expert-parallel all-to-all with compute (hardware.expert_overlap) "
                              f"under {why}, and Megatron-Core's --overlap-moe-expert-parallel-comm refuses that "
                              "(it needs no full recomputation, and virtual_pipeline_stages > 1 with a pipeline); "
                              "plan with expert_overlap: false, or change the recomputation or the interleaving")
        args.append(("--overlap-moe-expert-parallel-comm", None))
    return args


def parallel_arguments(spec: LaunchSpec) -> list[tuple[str, str | None]]:
    """Context and expert parallelism, where the plan has them: --context-parallel-size (Megatron
    then computes data parallel = world / (tensor × pipeline × context)), --expert-model-parallel-size,
    --expert-tensor-parallel-size, and --sequence-parallel where the plan (or its search) runs it
    with tensor parallelism, and always for expert with tensor parallelism (validate_args requires it)."""
    args: list[tuple[str, str | None]] = []
    if spec.context_parallel > 1:
        args.append(("--context-parallel-size", str(spec.context_parallel)))
    sequence_parallel = spec.sequence_parallel and spec.tensor_parallel > 1  # ModelParallelConfig: needs TP
    if spec.experts is not None:
        args.append(("--expert-model-parallel-size", str(spec.expert_parallel)))
        if spec.expert_tensor_parallel is not None:
            args.append(("--expert-tensor-parallel-size", str(spec.expert_tensor_parallel)))
        sequence_parallel = sequence_parallel or spec.tensor_parallel > 1
    if sequence_parallel:
        args.append(("--sequence-parallel", None))
    return args


def pipeline_arguments(spec: LaunchSpec) -> list[tuple[str, str | None]]:
    """The interleaved stages per GPU (--num-virtual-stages-per-pipeline-rank), and an uneven split
    (`LaunchSpec.stage_layers`) as Megatron-Core's uneven pipeline: the first and
    the last stage's layers (--decoder-first-pipeline-num-layers, --decoder-last-pipeline-num-layers),
    the middle stages sharing the rest evenly (TransformerConfig checks it). A split whose middle
    stages differ has no such form: refused."""
    interleave: list[tuple[str, str | None]] = []
    if spec.virtual_stages > 1:  # interleaved 1F1B: model chunks per pipeline rank
        interleave.append(("--num-virtual-stages-per-pipeline-rank", str(spec.virtual_stages)))
    if spec.split_slots:  # Megatron-Core makes the split itself: (L + e + l)/(p·v) slots a chunk, the
        # embedding in the first chunk's first slot, the loss in the last chunk's last (it refuses the
        # --decoder-first/last flags beside these; LaunchSpec checked the slots divide)
        return interleave + [(flag, None) for _, name, flag in SPLIT_SLOTS if name in spec.split_slots]
    split = spec.stage_layers
    if split is None:
        return interleave
    first, middle, last = split[0], split[1:-1], split[-1]
    if len(set(middle)) > 1:
        raise ExportError(f"the pipeline split {list(split)} (layers per stage) has unequal middle stages, and "
                          "Megatron-Core's uneven pipeline sets only the first and the last stage "
                          "(--decoder-first-pipeline-num-layers, --decoder-last-pipeline-num-layers), sharing the "
                          "rest evenly: write hardware.stage_layers with equal middle stages, or write the split "
                          "as Megatron-Core's --pipeline-model-parallel-layout yourself")
    k = middle[0] if middle else None
    args = interleave
    if k is None or first != k:
        args.append(("--decoder-first-pipeline-num-layers", str(first)))
    if k is None or last != k:
        args.append(("--decoder-last-pipeline-num-layers", str(last)))
    return args


def arguments(spec: LaunchSpec) -> list[tuple[str, str | None]]:
    """Every flag. Megatron derives data parallel = world / (tensor × pipeline) and accumulation =
    global / (micro × data parallel), which must divide exactly (ConstantNumMicroBatchesCalculator):
    the global batch written is the one that makes the accumulation the plan's. ZeRO 1-3 map to
    --use-distributed-optimizer (3 with a warning: parameters stay replicated); the deadline to
    --exit-duration-in-mins (Megatron saves and exits before it).

    A batch ramp becomes --step-batch-size-schedule "0:B0 T1:B1 ..." (from T tokens on, B
    sequences): Megatron-LM main's StepBatchsizeNumMicroBatchesCalculator, since core_r0.16's
    linear --rampup-batch-size cannot hold stages. It excludes --global-batch-size and needs
    sample-based training: --train-samples and --lr-warmup-samples replace the -iters flags."""
    args: list[tuple[str, str | None]] = [
        *model_arguments(spec),
        ("--tensor-model-parallel-size", str(spec.tensor_parallel)),
        ("--pipeline-model-parallel-size", str(spec.pipeline_parallel)),
        *pipeline_arguments(spec),
        *parallel_arguments(spec),
        ("--micro-batch-size", str(spec.micro_batch)),
    ]
    ramp = bool(spec.batch_stages)
    if ramp:
        args += [("--step-batch-size-schedule", spec.schedule_text()), ("--seq-length", str(spec.seq_len)),
                 ("--train-samples", str(spec.total_sequences))]
    else:
        args += [("--global-batch-size", str(spec.global_batch_sequences)), ("--seq-length", str(spec.seq_len)),
                 ("--train-iters", str(spec.steps))]
    lr = fmt_lr(spec)
    if lr is not None:
        if ramp:  # warmup steps in samples of the stages they fall in
            left, samples = spec.warmup_steps, 0
            for st in spec.batch_stages:
                take = min(left, st.steps)
                samples += take * st.sequences
                left -= take
            warmup = ("--lr-warmup-samples", str(samples))
        else:
            warmup = ("--lr-warmup-iters", str(spec.warmup_steps))
        args += [("--lr", lr), warmup, ("--lr-decay-style", "constant")]
    args.append((f"--{spec.precision}", None))
    if spec.zero_stage >= 1:
        args.append(("--use-distributed-optimizer", None))
    if spec.time_limit_s is not None:
        args.append(("--exit-duration-in-mins", str(math.ceil(spec.time_limit_s / 60))))
    return args


def render(spec: LaunchSpec) -> str:
    args = arguments(spec)
    context = f" x context {spec.context_parallel}" if spec.context_parallel > 1 else ""
    extra = [f"flags of {MEGATRON_VERSION}; Megatron computes data parallel = "
             f"{spec.gpus} GPUs / (tensor {spec.tensor_parallel} x pipeline {spec.pipeline_parallel}{context}) "
             f"= {spec.data_parallel} and accumulation = global / (micro x data parallel) = {spec.grad_accum}",
             "model shape from the plan; add the data and tokenizer flags, and what the plan does not "
             + ("know (--position-embedding-type, --normalization)" if spec.detailed_shape else
                "know (--ffn-hidden-size, --swiglu, --group-query-attention --num-query-groups, "
                "--position-embedding-type)")]
    if spec.batch_stages:
        extra.append("--step-batch-size-schedule needs Megatron-LM main (StepBatchsizeNumMicroBatches"
                     "Calculator); core_r0.16 has only the linear --rampup-batch-size")
    if spec.zero_stage == 3:
        extra.append("warning: Megatron's distributed optimizer shards optimizer state and gradients "
                     "(ZeRO-2); the plan's ZeRO-3 parameter sharding has no flag here, so parameters "
                     "stay replicated and need more memory than planned")
    lines = [f"    {flag}" + ("" if value is None else f" {sh(value)}") for flag, value in args]
    env = ""
    if spec.tensor_parallel > 1 and (spec.launch.env or {}).get(TP_ENV[0]) is None:
        env = (f"# tensor parallelism {spec.tensor_parallel}: validate_args asserts this before Blackwell\n"
               f"export {TP_ENV[0]}={TP_ENV[1]}\n")
    return ("# shellcheck shell=bash disable=SC2034  # a file to source: MEGATRON_ARGS is used there\n"
            + hash_comments(header(spec, "megatron", USES, extra)) + env
            + "MEGATRON_ARGS=(\n" + "\n".join(lines) + "\n)\n")
