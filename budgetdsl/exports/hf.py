"""`hf`: Hugging Face `TrainingArguments` as JSON (`HfArgumentParser.parse_json_file`).

per_device_train_batch_size × gradient_accumulation_steps × GPUs is the global batch: the HF
Trainer makes every GPU a data-parallel replica, so a plan with tensor or pipeline parallelism is
refused (export `megatron` or `deepspeed`). max_steps, learning_rate (the scaled peak),
warmup_steps and a constant schedule after the warmup; bf16 (fp16 on parts without bf16).
Only keys TrainingArguments defines: the tests parse with allow_extra_keys=False.
"""

from __future__ import annotations

import json

from budgetdsl.exports._text import dns1035
from budgetdsl.exports.spec import ExportError, LaunchSpec, parallel_refusal, recompute_refusal

USES = frozenset({"optimizer.lr", "launch.output_dir"})


def arguments(spec: LaunchSpec) -> dict:
    refusal = parallel_refusal(spec, "Hugging Face", "TrainingArguments (data-parallel replicas only)") or \
        recompute_refusal(spec, "Hugging Face", "TrainingArguments (gradient_checkpointing: every layer or none)")
    if refusal:
        raise ExportError(refusal)
    if spec.tensor_parallel * spec.pipeline_parallel != 1:
        raise ExportError(f"the Hugging Face Trainer has no tensor or pipeline parallelism (the plan "
                          f"has tensor {spec.tensor_parallel} × pipeline {spec.pipeline_parallel}); "
                          "export megatron or deepspeed instead")
    args: dict = {
        "output_dir": spec.launch.output_dir or f"checkpoints/{dns1035(spec.name)}",
        "run_name": spec.name,
        "per_device_train_batch_size": spec.micro_batch,
        "gradient_accumulation_steps": spec.grad_accum,
        "max_steps": spec.steps,
        "warmup_steps": spec.warmup_steps,
        "lr_scheduler_type": "constant_with_warmup",
        spec.precision: True,
    }
    if spec.lr is not None:
        args["learning_rate"] = spec.lr
    return args


def render(spec: LaunchSpec) -> str:
    from budgetdsl.io.terminal_text import json_text  # C1 and bidi controls of a name as \u escapes

    return json_text(json.dumps(arguments(spec), indent=2, ensure_ascii=False)) + "\n"
