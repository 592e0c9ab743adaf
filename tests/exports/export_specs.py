"""Hand-built LaunchSpecs: the formats are tested on these, independent of the solver."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from budgetdsl.exports.spec import Defaulted, LaunchSpec
from budgetdsl.plan.launch import Launch


def make_spec(**overrides: Any) -> LaunchSpec:
    """One node of 2 GPUs, pure data parallelism: the shape the real Slurm run uses."""
    launch = overrides.pop("launch", None) or Launch(image="ghcr.io/acme/trainer:1.4",
                                                     command=["train.py", "--config", "cfg.yaml"],
                                                     partition="local", env={"NCCL_DEBUG": "WARN"})
    base = LaunchSpec(
        name="tiny-run", nodes=1, gpus_per_node=2, tensor_parallel=1, pipeline_parallel=1,
        data_parallel=2, micro_batch=2, grad_accum=3, seq_len=128, steps=5, lr=0.01, warmup_steps=1,
        time_limit_s=600, zero_stage=0, launch=launch.model_copy(update={"runtime": "torch-distributed"}),
        accelerator="A100-80GB", lr_derivation="lr 0.01 = 0.01 tuned at B0 = 1,536 tokens, none",
        layers=4, hidden_size=256, heads=8, vocab=50304)
    return replace(base, **overrides)


def multi_node() -> LaunchSpec:
    """16 nodes of 8 GPUs with tensor and pipeline parallelism, ZeRO-1 and selective recomputation
    (Llama 2 13B's shape), defaults reported."""
    launch = Launch(image="nvcr.io/nvidia/pytorch:24.05-py3", command=["train.py"],
                    runtime="torch-distributed")
    return LaunchSpec(
        name="llama-13b-h100", nodes=16, gpus_per_node=8, tensor_parallel=2, pipeline_parallel=2,
        data_parallel=32, micro_batch=1, grad_accum=16, seq_len=4096, steps=238419, lr=0.00021213203435596425,
        warmup_steps=2000, time_limit_s=21 * 86400 + 3723, zero_stage=1, launch=launch,
        accelerator="H100", lr_derivation="lr 0.000212 = 0.0003 tuned at B0 = 4,194,304 tokens, sqrt "
        "x sqrt(B/B0) (Adam), B = 2,097,152 tokens (B/B0 = 0.5)",
        defaulted=(Defaulted("launch.image", "nvcr.io/nvidia/pytorch:24.05-py3", "NGC PyTorch"),
                   Defaulted("launch.command", "train.py", "a stand-in for the training program"),
                   Defaulted("launch.partition", "the cluster's default partition", "not set")),
        warnings=("the global batch exceeds B_crit",),
        layers=40, hidden_size=5120, heads=40, vocab=32000, recompute="selective")


def minimal() -> LaunchSpec:
    """No optimizer section, no deadline, ZeRO-3, one GPU, no model shape (Megatron refuses it)."""
    return LaunchSpec(
        name="Smoke Test #1", nodes=1, gpus_per_node=1, tensor_parallel=1, pipeline_parallel=1,
        data_parallel=1, micro_batch=4, grad_accum=1, seq_len=512, steps=100, lr=None, warmup_steps=0,
        time_limit_s=None, zero_stage=3,
        launch=Launch(image="python:3.11", command=["-m", "trainer"], runtime="torch-distributed"),
        accelerator=None, precision="fp16",
        defaulted=(Defaulted("optimizer.lr", "the training program's own", "no optimizer section"),))


def tpu() -> LaunchSpec:
    """A TPU v4 run (chips as the adapter reports them for hardware.gpu: TPU-v4): every format refuses it."""
    return replace(multi_node(), name="chinchilla-70b", nodes=256, gpus_per_node=4, tensor_parallel=4,
                   pipeline_parallel=1, data_parallel=256, accelerator=None, tpu="TPU-v4",
                   layers=80, hidden_size=8192, heads=64, recompute="full")


CASES = {"single-node": make_spec(), "multi-node": multi_node(), "minimal": minimal()}
