"""The plan's `launch:` section: what an export needs that the plan cannot infer.

Every string here ends up in a shell script or a manifest, and the plan file is untrusted. The
exports quote everything they write (shell quoting, YAML and JSON strings); this model in addition
rejects, at load time with the file's line and column, values that no scheduler accepts anyway:
an image reference with spaces, a partition with a quote, an environment variable name that is
not one, or one that the launchers themselves set (RANK, MASTER_ADDR, PET_*, ...).
"""

# No `from __future__ import annotations`: see budgetdsl.plan.model.
import re

from pydantic import BaseModel, ConfigDict, Field, field_validator
from pydantic_core import PydanticCustomError

# OCI image reference: [registry[:port]/]path[:tag][@digest] — letters, digits and . _ - / : @ +
_IMAGE = r"[A-Za-z0-9][A-Za-z0-9._/:@+-]*"
_SLURM_NAME = r"[A-Za-z0-9_.-]+(,[A-Za-z0-9_.-]+)*"  # partition lists are comma-separated
_ENV_NAME = r"[A-Za-z_][A-Za-z0-9_]*"
_DNS1123_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_SUBDOMAIN = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*"
_ACCELERATOR = r"[A-Za-z0-9][A-Za-z0-9._-]*"
_RESOURCE = r"[a-z0-9]([-a-z0-9.]*[a-z0-9])?/[a-z0-9]([-a-z0-9._]*[a-z0-9])?"
_PATH = r"[A-Za-z0-9_./@+=,-]+"

# Set by torchrun, Slurm, SkyPilot, the Kubeflow operators or the export itself: a plan must not.
RESERVED_ENV = frozenset({"RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK",
                          "ROLE_RANK", "MASTER_ADDR", "MASTER_PORT", "NODE_RANK"})
TORCHRUN_PROGRAM_FLAGS = frozenset({"-m", "--module", "--no-python"})  # say how to run the program
RESERVED_ENV_PREFIXES = ("BUDGETDSL_", "PET_", "SLURM_", "SKYPILOT_", "TORCHELASTIC_")


def _rule(message: str, path: str = "") -> PydanticCustomError:
    return PydanticCustomError("plan_rule", message, {"path": path})


def _check(pattern: str, value: str | None, what: str) -> str | None:
    if value is not None and not re.fullmatch(pattern, value):  # compiled on first use (re's cache)
        raise _rule(f"{value!r} is not {what}")
    return value


class Launch(BaseModel):
    """Where and how the run is launched; each export says which defaults it used."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    image: str | None = Field(None, description="Container image for Kubernetes and SkyPilot, "
                              "e.g. 'nvcr.io/nvidia/pytorch:24.05-py3'. Default: that image.",
                              max_length=500)
    command: list[str] | None = Field(None, description="The training program and its arguments, "
                                      "as a list (never a shell string), e.g. ['train.py', "
                                      "'--config', 'cfg.yaml']; torchrun starts it on every GPU. "
                                      "Default: ['train.py'].", min_length=1, max_length=200)
    partition: str | None = Field(None, description="Slurm partition (or a comma-separated list). "
                                  "Default: the cluster's default partition.", max_length=200)
    account: str | None = Field(None, description="Slurm account. Default: the user's default "
                                "account.", max_length=200)
    env: dict[str, str] | None = Field(None, description="Environment variables for the job. "
                                       "Names that torchrun, Slurm, SkyPilot or Kubeflow set "
                                       "(RANK, MASTER_ADDR, PET_*, SLURM_*, ...) are refused.")
    rdzv_port: int = Field(29500, description="TCP port of the torchrun rendezvous on the first "
                           "node (Slurm, torchrun and SkyPilot exports).", ge=1024, le=65535)
    namespace: str | None = Field(None, description="Kubernetes namespace of the Kubeflow "
                                  "manifests. Default: none written, so kubectl's context decides.",
                                  max_length=63)
    runtime: str | None = Field(None, description="Kubeflow Trainer v2 ClusterTrainingRuntime that "
                                "the TrainJob references. Default: 'torch-distributed'.",
                                max_length=253)
    accelerator: str | None = Field(None, description="The GPU in SkyPilot's vocabulary, e.g. "
                                    "'H100' (see `sky show-gpus`). Default: derived from "
                                    "hardware.gpu.", max_length=100)
    gpu_resource: str | None = Field(None, description="Kubernetes extended resource of one GPU. "
                                     "Default: 'nvidia.com/gpu' ('amd.com/gpu' for AMD presets).",
                                     max_length=253)
    output_dir: str | None = Field(None, description="Where the trainer writes checkpoints (the "
                                   "Hugging Face export's output_dir). Default: "
                                   "'checkpoints/<run name>'.", max_length=1000)

    @field_validator("image")
    @classmethod
    def _image(cls, v: str | None) -> str | None:
        return _check(_IMAGE, v, "a container image reference (registry/path:tag)")

    @field_validator("partition", "account")
    @classmethod
    def _slurm(cls, v: str | None) -> str | None:
        return _check(_SLURM_NAME, v, "a Slurm name (letters, digits, '_', '.', '-')")

    @field_validator("namespace")
    @classmethod
    def _namespace(cls, v: str | None) -> str | None:
        return _check(_DNS1123_LABEL, v, "a Kubernetes namespace (a DNS-1123 label: lower-case "
                      "letters, digits and '-')")

    @field_validator("runtime")
    @classmethod
    def _runtime(cls, v: str | None) -> str | None:
        return _check(_DNS1123_SUBDOMAIN, v, "a Kubernetes object name (DNS-1123 subdomain)")

    @field_validator("accelerator")
    @classmethod
    def _accelerator(cls, v: str | None) -> str | None:
        return _check(_ACCELERATOR, v, "an accelerator name such as 'H100' or 'A100-80GB'")

    @field_validator("gpu_resource")
    @classmethod
    def _resource(cls, v: str | None) -> str | None:
        return _check(_RESOURCE, v, "a Kubernetes extended resource name such as 'nvidia.com/gpu'")

    @field_validator("output_dir")
    @classmethod
    def _output_dir(cls, v: str | None) -> str | None:
        return _check(_PATH, v, "a path of letters, digits and _ . / @ + = , -")

    @field_validator("command")
    @classmethod
    def _command(cls, v: list[str] | None) -> list[str] | None:
        if v is not None:
            if not v[0].strip():
                raise _rule("the command's first word must name the training program")
            if v[0].startswith("-") and v[0] not in TORCHRUN_PROGRAM_FLAGS:
                raise _rule(f"the command's first word {v[0]!r} would be read as a torchrun option; "
                            "name the training program (or start with -m MODULE or --no-python)", "0")
            for i, arg in enumerate(v):
                if "\x00" in arg:
                    raise _rule("a command argument cannot contain a NUL character", str(i))
        return v

    @field_validator("env")
    @classmethod
    def _env(cls, v: dict[str, str] | None) -> dict[str, str] | None:
        for name, value in (v or {}).items():
            if not re.fullmatch(_ENV_NAME, name):
                raise _rule(f"{name!r} is not an environment variable name "
                            "(letters, digits and '_', not starting with a digit)", name)
            if name in RESERVED_ENV or name.startswith(RESERVED_ENV_PREFIXES):
                raise _rule(f"{name} is set by the launcher (torchrun, Slurm, SkyPilot, Kubeflow or "
                            "budgetdsl) and cannot be set in launch.env", name)
            if "\x00" in value:
                raise _rule(f"the value of {name} cannot contain a NUL character", name)
        return v
