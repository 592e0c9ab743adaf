"""Issue 11 item 5: the Megatron export carries the model's shape, every launch format sets
CUDA_DEVICE_MAX_CONNECTIONS=1 with tensor parallelism, and a TPU plan is refused alike by all.

How the Megatron flags are checked (export_validators.validate_megatron, on every hand-built spec and
every example plan): Megatron-LM's parser lives in megatron/training/arguments.py, which the
megatron-core wheel (and its sdist) does not ship and no package index serves, so CI cannot run it.
The validator asserts what `validate_args` (core_r0.16.0) asserts of the flags the export writes —
required num-layers / hidden-size / num-attention-heads / max-position-embeddings, world size
divisible by tensor × pipeline, layers divisible by the pipeline size, hidden divisible by heads,
max-position-embeddings ≥ seq-length, one of bf16/fp16, iteration- or sample-based options not
mixed, CUDA_DEVICE_MAX_CONNECTIONS=1 exported with tensor parallelism — and hands the rest to
megatron-core's own code: `ConstantNumMicroBatchesCalculator` (global = micro × dp × accumulation)
and `TransformerConfig` (heads divisible by tensor parallelism, the recompute combination), which
Megatron-LM builds from the same arguments. Where megatron.training is importable (a Megatron-LM
checkout on PYTHONPATH), `test_megatron_lm_validate_args` runs Megatron-LM's real parse_args and
validate_args on the export, and skips elsewhere.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
import yaml
from export_specs import make_spec, minimal, multi_node, tpu
from export_validators import (
    check_megatron_invariants,
    megatron_args,
    megatron_lm_validate_args,
    megatron_source,
    validate,
)

from budgetdsl.exports import FORMATS, export
from budgetdsl.exports.spec import ExportError, launch_spec
from budgetdsl.plan.launch import Launch
from budgetdsl.plan.loader import load_plan

REPO = Path(__file__).resolve().parents[2]
TPU_PLAN = REPO / "plans" / "chinchilla-70b.yaml"
LAUNCHERS = ["slurm", "torchrun", "kubeflow", "pytorchjob", "skypilot", "megatron"]  # start processes
FULL_RECOMPUTE = replace(multi_node(), recompute="full")


# -- the model's shape ---------------------------------------------------------------------------

def test_plan_shape_reaches_the_flags(tmp_path) -> None:
    from budgetdsl.solve.solver import solve

    plan = load_plan(REPO / "plans" / "gpt3-175b.yaml")  # 96 layers, 12288 wide, 96 heads, full recompute
    spec = launch_spec(plan, solve(plan))
    args = megatron_args(export(spec, "megatron"))
    m = plan.model
    assert (args["--num-layers"], args["--hidden-size"], args["--num-attention-heads"]) == \
        (str(m.layers), str(m.d_model), str(m.heads))
    assert args["--seq-length"] == args["--max-position-embeddings"] == str(m.seq_len)
    assert args["--vocab-size"] == str(m.vocab)
    assert (args["--recompute-granularity"], args["--recompute-method"], args["--recompute-num-layers"]) \
        == ("full", "uniform", "1")


def test_full_recompute_validates(tmp_path, monkeypatch) -> None:
    validate("megatron", export(FULL_RECOMPUTE, "megatron"), FULL_RECOMPUTE, tmp_path, monkeypatch)


def test_refused_without_the_shape() -> None:
    with pytest.raises(ExportError, match=r"requires the model's shape \(--num-attention-heads\): set "
                                          r"model.heads in the plan"):
        export(replace(make_spec(), heads=None), "megatron")
    with pytest.raises(ExportError, match="model.layers, model.d_model, model.heads"):
        export(minimal(), "megatron")


def _args_text(text: str, flag: str, value: str | None) -> str:
    """The export with `flag`'s value replaced (None: the flag removed)."""
    lines = [line for line in text.splitlines() if not line.strip().startswith(flag + " ")]
    if value is not None:
        lines.insert(lines.index("MEGATRON_ARGS=(") + 1, f"    {flag} {value}")
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize(("flag", "value", "message"), [
    ("--num-layers", None, "--num-layers missing"),
    ("--max-position-embeddings", "2048", "max_position_embeddings must be >= seq_length"),
    ("--num-layers", "41", "layers not divisible"),
    ("--num-attention-heads", "41", "kv_channels"),  # hidden size not divisible by heads
    ("--recompute-method", "uniform", "selective recompute takes no method"),
])
def test_invariants_catch_a_broken_export(flag: str, value: str | None, message: str) -> None:
    spec = multi_node()
    text = _args_text(export(spec, "megatron"), flag, value)
    words_env = megatron_source(text)[1]
    with pytest.raises((AssertionError, ValueError), match=message):
        check_megatron_invariants(megatron_args(text), words_env, spec.gpus)


def test_megatron_core_checks_heads_against_tensor_parallelism() -> None:
    spec = multi_node()  # 40 heads; tensor parallel 3 would leave a remainder
    text = export(spec, "megatron").replace("--tensor-model-parallel-size 2",
                                            "--tensor-model-parallel-size 3")
    pytest.importorskip("megatron.core")
    with pytest.raises(ValueError, match="num_attention_heads"):
        check_megatron_invariants(megatron_args(text), {"CUDA_DEVICE_MAX_CONNECTIONS": "1"}, 120)


@pytest.mark.parametrize("spec", [make_spec(), multi_node(), FULL_RECOMPUTE],
                         ids=["single-node", "multi-node", "full-recompute"])
def test_megatron_lm_validate_args(spec, monkeypatch) -> None:
    args = megatron_lm_validate_args(export(spec, "megatron"), spec.gpus, monkeypatch)
    assert args.data_parallel_size == spec.data_parallel
    assert args.global_batch_size == spec.global_batch_sequences
    assert args.num_layers == spec.layers and args.encoder_num_layers == spec.layers


def test_megatron_lm_refuses_tensor_parallelism_without_the_variable(monkeypatch) -> None:
    spec = multi_node()
    text = export(spec, "megatron").replace("export CUDA_DEVICE_MAX_CONNECTIONS=1\n", "")
    with pytest.raises(AssertionError, match="CUDA_DEVICE_MAX_CONNECTIONS"):
        megatron_lm_validate_args(text, spec.gpus, monkeypatch)


# -- CUDA_DEVICE_MAX_CONNECTIONS=1 with tensor parallelism -----------------------------------------

def _fake_bin(tmp: Path, name: str) -> None:
    path = tmp / "bin" / name
    path.parent.mkdir(exist_ok=True)
    body = {"srun": 'env -0 > "$ENV_OUT"\n', "torchrun": 'env -0 > "$ENV_OUT"\n',
            "scontrol": "echo node-0\n"}[name]
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IEXEC)


def _run_script(text: str, tmp: Path) -> dict[str, str]:
    """Run a slurm or torchrun export with stand-in srun/scontrol/torchrun that record the
    environment the training processes would start with."""
    for name in ("srun", "scontrol", "torchrun"):
        _fake_bin(tmp, name)
    script, out = tmp / "job.sh", tmp / "env.out"
    script.write_text(text)
    env = {"PATH": f"{tmp / 'bin'}:{os.environ['PATH']}", "ENV_OUT": str(out), "MASTER_ADDR": "10.0.0.1",
           "SLURM_JOB_NODELIST": "node-0", "SLURM_CPUS_ON_NODE": "8", "SLURM_JOB_ID": "1"}
    done = subprocess.run(["bash", str(script)], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return dict(e.split("=", 1) for e in out.read_text().split("\0") if "=" in e)


def launched_env(fmt: str, text: str, tmp: Path) -> list[dict[str, str]]:
    """The environment of the processes each format starts, as its tool would set it."""
    if fmt in ("slurm", "torchrun"):
        return [_run_script(text, tmp)]
    if fmt == "megatron":
        return [megatron_source(text)[1]]
    doc = yaml.safe_load(text)
    if fmt == "skypilot":
        return [{k: str(v) for k, v in doc["envs"].items()}]
    if fmt == "kubeflow":
        return [{e["name"]: e["value"] for e in doc["spec"]["trainer"]["env"]}]
    return [{e["name"]: e["value"] for e in r["template"]["spec"]["containers"][0]["env"]}
            for r in doc["spec"]["pytorchReplicaSpecs"].values()]


@pytest.mark.parametrize("fmt", LAUNCHERS)
def test_tensor_parallel_sets_cuda_device_max_connections(fmt: str, tmp_path) -> None:
    tp2, tp1 = multi_node(), replace(make_spec(), launch=Launch(image="python:3.11", command=["train.py"],
                                                                 runtime="torch-distributed"))
    assert tp2.tensor_parallel == 2 and tp1.tensor_parallel == 1
    for env in launched_env(fmt, export(tp2, fmt), tmp_path):
        assert env.get("CUDA_DEVICE_MAX_CONNECTIONS") == "1", fmt
    for env in launched_env(fmt, export(tp1, fmt), tmp_path):
        assert "CUDA_DEVICE_MAX_CONNECTIONS" not in env, fmt


@pytest.mark.parametrize("fmt", [f for f in LAUNCHERS if f != "megatron"])
def test_launch_env_value_wins_and_is_not_doubled(fmt: str, tmp_path) -> None:
    spec = replace(multi_node(), launch=multi_node().launch.model_copy(
        update={"env": {"CUDA_DEVICE_MAX_CONNECTIONS": "32"}}))
    text = export(spec, fmt)
    envs = launched_env(fmt, text, tmp_path)
    assert text.count("CUDA_DEVICE_MAX_CONNECTIONS") == len(envs), text  # once per container/script
    for env in envs:
        assert env["CUDA_DEVICE_MAX_CONNECTIONS"] == "32"


def test_launch_env_override_warns(tmp_path) -> None:
    from budgetdsl.solve.solver import solve

    plan_path = tmp_path / "p.yaml"
    plan_path.write_text(f"extends: {REPO / 'plans' / 'llama2-70b.yaml'}\n"
                         "launch:\n  env: {CUDA_DEVICE_MAX_CONNECTIONS: '8'}\n")
    plan = load_plan(plan_path)
    spec = launch_spec(plan, solve(plan))
    assert spec.tensor_parallel > 1
    assert any("CUDA_DEVICE_MAX_CONNECTIONS=8" in w for w in spec.warnings)


# -- TPU plans -----------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def tpu_plan_spec():
    from budgetdsl.solve.solver import solve

    plan = load_plan(TPU_PLAN)
    assert plan.hardware.gpu.startswith("TPU")
    return launch_spec(plan, solve(plan))


@pytest.mark.parametrize("fmt", list(FORMATS))
def test_tpu_plan_refused_alike_by_every_format(fmt: str, tpu_plan_spec) -> None:
    messages = {}
    for name, spec in (("plan", tpu_plan_spec), ("hand-built", tpu())):
        with pytest.raises(ExportError) as info:
            export(spec, fmt)
        messages[name] = str(info.value).replace(f"the {fmt} export", "the FORMAT export")
    assert messages["plan"] == messages["hand-built"]
    assert messages["plan"] == (
        "plan 'chinchilla-70b' runs on TPU-v4 chips (hardware.gpu), and the FORMAT export launches "
        "PyTorch on NVIDIA or AMD GPUs (torchrun, NCCL, CUDA images, GPU resources): no export format "
        "has a TPU form. To export, plan the run on a GPU preset (e.g. hardware.gpu: H100-SXM5-80GB); "
        "launch a TPU run with TPU tooling (JAX or torch_xla on a TPU VM or a GKE TPU node pool)")


def test_tpu_plan_cli_exits_2_and_writes_nothing(tmp_path) -> None:
    out = tmp_path / "job.yaml"
    done = subprocess.run([sys.executable, "-m", "budgetdsl", "export", str(TPU_PLAN), "--to", "kubeflow",
                           "-o", str(out)], capture_output=True, text=True, timeout=120, cwd=REPO)
    assert done.returncode == 2, done.stderr
    assert not out.exists() and done.stdout == ""
    assert "error[export]: plan 'chinchilla-70b' runs on TPU-v4 chips" in done.stderr
    assert "nvidia.com/gpu" not in done.stderr


def test_gpu_plan_with_the_same_shape_exports(tmp_path) -> None:
    """The refusal's advice works: the TPU plan on a GPU preset exports to every format it can carry."""
    from budgetdsl.solve.solver import solve

    path = tmp_path / "gpu.yaml"
    path.write_text(f"extends: {TPU_PLAN}\nhardware:\n  gpu: H100-SXM5-80GB\n  gpus_per_node: 8\n")
    plan = load_plan(path)
    solution = solve(plan)
    if not solution.feasible:
        pytest.skip("the GPU variant is infeasible under the TPU plan's budget")
    spec = launch_spec(plan, solution)
    assert spec.tpu is None and spec.accelerator == "H100"
    export(spec, "skypilot")
    export(spec, "megatron")


# -- multi-latent attention and DeepSeek-style routing (issue 24 items 1-2) ----------------------

MLA_PLAN = """\
name: mla-moe
model: {layers: 8, d_model: 1024, heads: 8, vocab: 32000, seq_len: 4096, mlp: swiglu, ffn_hidden: 2816,
        tied_embeddings: false, attention: mla, q_lora_rank: 384, kv_lora_rank: 256, qk_nope_head_dim: 64,
        qk_rope_head_dim: 32, v_head_dim: 64, experts: 16, experts_per_token: 4, expert_ffn_hidden: 512,
        shared_experts: 1, dense_layers: 1, expert_groups: 4, expert_groups_per_token: 2}
hardware: {gpu: H800-SXM5-80GB, gpus: 16, tensor_parallel: 1, pipeline_parallel: 1, expert_parallel: 8,
           zero: 1, recompute: selective, expert_dispatch: deepep, expert_overlap: true}
target: {tokens: 10B, at_batch: 4M}
noise: {b_crit: 4M}
"""


def test_mla_and_deepseek_routing_reach_megatrons_flags(tmp_path, monkeypatch) -> None:
    """MLA's dimensions as Megatron-Core's MLA arguments (--qk-head-dim is the part without RoPE),
    group-limited routing, the flex dispatcher's DeepEP backend and the EP all-to-all overlap; the
    export passes the validator and megatron-core's MLATransformerConfig."""
    from budgetdsl.solve.solver import solve

    path = tmp_path / "mla.yaml"
    path.write_text(MLA_PLAN)
    plan = load_plan(path)
    spec = launch_spec(plan, solve(plan))
    text = export(spec, "megatron")
    args = megatron_args(text)
    assert "--multi-latent-attention" in args and "--group-query-attention" not in args
    assert (args["--q-lora-rank"], args["--kv-lora-rank"], args["--qk-head-dim"], args["--qk-pos-emb-head-dim"],
            args["--v-head-dim"]) == ("384", "256", "64", "32", "64")
    assert (args["--moe-router-num-groups"], args["--moe-router-group-topk"]) == ("4", "2")
    assert (args["--moe-token-dispatcher-type"], args["--moe-flex-dispatcher-backend"]) == ("flex", "deepep")
    assert "--overlap-moe-expert-parallel-comm" in args
    validate("megatron", text, spec, tmp_path, monkeypatch)


def test_the_ep_overlap_megatron_refuses_is_refused() -> None:
    """Megatron-Core's --overlap-moe-expert-parallel-comm refuses full recomputation, and a pipeline
    without interleaving: the export says so instead of writing flags validate_args rejects."""
    from budgetdsl.solve.solver import solve

    plan = _mla_plan(recompute="full")
    with pytest.raises(ExportError, match="refuses that"):
        export(launch_spec(plan, solve(plan)), "megatron")
    # block recomputation of some layers is full recomputation there too; of none, it is not
    for layers, refused in ((2, True), (1, True), (0, False)):
        plan = _mla_plan(recompute="full", recompute_layers=layers)
        spec = launch_spec(plan, solve(plan))
        if refused:
            with pytest.raises(ExportError, match="under full recomputation"):
                export(spec, "megatron")
        else:
            assert "--overlap-moe-expert-parallel-comm" in megatron_args(export(spec, "megatron"))


def _mla_plan(**hardware):
    import yaml

    from budgetdsl.plan.model import Plan

    doc = yaml.safe_load(MLA_PLAN)
    doc["hardware"].update(hardware)
    doc["target"] = {"tokens": 1e10, "at_batch": 4e6}
    doc["noise"] = {"b_crit": 4e6}
    return Plan.model_validate(doc)


def test_the_header_divides_the_gpus_by_context_parallelism_too() -> None:
    """The comment that explains Megatron's own arithmetic names every degree it divides the GPUs
    by: with context parallelism 2, 128 GPUs / (2 × 2 × 2) = 16 replicas, as `--context-parallel-size`
    tells Megatron (a header without the context factor would explain a data-parallel degree of 32)."""
    spec = replace(multi_node(), context_parallel=2, data_parallel=16)
    text = export(spec, "megatron")
    assert "data parallel = 128 GPUs / (tensor 2 x pipeline 2 x context 2) = 16" in text
    assert megatron_args(text)["--context-parallel-size"] == "2"
    assert "x context" not in export(multi_node(), "megatron")


@pytest.mark.parametrize(("split", "refused"), [((9, 10, 11, 10), True), ((9, 11, 10, 10), True),
                                                ((9, 10, 10, 11), False), ((11, 10, 10, 9), False)])
def test_megatron_carries_an_uneven_split_only_at_its_ends(split, refused) -> None:
    """Megatron-Core's uneven pipeline sets the first and the last stage's layers and shares the
    rest evenly: a split whose middle stages differ — wherever the odd one stands — is refused;
    one that differs only at the ends becomes the two flags."""
    spec = replace(multi_node(), pipeline_parallel=4, data_parallel=16, stage_layers=split)
    if refused:
        with pytest.raises(ExportError, match="unequal middle stages"):
            export(spec, "megatron")
    else:
        args = megatron_args(export(spec, "megatron"))
        assert (args["--decoder-first-pipeline-num-layers"], args["--decoder-last-pipeline-num-layers"]) == \
            (str(split[0]), str(split[-1]))
