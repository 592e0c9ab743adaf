"""`deepspeed`: the DeepSpeed config JSON (`deepspeed.initialize(config=...)`, `--deepspeed_config`).

train_batch_size = micro batch × accumulation × data parallel (GPUs / (tensor × pipeline)), which
DeepSpeed asserts at start-up. ZeRO stage from the plan, bf16 (fp16 without bf16), AdamW at the
scaled peak lr with a linear warmup and no decay (the plan declares a peak and a warmup, not a
schedule). JSON has no comments: `budgetdsl export` prints what was defaulted on stderr. Checked
by DeepSpeed's `DeepSpeedConfig`.
"""

from __future__ import annotations

import json

from budgetdsl.exports.spec import ExportError, LaunchSpec, parallel_refusal, recompute_refusal
from budgetdsl.hardware.layout import zero_problem

USES = frozenset({"optimizer.lr"})


def config(spec: LaunchSpec) -> dict:
    cfg: dict = {
        "train_batch_size": spec.global_batch_sequences,
        "train_micro_batch_size_per_gpu": spec.micro_batch,
        "gradient_accumulation_steps": spec.grad_accum,
        spec.precision: {"enabled": True},
        "zero_optimization": {"stage": spec.zero_stage},
    }
    if spec.lr is not None:
        cfg["optimizer"] = {"type": "AdamW", "params": {"lr": spec.lr}}
        cfg["scheduler"] = {"type": "WarmupLR", "params": {
            "warmup_min_lr": 0.0, "warmup_max_lr": spec.lr,
            "warmup_num_steps": spec.warmup_steps, "warmup_type": "linear"}}
    return cfg


def render(spec: LaunchSpec) -> str:
    refusal = parallel_refusal(spec, "deepspeed", "the engine's batch, ZeRO and optimizer (DeepSpeed-MoE's ep_size "
                               "is an argument of the model's MoE layers, not of this file)")
    refusal = refusal or recompute_refusal(spec, "deepspeed", "the engine's batch, ZeRO and optimizer (its "
                                           "activation_checkpointing section checkpoints every layer it wraps)")
    if refusal:
        raise ExportError(refusal)
    problem = zero_problem(spec.zero_stage, spec.pipeline_parallel)
    if problem is not None:  # deepspeed/runtime/pipe/engine.py asserts it at start-up
        raise ExportError(f"{problem}: DeepSpeed's PipelineEngine would stop at start-up. Plan the run with "
                          "hardware.zero: 1 (or auto, which searches 0-1 under a pipeline), or pipeline_parallel: 1")
    return json.dumps(config(spec), indent=2) + "\n"
