"""Launch configs for cluster schedulers: one module per format, each a pure `LaunchSpec -> str`.

    spec = launch_spec(plan, solution)          # budgetdsl.exports.spec: the only adapter
    text = export(spec, "slurm")                # or any name in FORMATS

Each format defines `render(spec) -> str` and `USES`, the plan keys whose defaults it reports.
FORMATS is the one list of formats (the CLI, the README and the tests read it); nothing heavy is
imported until a format is used, so registering the `export` command costs nothing at start-up.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from importlib import import_module
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from budgetdsl.exports.spec import LaunchSpec

__all__ = ["FORMATS", "Format", "export"]


@dataclass(frozen=True, slots=True)
class Format:
    name: str
    module: str  # budgetdsl.exports.<module>
    suffix: str  # of the file a user would save it as
    summary: str

    @property
    def render(self) -> Callable[[LaunchSpec], str]:
        return import_module(f"budgetdsl.exports.{self.module}").render

    @property
    def uses(self) -> frozenset[str]:
        return import_module(f"budgetdsl.exports.{self.module}").USES


FORMATS: dict[str, Format] = {f.name: f for f in (
    Format("slurm", "slurm", ".sbatch", "sbatch script: srun torchrun, c10d rendezvous on the first node"),
    Format("torchrun", "torchrun", ".sh", "the torchrun command line"),
    Format("kubeflow", "kubeflow", ".yaml", "Kubeflow Trainer v2 TrainJob (trainer.kubeflow.org/v1alpha1)"),
    Format("pytorchjob", "pytorchjob", ".yaml", "Kubeflow Training Operator v1 PyTorchJob (kubeflow.org/v1)"),
    Format("skypilot", "skypilot", ".yaml", "SkyPilot task YAML"),
    Format("deepspeed", "deepspeed", ".json", "DeepSpeed config JSON"),
    Format("hf", "hf", ".json", "Hugging Face TrainingArguments JSON"),
    Format("megatron", "megatron", ".sh", "Megatron-LM batch, schedule and parallelism arguments"),
)}


def export(spec: LaunchSpec, fmt: str) -> str:
    """The launch config of `spec` in format `fmt`. Raises ExportError when the format cannot carry
    the run (e.g. tensor parallelism for the HF Trainer, a TPU plan for every format), KeyError for
    an unknown format."""
    render = FORMATS[fmt].render
    if spec.tpu is not None:  # one refusal, the same in every format (spec.tpu_refusal)
        from budgetdsl.exports.spec import ExportError, tpu_refusal

        raise ExportError(tpu_refusal(spec, fmt))
    return render(spec)


#: Formats whose file has no place for a batch-size schedule (strict JSON keys, no comments).
NO_SCHEDULE = frozenset({"deepspeed", "hf"})


def schedule_warning(spec: LaunchSpec, fmt: str) -> str | None:
    """What a user must know when `fmt` cannot carry the plan's batch schedule."""
    if not spec.batch_stages or fmt not in NO_SCHEDULE:
        return None
    return (f"the {fmt} config holds one global batch ({spec.global_batch_sequences} sequences); it cannot "
            f"carry the plan's {len(spec.batch_stages)}-stage batch schedule (from tokens: sequences "
            f"{spec.schedule_text()}): apply it in the training program, or export megatron")
