"""The plan's `launch:` section: what an export needs that the plan cannot infer.

Every string here ends up in a shell script or a manifest, and the plan file is untrusted, so the
exports quote or reject; this model only bounds and types the values.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class Launch(BaseModel):
    """Where and how the run is launched; each export says which defaults it used."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    image: str | None = Field(None, description="Container image for Kubernetes and SkyPilot, "
                              "e.g. 'nvcr.io/nvidia/pytorch:24.05-py3'.", max_length=500)
    command: list[str] | None = Field(None, description="The training program and its arguments, "
                                      "as a list (never a shell string), e.g. ['train.py', "
                                      "'--config', 'cfg.yaml'].", max_length=200)
    partition: str | None = Field(None, description="Slurm partition.", max_length=200)
    account: str | None = Field(None, description="Slurm account.", max_length=200)
    env: dict[str, str] | None = Field(None, description="Environment variables for the job.")
