"""`megatron`: Megatron-LM's model-shape, batch, schedule and parallelism arguments, as a bash array.

    source run.megatron.sh && torchrun ... pretrain_gpt.py "${MEGATRON_ARGS[@]}" <data and tokenizer args>

The flags are those of `megatron/training/arguments.py` in Megatron-LM core_r0.16.0 (megatron-core
0.16), listed in FLAGS; with them `validate_args` accepts the file on its own. The model's shape
comes from the plan: --num-layers, --hidden-size, --num-attention-heads (which validate_args
requires; the export refuses a plan that lacks model.layers, model.d_model or model.heads),
--seq-length and --max-position-embeddings equal to it (validate_args: max-position-embeddings ≥
seq-length), --vocab-size when the plan knows it (read by the Null and TikToken tokenizers; other
tokenizers bring their own vocabulary), and the activation recomputation the plan's memory model
assumed (`full`: each layer's input kept, `--recompute-method uniform --recompute-num-layers 1`;
`selective`: attention). What the plan does not know (--ffn-hidden-size, --num-query-groups,
--swiglu, the position embedding) is left to Megatron's defaults and the user.
With tensor parallelism the file also exports CUDA_DEVICE_MAX_CONNECTIONS=1, which validate_args
asserts (spec.TP_ENV). Megatron derives the data-parallel size as world size / (tensor ×
pipeline) and the accumulation as global / (micro × data parallel), which must divide exactly
(`ConstantNumMicroBatchesCalculator`); the export writes the global batch that makes the
accumulation the plan's. ZeRO stage 1 or 2 maps to `--use-distributed-optimizer` (optimizer state
sharded, gradients reduce-scattered); stage 3 too, with a warning that parameters stay replicated.
The deadline becomes `--exit-duration-in-mins` (Megatron saves and exits cleanly before it).

A batch-size ramp (`run.batch_schedule`) becomes `--step-batch-size-schedule "0:B0 T1:B1 ..."`:
from T tokens consumed on, a global batch of B sequences. core_r0.16's calculators are constant or a
linear ramp (`--rampup-batch-size start increment samples`, equal steps at equal sample intervals),
which cannot hold the ramp's stages; the step schedule is Megatron-LM main's
`StepBatchsizeNumMicroBatchesCalculator` (megatron/core/num_microbatches_calculator.py, thresholds
in tokens since it receives --seq-length). It excludes --global-batch-size, and a schedule that
changes the batch needs sample-based training: --train-samples and --lr-warmup-samples replace
--train-iters and --lr-warmup-iters (as for --rampup-batch-size in arguments.py).
"""

from __future__ import annotations

import math

from budgetdsl.exports._text import fmt_lr, hash_comments, header, sh
from budgetdsl.exports.spec import TP_ENV, ExportError, LaunchSpec

MEGATRON_VERSION = "Megatron-LM core_r0.16.0 (megatron-core 0.16)"
USES = frozenset({"optimizer.lr", "budget.deadline"})
MODEL_FLAGS = frozenset({
    "--num-layers", "--hidden-size", "--num-attention-heads", "--max-position-embeddings",
    "--vocab-size", "--recompute-granularity", "--recompute-method", "--recompute-num-layers",
})
FLAGS = MODEL_FLAGS | frozenset({
    "--tensor-model-parallel-size", "--pipeline-model-parallel-size", "--micro-batch-size",
    "--global-batch-size", "--seq-length", "--train-iters", "--lr", "--lr-warmup-iters",
    "--lr-decay-style", "--use-distributed-optimizer", "--exit-duration-in-mins", "--bf16", "--fp16",
})
RAMP_FLAGS = frozenset({"--step-batch-size-schedule", "--train-samples", "--lr-warmup-samples"})
# validate_args' required_args, and the plan keys that give them.
REQUIRED = (("--num-layers", "layers", "model.layers"), ("--hidden-size", "hidden_size", "model.d_model"),
            ("--num-attention-heads", "heads", "model.heads"))


def model_arguments(spec: LaunchSpec) -> list[tuple[str, str | None]]:
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
    if spec.recompute == "full":  # every layer's input kept, the layer recomputed in the backward
        args += [("--recompute-granularity", "full"), ("--recompute-method", "uniform"),
                 ("--recompute-num-layers", "1")]
    elif spec.recompute == "selective":  # attention's core recomputed (Korthikanti et al. 2022)
        args.append(("--recompute-granularity", "selective"))
    return args


def arguments(spec: LaunchSpec) -> list[tuple[str, str | None]]:
    args: list[tuple[str, str | None]] = [
        *model_arguments(spec),
        ("--tensor-model-parallel-size", str(spec.tensor_parallel)),
        ("--pipeline-model-parallel-size", str(spec.pipeline_parallel)),
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
    extra = [f"flags of {MEGATRON_VERSION}; Megatron computes data parallel = "
             f"{spec.gpus} GPUs / (tensor {spec.tensor_parallel} x pipeline {spec.pipeline_parallel}) "
             f"= {spec.data_parallel} and accumulation = global / (micro x data parallel) = {spec.grad_accum}",
             "model shape from the plan; add the data and tokenizer flags, and what the plan does not "
             "know (--ffn-hidden-size, --swiglu, --group-query-attention --num-query-groups, "
             "--position-embedding-type)"]
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
