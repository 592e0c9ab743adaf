"""Each export format checked by the tool that will read it: `VALIDATORS[fmt](text, spec)`.

Every validator raises (AssertionError or the tool's own error) on a bad export, and skips — or
under CI fails — when its tool is missing. The per-format tests and the end-to-end test over
plans/ call the same functions; each validator also has a negative test proving it can fail.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml

from budgetdsl.exports.spec import LaunchSpec

REPO = Path(__file__).resolve().parents[2]
KUBEFLOW_SCHEMAS = REPO / "tests" / "fixtures" / "kubeflow"  # vendored: see its README.md
TRAINJOB_CRD = KUBEFLOW_SCHEMAS / "trainer.kubeflow.org_trainjobs-v2.3.0.yaml"
PYTORCHJOB_CRD = KUBEFLOW_SCHEMAS / "kubeflow.org_pytorchjobs-v1.9.4.yaml"


# -- what a validator needs --------------------------------------------------------------------

def _missing(what: str) -> None:
    if os.environ.get("CI") == "true":
        pytest.fail(f"{what} is not installed, and CI must run every export validator "
                    "(.ci/run installs .ci/validators.txt and runs .ci/setup-slurm.sh)")
    pytest.skip(f"{what} is not installed (pip install -r .ci/validators.txt; bash .ci/setup-slurm.sh)")


def need_module(name: str) -> Any:
    try:
        return __import__(name, fromlist=["_"])
    except ImportError:
        _missing(f"python package {name!r}")


def need_binary(name: str) -> str:
    path = shutil.which(name) or shutil.which(name, path=os.path.dirname(sys.executable))
    if path is None:
        _missing(f"{name!r}")
    return path


def need_slurm() -> None:
    need_binary("sbatch")
    ping = subprocess.run(["scontrol", "ping"], capture_output=True, text=True, timeout=30)
    if "UP" not in ping.stdout:
        _missing("a running slurmctld (bash .ci/setup-slurm.sh)")


def run(argv: list[str], **kw: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, timeout=kw.pop("timeout", 120), **kw)


def bash_words(command: str, env: dict[str, str] | None = None) -> list[str]:
    """The words bash makes of `command` (quotes, $'...' escapes and variables as on the node),
    obtained from bash itself rather than re-implemented."""
    done = subprocess.run(["bash", "-c", "printf '%s\\0' " + command], capture_output=True,
                          timeout=60, env={"PATH": os.environ["PATH"], **(env or {})})
    assert done.returncode == 0, done.stderr.decode()
    return done.stdout.decode().split("\0")[:-1]


# -- shell scripts -----------------------------------------------------------------------------

def check_bash(text: str, tmp: Path, name: str = "script.sh") -> None:
    """bash -n (it parses) and shellcheck (no warnings at its default severity)."""
    path = tmp / name
    path.write_text(text)
    parsed = run(["bash", "-n", str(path)])
    assert parsed.returncode == 0, f"bash -n: {parsed.stderr}"
    shellcheck = need_binary("shellcheck")
    checked = run([shellcheck, "--shell=bash", "--format=gcc", str(path)])
    assert checked.returncode == 0, f"shellcheck:\n{checked.stdout}{checked.stderr}"


def sbatch_test_only(script: Path, *extra: str) -> str:
    """`sbatch --test-only`: slurmctld schedules the job (every #SBATCH directive checked against the
    live cluster) without running it. Returns sbatch's answer."""
    need_slurm()
    done = run(["sbatch", "--test-only", *extra, str(script)])
    out = done.stdout + done.stderr
    assert done.returncode == 0 and "to start at" in out, (
        f"sbatch --test-only rejected the script:\n{out}\n(the CI cluster's shape comes from plans/ when "
        ".ci/setup-slurm.sh runs: rerun it after adding a larger plan)")
    return out


def validate_slurm(text: str, spec: LaunchSpec, tmp: Path) -> None:
    check_bash(text, tmp, "job.sbatch")
    directives = dict(re.findall(r"^#SBATCH --([a-z-]+)(?:=(.*))?$", text, flags=re.M))
    assert directives["nodes"] == str(spec.nodes)
    assert directives["ntasks-per-node"] == "1"
    assert directives["gpus-per-node"] == str(spec.gpus_per_node)
    # --partition on the command line wins over the script's: schedule on the CI cluster's
    # declared nodes (.ci/setup-slurm.sh), which mirror the largest export's shape.
    out = sbatch_test_only(tmp / "job.sbatch", "--partition=budgetdsl")
    nodelist = re.search(r" on nodes (\S+) in partition", out)
    assert nodelist, out
    hosts = run(["scontrol", "show", "hostnames", nodelist.group(1)]).stdout.split()
    assert len(hosts) == spec.nodes, f"slurmctld placed the job on {len(hosts)} nodes: {out}"


# -- torchrun ----------------------------------------------------------------------------------

@cache
def torchrun_options() -> frozenset[str]:
    need_module("torch")
    from torch.distributed.run import get_args_parser

    return frozenset(o for a in get_args_parser()._actions for o in a.option_strings)


def torchrun_argv(words: list[str]) -> list[str]:
    """The argument list of the `torchrun` word in a command, up to the end."""
    return words[words.index("torchrun") + 1:]


def check_torchrun_args(argv: list[str], spec: LaunchSpec) -> Any:
    """Every flag before the program is one of torch's exact option strings (no abbreviations),
    and torch's own parser reads the integers the plan asked for."""
    from torch.distributed.run import get_args_parser

    options = torchrun_options()
    for word in argv:
        if word == spec.command[0] and not word.startswith("-"):
            break
        if word.startswith("-"):
            flag = word.split("=", 1)[0]
            assert flag in options, f"{flag} is not a torchrun option"
    args = get_args_parser().parse_args(argv)
    assert args.nnodes == str(spec.nodes), args.nnodes
    assert args.nproc_per_node == str(spec.gpus_per_node), args.nproc_per_node
    program = [args.training_script, *args.training_script_args]
    if args.module:
        program = ["-m", *program]
    assert program == list(spec.command), program
    return args


def validate_torchrun(text: str, spec: LaunchSpec, tmp: Path) -> None:
    check_bash(text, tmp, "launch.sh")
    body = "\n".join(line for line in text.splitlines() if not line.startswith("#"))
    words = bash_words(body, {"MASTER_ADDR": "10.0.0.1"})
    assert words[0] == "env"
    assigned = dict(w.split("=", 1) for w in words[1:words.index("torchrun")])
    assert assigned == dict(spec.env())
    args = check_torchrun_args(torchrun_argv(words), spec)
    if spec.nodes == 1:
        assert args.standalone
    else:
        assert args.rdzv_backend == "c10d" and args.rdzv_endpoint == f"10.0.0.1:{spec.port}"


# -- Kubeflow ----------------------------------------------------------------------------------

def _strict(schema: Any) -> Any:
    """The CRD schema with additionalProperties: false wherever properties are listed (and the
    schema does not preserve unknown fields): a misspelt or misplaced key fails validation."""
    if isinstance(schema, dict):
        out = {k: _strict(v) for k, v in schema.items()}
        if ("properties" in out and "additionalProperties" not in out
                and not out.get("x-kubernetes-preserve-unknown-fields")):
            out["additionalProperties"] = False
        return out
    if isinstance(schema, list):
        return [_strict(v) for v in schema]
    return schema


@cache
def crd_schema(path: Path) -> dict:
    if not path.exists():
        pytest.fail(f"{path} is missing: the Kubeflow CRDs are vendored in tests/fixtures/kubeflow")
    crd = yaml.safe_load(path.read_text())
    (version,) = [v for v in crd["spec"]["versions"] if v.get("storage")]
    return _strict(version["schema"]["openAPIV3Schema"])


# CEL rules (x-kubernetes-validations) of the CRDs, as Python; rules on oldSelf apply to updates only.
# A rule on a path an export writes that is not here fails the test: translate it before trusting.
_DNS1035 = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")
CEL_RULES: dict[str, Callable[[Any], bool]] = {
    "self.metadata.name.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$')":
        lambda obj: bool(_DNS1035.fullmatch(obj["metadata"]["name"])),
    "size(self.metadata.name) <= 63": lambda obj: len(obj["metadata"]["name"]) <= 63,
}


def _cel_errors(schema: Any, value: Any, path: str) -> list[str]:
    errors: list[str] = []
    if not isinstance(schema, dict):
        return errors
    for rule in schema.get("x-kubernetes-validations", []):
        if "oldSelf" in rule["rule"]:
            continue
        check = CEL_RULES.get(rule["rule"])
        if check is None:
            errors.append(f"{path or '/'}: untranslated CEL rule {rule['rule']!r}")
        elif not check(value):
            errors.append(f"{path or '/'}: {rule['message']}")
    if isinstance(value, dict):
        for key, sub in value.items():
            child = schema.get("properties", {}).get(key)
            if child is None and isinstance(schema.get("additionalProperties"), dict):
                child = schema["additionalProperties"]
            errors += _cel_errors(child, sub, f"{path}/{key}")
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for i, sub in enumerate(value):
            errors += _cel_errors(schema["items"], sub, f"{path}/{i}")
    return errors


_LABEL_VALUE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?")
_QUALIFIED = re.compile(r"([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
                        r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?")


def _metadata_errors(meta: dict) -> list[str]:
    """ObjectMeta rules of the API server that a CRD's `metadata: {type: object}` leaves out."""
    errors = []
    allowed = {"name", "namespace", "labels", "annotations"}
    errors += [f"metadata.{k}: not written by an export" for k in meta if k not in allowed]
    if "namespace" in meta and not re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", meta["namespace"]):
        errors.append("metadata.namespace: not a DNS-1123 label")
    for key, value in meta.get("labels", {}).items():
        if not _QUALIFIED.fullmatch(key) or len(key.split("/")[-1]) > 63:
            errors.append(f"metadata.labels: bad key {key!r}")
        if not isinstance(value, str) or len(value) > 63 or not _LABEL_VALUE.fullmatch(value):
            errors.append(f"metadata.labels[{key}]: bad value {value!r}")
    for key, value in meta.get("annotations", {}).items():
        if not _QUALIFIED.fullmatch(key) or not isinstance(value, str):
            errors.append(f"metadata.annotations: bad key or value {key!r}")
    return errors


def _format_checker() -> Any:
    jsonschema = need_module("jsonschema")
    checker = jsonschema.FormatChecker()

    @checker.checks("int32")
    def _int32(value: object) -> bool:
        return not isinstance(value, int) or -(2**31) <= value < 2**31

    @checker.checks("int64")
    def _int64(value: object) -> bool:
        return not isinstance(value, int) or -(2**63) <= value < 2**63

    return checker


def kubeflow_errors(manifest: dict, crd: Path) -> list[str]:
    """Every problem the API server would report: the strict CRD schema, its CEL rules, ObjectMeta."""
    jsonschema = need_module("jsonschema")
    schema = crd_schema(crd)
    validator = jsonschema.Draft7Validator(schema, format_checker=_format_checker())
    errors = [f"/{'/'.join(map(str, e.absolute_path))}: {e.message}"
              for e in sorted(validator.iter_errors(manifest), key=lambda e: list(map(str, e.path)))]
    errors += _cel_errors(schema, manifest, "")
    errors += _metadata_errors(manifest.get("metadata", {}))
    return errors


TORCHRUN_RESERVED_ENV = {"PET_NNODES", "PET_NPROC_PER_NODE", "PET_NODE_RANK", "PET_MASTER_ADDR",
                         "PET_MASTER_PORT"}


def trainjob_webhook_errors(job: dict) -> list[str]:
    """Kubeflow Trainer v2's torch plugin webhook (pkg/runtime/framework/plugins/torch): numProcPerNode
    an int or auto/cpu/gpu; no env that torchrun's PET_* variables reserve."""
    errors = []
    trainer = job["spec"].get("trainer", {})
    npp = trainer.get("numProcPerNode")
    if isinstance(npp, str) and npp not in ("auto", "cpu", "gpu"):
        errors.append("spec.trainer.numProcPerNode: must have an int value or [auto cpu gpu]")
    reserved = sorted({e["name"] for e in trainer.get("env", [])} & TORCHRUN_RESERVED_ENV)
    if reserved:
        errors.append(f"spec.trainer.env: must not have reserved envs {reserved}")
    return errors


def pytorchjob_webhook_errors(job: dict) -> list[str]:
    """The Training Operator v1.9 PyTorchJob admission webhook (pkg/webhooks/pytorch): name a
    DNS-1035 label; replica types Master/Worker; each with containers, each container an image, one
    named `pytorch`; Master replicas exactly 1, Worker at least 1; elasticPolicy needs Workers and
    excludes nProcPerNode with spec.nprocPerNode."""
    errors = []
    name = job["metadata"]["name"]
    if not _DNS1035.fullmatch(name) or len(name) > 63:
        errors.append("metadata.name: should match DNS-1035")
    spec = job["spec"]
    replicas = spec.get("pytorchReplicaSpecs") or {}
    if not replicas:
        errors.append("spec.pytorchReplicaSpecs: Required")
    for rtype, rspec in replicas.items():
        where = f"spec.pytorchReplicaSpecs[{rtype}]"
        if rtype not in ("Master", "Worker"):
            errors.append(f"{where}: unsupported replica type")
        containers = ((rspec or {}).get("template", {}).get("spec", {}) or {}).get("containers") or []
        if not containers:
            errors.append(f"{where}.template.spec.containers: Required")
        if any(not c.get("image") for c in containers):
            errors.append(f"{where}: container image Required")
        if not any(c.get("name") == "pytorch" for c in containers):
            errors.append(f"{where}: must have at least one container named pytorch")
        count = rspec.get("replicas")
        if rtype == "Master" and count != 1:
            errors.append(f"{where}.replicas: must be 1")
        elif rtype != "Master" and count is not None and count < 1:
            errors.append(f"{where}.replicas: must be at least 1")
    elastic = spec.get("elasticPolicy")
    if elastic is not None:
        if "Worker" not in replicas:
            errors.append("spec.pytorchReplicaSpecs[Worker]: must be configured if elastic policy is used")
        if elastic.get("nProcPerNode") is not None and spec.get("nprocPerNode") is not None:
            errors.append("spec.elasticPolicy.nProcPerNode: must not be used with spec.nprocPerNode")
    return errors


def k8s_expand(text: str, env: dict[str, str]) -> str:
    """What the kubelet makes of a container's `command`, `args` or `env[].value`: `$(NAME)` is
    replaced by the variable when it is defined (left as written otherwise), `$$` becomes `$`
    (k8s.io/kubernetes third_party/forked/golang/expansion/expand.go, Expand and
    tryReadVariableName; the Container API reference documents the same rule)."""
    out, i = [], 0
    while i < len(text):
        if text[i] == "$" and i + 1 < len(text):
            nxt = text[i + 1]
            if nxt == "$":
                out.append("$")
                i += 2
                continue
            if nxt == "(":
                close = text.find(")", i + 2)
                if close != -1:
                    name = text[i + 2:close]
                    out.append(env.get(name, f"$({name})"))
                    i = close + 1
                    continue
            out.append("$" + nxt)
            i += 2
            continue
        out.append(text[i])
        i += 1
    return "".join(out)


def k8s_container(container: dict, base_env: dict[str, str] | None = None) -> tuple[list[str], dict[str, str]]:
    """(argv, environment) of a container as the kubelet starts it: each env value expanded against
    the variables defined before it, then command + args against the whole environment."""
    env = dict(base_env or {})
    for e in container["env"]:
        env[e["name"]] = k8s_expand(e["value"], env)
    argv = [k8s_expand(w, env) for w in container["command"] + container.get("args", [])]
    return argv, env


def _container_command(container: dict, spec: LaunchSpec) -> None:
    argv, env = k8s_container(container)
    assert argv[0] == "torchrun"
    check_torchrun_args(argv[1:], spec)
    assert env == dict(spec.env())


def validate_kubeflow(text: str, spec: LaunchSpec, tmp: Path) -> None:
    job = yaml.safe_load(text)
    errors = kubeflow_errors(job, TRAINJOB_CRD) + trainjob_webhook_errors(job)
    assert not errors, "\n".join(errors)
    assert job["kind"] == "TrainJob" and job["apiVersion"] == "trainer.kubeflow.org/v1alpha1"
    trainer = job["spec"]["trainer"]
    assert trainer["numNodes"] == spec.nodes and trainer["numProcPerNode"] == spec.gpus_per_node
    assert job["spec"].get("activeDeadlineSeconds") == spec.time_limit_s
    assert job["metadata"]["annotations"]["budgetdsl.dev/plan"] == spec.name
    _container_command(trainer, spec)


def validate_pytorchjob(text: str, spec: LaunchSpec, tmp: Path) -> None:
    job = yaml.safe_load(text)
    errors = kubeflow_errors(job, PYTORCHJOB_CRD) + pytorchjob_webhook_errors(job)
    assert not errors, "\n".join(errors)
    assert job["kind"] == "PyTorchJob" and job["apiVersion"] == "kubeflow.org/v1"
    assert job["spec"]["nprocPerNode"] == str(spec.gpus_per_node)
    replicas = job["spec"]["pytorchReplicaSpecs"]
    assert sum(r["replicas"] for r in replicas.values()) == spec.nodes
    assert job["spec"].get("runPolicy", {}).get("activeDeadlineSeconds") == spec.time_limit_s
    for r in replicas.values():
        _container_command(r["template"]["spec"]["containers"][0], spec)


# -- SkyPilot ----------------------------------------------------------------------------------

# SkyPilot reads and writes ~/.sky: it runs in a child process with an empty home of its own, so
# that the test's HOME (and SkyPilot's module-level state) stay untouched. One child serves the
# whole session — each task file is still parsed by sky.Task.from_yaml, one file per request — as
# `import sky` takes ~2-3 s and a child per export spent ~30 s of the suite on imports alone.
_SKY_READER = """\
import json, sys, traceback
import sky
for path in sys.stdin:
    try:
        t = sky.Task.from_yaml(path.rstrip("\\n"))
        (r,) = list(t.resources)
        answer = {"task": {"name": t.name, "num_nodes": t.num_nodes, "run": t.run, "envs": t.envs,
                           "accelerators": r.accelerators, "image_id": r.image_id}}
    except BaseException:
        answer = {"error": traceback.format_exc()}
    print("\\0" + json.dumps(answer), flush=True)
"""


class _SkyReader:
    """The session's SkyPilot child: `read(path)` is sky.Task.from_yaml's reading of that file."""

    def __init__(self) -> None:
        import atexit
        import tempfile

        self.home = Path(tempfile.mkdtemp(prefix="budgetdsl-sky-home-"))
        self.log = (self.home / "stderr.log").open("w+")
        self.proc = subprocess.Popen([sys.executable, "-c", _SKY_READER], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=self.log, text=True,
                                     env={**os.environ, "HOME": str(self.home)})
        atexit.register(self.close)

    def read(self, path: Path, timeout: float = 300.0) -> dict:
        import select

        self.proc.stdin.write(f"{path}\n")
        self.proc.stdin.flush()
        while True:  # skip whatever SkyPilot itself prints on stdout
            ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
            line = self.proc.stdout.readline() if ready else ""
            if not line:
                self.log.seek(0)
                raise AssertionError(f"the SkyPilot reader stopped:\n{self.log.read()[-3000:]}")
            if line.startswith("\0"):
                return json.loads(line[1:])

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        self.log.close()
        shutil.rmtree(self.home, ignore_errors=True)


@cache
def sky_reader() -> _SkyReader:
    import importlib.util

    if importlib.util.find_spec("sky") is None:  # found without importing it here
        _missing("python package 'sky'")
    return _SkyReader()


def validate_skypilot(text: str, spec: LaunchSpec, tmp: Path) -> None:
    path = tmp / "task.yaml"
    path.write_text(text)
    answer = sky_reader().read(path)
    assert "task" in answer, f"sky.Task.from_yaml rejected the task:\n{answer['error'][-3000:]}"
    task = answer["task"]
    assert task["num_nodes"] == spec.nodes
    assert task["accelerators"] == {spec.accelerator: spec.gpus_per_node}
    assert task["envs"] == dict(spec.env())
    assert list(task["image_id"].values()) == [f"docker:{spec.image}"]
    # The run script, as SkyPilot runs it on each node with its variables set.
    check_bash("#!/bin/bash\n" + task["run"], tmp, "run.sh")
    script = task["run"]
    command = script[script.index("\n", script.index('MASTER_ADDR="')) + 1:]
    sky_env = {"SKYPILOT_NUM_NODES": str(spec.nodes), "SKYPILOT_NUM_GPUS_PER_NODE": str(spec.gpus_per_node),
               "SKYPILOT_NODE_RANK": "0", "MASTER_ADDR": "10.0.0.1"}
    check_torchrun_args(torchrun_argv(bash_words(command, sky_env)), spec)


# -- DeepSpeed, HF, Megatron -------------------------------------------------------------------

class _Mpu:
    """What DeepSpeed asks a model-parallel unit for the data-parallel size."""

    def __init__(self, dp: int):
        self.dp = dp

    def get_data_parallel_world_size(self) -> int:
        return self.dp

    def get_data_parallel_rank(self) -> int:
        return 0


def deepspeed_config(config: dict, dp: int, monkeypatch: pytest.MonkeyPatch) -> Any:
    need_module("deepspeed")
    import deepspeed.runtime.config as ds_config

    # DeepSpeedConfig asks torch.distributed for this process's rank and falls back to world size 1
    # when no process group exists; answer "rank 0" so that it takes the mpu's data-parallel size.
    monkeypatch.setattr(ds_config.dist, "get_rank", lambda *a, **k: 0)
    return ds_config.DeepSpeedConfig(config, mpu=_Mpu(dp))


@cache
def deepspeed_top_level_keys() -> frozenset[str]:
    """Top-level keys DeepSpeed reads (its constants module), for a strictness it lacks at the top."""
    import deepspeed.runtime.constants as c
    import deepspeed.runtime.zero.config as z

    return frozenset(v for m in (c, z) for k, v in vars(m).items() if k.isupper() and isinstance(v, str))


def validate_deepspeed(text: str, spec: LaunchSpec, tmp: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = json.loads(text)
    ds = deepspeed_config(config, spec.data_parallel, monkeypatch)
    assert ds.train_batch_size == spec.global_batch_sequences
    assert ds.train_micro_batch_size_per_gpu == spec.micro_batch
    assert ds.gradient_accumulation_steps == spec.grad_accum
    assert ds.world_size == spec.data_parallel
    assert ds.zero_optimization_stage == spec.zero_stage
    unknown = set(config) - deepspeed_top_level_keys()
    assert not unknown, f"keys DeepSpeed does not read: {unknown}"


def validate_hf(text: str, spec: LaunchSpec, tmp: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    need_module("transformers")
    import transformers.training_args as ta
    from transformers import HfArgumentParser, TrainingArguments

    # The export targets GPUs; this machine has none, and TrainingArguments refuses bf16 on a
    # machine without a bf16 GPU. Say there is one; every other check is TrainingArguments' own.
    monkeypatch.setattr(ta, "is_torch_bf16_gpu_available", lambda: True)
    path = tmp / "args.json"
    path.write_text(text)
    (args,) = HfArgumentParser(TrainingArguments).parse_json_file(str(path), allow_extra_keys=False)
    assert args.per_device_train_batch_size == spec.micro_batch
    assert args.gradient_accumulation_steps == spec.grad_accum
    assert args.max_steps == spec.steps
    assert args.warmup_steps == spec.warmup_steps
    assert args.run_name == spec.name
    if spec.lr is not None:
        assert args.learning_rate == spec.lr
    # the global batch the Trainer will use: every GPU a data-parallel replica
    assert args.per_device_train_batch_size * args.gradient_accumulation_steps * spec.gpus \
        == spec.global_batch_sequences


def megatron_source(text: str) -> tuple[list[str], dict[str, str]]:
    """Source the file in bash, as a launch script would: MEGATRON_ARGS's words, and what the file
    exported into the environment (the variables that differ from a bare shell's)."""
    done = subprocess.run(["bash", "-c", 'eval "$(cat)"; printf \'%s\\0\' "${MEGATRON_ARGS[@]}"; '
                           'printf "\\1"; env -0'],
                          input=text.encode(), capture_output=True, timeout=60,
                          env={"PATH": os.environ["PATH"]})
    assert done.returncode == 0, done.stderr.decode()
    words_part, env_part = done.stdout.decode().split("\1", 1)
    words = words_part.split("\0")[:-1]
    env = dict(e.split("=", 1) for e in env_part.split("\0") if "=" in e)
    bare = {"PATH", "PWD", "SHLVL", "_", "OLDPWD"}
    return words, {k: v for k, v in env.items() if k not in bare}


def megatron_args(text: str) -> dict[str, str | None]:
    words, _ = megatron_source(text)
    out: dict[str, str | None] = {}
    for i, word in enumerate(words):
        if word.startswith("--"):
            nxt = words[i + 1] if i + 1 < len(words) else None
            out[word] = None if nxt is None or nxt.startswith("--") else nxt
    return out


def megatron_core_config(args: dict[str, str | None], world_size: int) -> Any:
    """megatron-core's own TransformerConfig built from the exported flags, as Megatron-LM's
    `core_transformer_config_from_args` does after `validate_args`: its __post_init__ checks heads
    divisible by tensor parallelism, the recompute granularity/method/layers combination, the
    pipeline dtype and more. Returns None when megatron-core is missing outside CI."""
    try:
        import torch
        from megatron.core.transformer import TransformerConfig
    except ImportError:
        if os.environ.get("CI") == "true":
            pytest.fail("megatron-core is not installed, and CI installs .ci/validators.txt")
        return None
    dtype = torch.bfloat16 if "--bf16" in args else torch.float16
    tp, pp = int(args["--tensor-model-parallel-size"]), int(args["--pipeline-model-parallel-size"])
    recompute = args.get("--recompute-granularity")
    shape: dict[str, Any] = {"gated_linear_unit": "--swiglu" in args, "fp8": args.get("--fp8-format")}
    if args.get("--num-query-groups") is not None:
        shape["num_query_groups"] = int(args["--num-query-groups"])
    if args.get("--ffn-hidden-size") is not None:
        shape["ffn_hidden_size"] = int(args["--ffn-hidden-size"])
    shape.update(_parallel_config(args))
    config_class = TransformerConfig
    if "--multi-latent-attention" in args:  # core_transformer_config_from_args: MLATransformerConfig
        from megatron.core.transformer.transformer_config import MLATransformerConfig

        config_class = MLATransformerConfig
        shape.update(q_lora_rank=None if args.get("--q-lora-rank") is None else int(args["--q-lora-rank"]),  # type: ignore[arg-type]
                     kv_lora_rank=int(args["--kv-lora-rank"]), qk_head_dim=int(args["--qk-head-dim"]),  # type: ignore[arg-type]
                     qk_pos_emb_head_dim=int(args["--qk-pos-emb-head-dim"]),  # type: ignore[arg-type]
                     v_head_dim=int(args["--v-head-dim"]))  # type: ignore[arg-type]
    return config_class(
        **shape,
        num_layers=int(args["--num-layers"]), hidden_size=int(args["--hidden-size"]),
        num_attention_heads=int(args["--num-attention-heads"]), tensor_model_parallel_size=tp,
        pipeline_model_parallel_size=pp, bf16="--bf16" in args, fp16="--fp16" in args,
        params_dtype=dtype, pipeline_dtype=dtype, recompute_granularity=recompute,
        recompute_method=args.get("--recompute-method"),
        recompute_num_layers=None if args.get("--recompute-num-layers") is None
        else int(args["--recompute-num-layers"]))


def _parallel_config(args: dict[str, str | None]) -> dict[str, Any]:
    """TransformerConfig's context- and expert-parallel and mixture-of-experts fields from the flags
    (what core_transformer_config_from_args copies over), so its __post_init__ checks them."""
    out: dict[str, Any] = {"sequence_parallel": "--sequence-parallel" in args,
                           "add_bias_linear": "--disable-bias-linear" not in args}
    for flag, key in (("--account-for-embedding-in-pipeline-split", "account_for_embedding_in_pipeline_split"),
                      ("--account-for-loss-in-pipeline-split", "account_for_loss_in_pipeline_split")):
        if flag in args:
            out[key] = True
    ints = {"--num-virtual-stages-per-pipeline-rank": "virtual_pipeline_model_parallel_size",
            "--decoder-first-pipeline-num-layers": "num_layers_in_first_pipeline_stage",
            "--decoder-last-pipeline-num-layers": "num_layers_in_last_pipeline_stage",
            "--context-parallel-size": "context_parallel_size", "--expert-model-parallel-size":
            "expert_model_parallel_size", "--expert-tensor-parallel-size": "expert_tensor_parallel_size",
            "--num-experts": "num_moe_experts", "--moe-router-topk": "moe_router_topk",
            "--moe-ffn-hidden-size": "moe_ffn_hidden_size",
            "--moe-shared-expert-intermediate-size": "moe_shared_expert_intermediate_size"}
    for flag, key in ints.items():
        if args.get(flag) is not None:
            out[key] = int(args[flag])  # type: ignore[arg-type]
    if args.get("--moe-layer-freq") is not None:  # "[0]*a+[1]*b": Megatron evaluates the list
        dense, moe = (int(part.split("*")[1]) for part in args["--moe-layer-freq"].split("+"))  # type: ignore[union-attr]
        out["moe_layer_freq"] = [0] * dense + [1] * moe
    if args.get("--moe-expert-capacity-factor") is not None:
        out["moe_expert_capacity_factor"] = float(args["--moe-expert-capacity-factor"])  # type: ignore[arg-type]
        out["moe_pad_expert_input_to_capacity"] = "--moe-pad-expert-input-to-capacity" in args
    if args.get("--moe-token-dispatcher-type") is not None:
        out["moe_token_dispatcher_type"] = args["--moe-token-dispatcher-type"]
    if args.get("--moe-flex-dispatcher-backend") is not None:
        out["moe_flex_dispatcher_backend"] = args["--moe-flex-dispatcher-backend"]
    if args.get("--moe-router-num-groups") is not None:
        out["moe_router_num_groups"] = int(args["--moe-router-num-groups"])  # type: ignore[arg-type]
        out["moe_router_group_topk"] = int(args["--moe-router-group-topk"])  # type: ignore[arg-type]
    if "--num-experts" in args:
        out["moe_grouped_gemm"] = "--moe-grouped-gemm" in args
    return out


def check_megatron_invariants(args: dict[str, str | None], env: dict[str, str], world_size: int) -> None:
    """What megatron/training/arguments.py (core_r0.16.0) `validate_args` asserts of these flags,
    checked without Megatron-LM's training package (its wheel, megatron-core, does not ship it)."""
    for flag in ("--num-layers", "--hidden-size", "--num-attention-heads", "--max-position-embeddings",
                 "--micro-batch-size", "--seq-length"):  # required_args, and the batch/sequence
        assert args.get(flag) is not None and int(args[flag]) > 0, f"{flag} missing"
    tp, pp = int(args["--tensor-model-parallel-size"]), int(args["--pipeline-model-parallel-size"])
    cp = int(args.get("--context-parallel-size") or 1)
    assert world_size % (tp * pp * cp) == 0, "world size not divisible by tensor x pipeline x context"
    first, last = args.get("--decoder-first-pipeline-num-layers"), args.get("--decoder-last-pipeline-num-layers")
    vpp = int(args.get("--num-virtual-stages-per-pipeline-rank") or 1)
    assert vpp == 1 or pp > 1, "interleaving needs a pipeline"
    accounted = int("--account-for-embedding-in-pipeline-split" in args) + \
        int("--account-for-loss-in-pipeline-split" in args)
    if accounted:  # validate_args and TransformerConfig: no uneven first/last beside it, L + e + l split evenly
        assert first is None and last is None, "--decoder-first/last-pipeline-num-layers beside the accounted split"
        assert "--num-layers-per-virtual-pipeline-stage" not in args or vpp == 1, "both virtual-stage flags"
    if first is None and last is None:
        slots = int(args["--num-layers"]) + accounted
        assert slots % pp == 0, "layers not divisible by the pipeline-parallel size (with any accounted embedding/loss)"
        assert slots // pp % vpp == 0, "layers per stage not divisible by the virtual stages (with any accounted)"
    else:  # the uneven split: TransformerConfig (built below) checks the middle stages share the rest evenly
        assert pp > 1, "an uneven split needs a pipeline"
    if cp > 1:  # the load-balanced split of get_batch_on_this_cp_rank
        assert int(args["--seq-length"]) % (2 * cp) == 0, "seq_length not divisible by 2 x context parallel"
    if "--num-experts" in args:  # validate_args and the MoE parallel folding (parallel_state)
        ep = int(args.get("--expert-model-parallel-size") or 1)
        etp = int(args.get("--expert-tensor-parallel-size") or tp)
        assert int(args["--num-experts"]) % ep == 0, "num_experts not divisible by expert parallel"
        assert 0 < int(args["--moe-router-topk"]) <= int(args["--num-experts"]), "router top-k"  # type: ignore[arg-type]
        assert (world_size // pp) % (etp * ep) == 0, "expert groups do not fold into a stage"
        if ep > 1 and tp > 1:
            assert "--sequence-parallel" in args, "expert and tensor parallelism need --sequence-parallel"
    if "--multi-latent-attention" in args:  # validate_args: MLA and grouped-query attention are exclusive
        assert "--group-query-attention" not in args, "Group query attention is mutually exclusive with MLA"
        for flag in ("--kv-lora-rank", "--qk-head-dim", "--qk-pos-emb-head-dim", "--v-head-dim"):
            assert args.get(flag) is not None and int(args[flag]) > 0, f"{flag} missing"  # type: ignore[arg-type]
    else:
        assert not {"--q-lora-rank", "--kv-lora-rank", "--qk-head-dim", "--qk-pos-emb-head-dim",
                    "--v-head-dim"} & set(args), "MLA dimensions without --multi-latent-attention"
    if args.get("--moe-router-num-groups") is not None:  # TransformerConfig's group-limited routing
        groups, topk = int(args["--moe-router-num-groups"]), int(args["--moe-router-group-topk"])  # type: ignore[arg-type]
        assert int(args["--num-experts"]) % groups == 0 and 0 < topk <= groups, "router groups"  # type: ignore[arg-type]
    if args.get("--moe-token-dispatcher-type") == "flex":
        assert args.get("--moe-flex-dispatcher-backend") in ("deepep", "hybridep"), "flex dispatcher backend"
    if "--overlap-moe-expert-parallel-comm" in args:  # TransformerConfig.__post_init__ (core_r0.16.0)
        assert int(args.get("--expert-model-parallel-size") or 1) > 1, "EP A2A overlap needs expert parallelism"
        assert args.get("--recompute-granularity") != "full", "disable full recomputation with EP A2A overlap"
        assert pp == 1 or vpp > 1, "EP A2A overlap needs virtual pipeline stages with a pipeline"
    assert int(args["--hidden-size"]) % int(args["--num-attention-heads"]) == 0, "kv_channels"
    assert int(args["--max-position-embeddings"]) >= int(args["--seq-length"]), \
        "max_position_embeddings must be >= seq_length"
    assert not ("--bf16" in args and "--fp16" in args)
    if args.get("--num-query-groups") is not None:  # TransformerConfig: groups split over the TP ranks
        groups = int(args["--num-query-groups"])
        assert "--group-query-attention" in args, "--num-query-groups is read only with --group-query-attention"
        assert int(args["--num-attention-heads"]) % groups == 0 and groups % tp == 0, "query groups"
    if "--fp8-format" in args:
        assert args["--fp8-format"] in ("e4m3", "hybrid") and "--bf16" in args, "FP8 runs beside --bf16"
    if args.get("--recompute-granularity") == "selective":
        assert "--recompute-method" not in args, "selective recompute takes no method"
    if args.get("--recompute-method") == "block":  # TransformerConfig: 1 ≤ N ≤ the layers of a pipeline rank
        assert args.get("--recompute-granularity") == "full", "block recompute needs full granularity"
        assert 1 <= int(args["--recompute-num-layers"]) <= int(args["--num-layers"]) // pp, \
            "recompute_num_layers must be between 1 and num_layers_per_pipeline_rank"  # type: ignore[arg-type]
    if "--train-iters" in args:  # iteration-based: no sample-based options
        assert not RAMP_FLAGS_SAMPLES & set(args)
    if tp > 1:  # asserted before Blackwell (unless FSDP, which the export never enables)
        assert env.get("CUDA_DEVICE_MAX_CONNECTIONS") == "1", \
            "tensor parallelism needs CUDA_DEVICE_MAX_CONNECTIONS=1"
    megatron_core_config(args, world_size)


RAMP_FLAGS_SAMPLES = frozenset({"--train-samples", "--lr-warmup-samples"})


def validate_megatron(text: str, spec: LaunchSpec, tmp: Path) -> None:
    from budgetdsl.exports.megatron import FLAGS, RAMP_FLAGS

    check_bash(text, tmp, "megatron.sh")
    args = megatron_args(text)
    _, env = megatron_source(text)
    tp, pp = int(args["--tensor-model-parallel-size"]), int(args["--pipeline-model-parallel-size"])
    cp = int(args.get("--context-parallel-size") or 1)
    assert cp == spec.context_parallel and spec.gpus % (tp * pp * cp) == 0
    dp = spec.gpus // (tp * pp * cp)  # megatron/training/arguments.py: world size // model size (with cp)
    assert args.get("--num-experts") == (None if spec.experts is None else str(spec.experts))
    if spec.experts is not None:
        assert int(args["--expert-model-parallel-size"]) == spec.expert_parallel  # type: ignore[arg-type]
        assert int(args["--moe-router-topk"]) == spec.experts_per_token  # type: ignore[arg-type]
    check_megatron_invariants(args, env, spec.gpus)
    assert ("--account-for-embedding-in-pipeline-split" in args, "--account-for-loss-in-pipeline-split" in args) \
        == ("embedding" in spec.split_slots, "loss" in spec.split_slots)
    assert int(args.get("--num-virtual-stages-per-pipeline-rank") or 1) == spec.virtual_stages
    assert (int(args["--num-layers"]), int(args["--hidden-size"]), int(args["--num-attention-heads"])) \
        == (spec.layers, spec.hidden_size, spec.heads)
    assert int(args["--seq-length"]) == spec.seq_len
    assert args.get("--vocab-size") == (None if spec.vocab is None else str(spec.vocab))
    groups = spec.kv_heads if spec.kv_heads not in (None, spec.heads) else None
    assert args.get("--num-query-groups") == (None if groups is None else str(groups))
    assert ("--swiglu" in args, "--untie-embeddings-and-output-weights" in args) == (
        spec.swiglu, spec.untied_embeddings)
    assert args.get("--fp8-format") == ("hybrid" if spec.fp8 else None)
    if spec.ffn_hidden is not None:
        assert args.get("--ffn-hidden-size") == str(spec.ffn_hidden)
    recomputed = spec.recompute != "none" and spec.recompute_layers != 0  # block with N = 0 recomputes nothing
    assert args.get("--recompute-granularity") == (spec.recompute if recomputed else None)
    if spec.recompute_layers:  # block recomputation: the first N layers of each stage (chunk)
        assert (args.get("--recompute-method"), args.get("--recompute-num-layers")) == (
            "block", str(spec.recompute_layers))
    if "--step-batch-size-schedule" in args:  # Megatron-LM main's StepBatchsizeNumMicroBatchesCalculator
        allowed = (FLAGS | RAMP_FLAGS) - {"--global-batch-size", "--train-iters", "--lr-warmup-iters"}
        assert set(args) <= allowed, set(args) - allowed
        micro = int(args["--micro-batch-size"])
        pairs = [tuple(int(v) for v in e.split(":")) for e in args["--step-batch-size-schedule"].split()]
        assert pairs[0][0] == 0 and all(b[0] > a[0] for a, b in zip(pairs, pairs[1:]))
        assert [p[1] for p in pairs] == [b.sequences for b in spec.batch_stages]
        assert all(p[1] % (micro * dp) == 0 for p in pairs)  # the calculator's consistency check
        assert [p[1] // (micro * dp) for p in pairs] == [b.grad_accum for b in spec.batch_stages]
        assert int(args["--train-samples"]) == spec.total_sequences
        return
    assert set(args) <= FLAGS, set(args) - FLAGS
    micro, global_batch = int(args["--micro-batch-size"]), int(args["--global-batch-size"])
    try:
        from megatron.core.num_microbatches_calculator import (
            ConstantNumMicroBatchesCalculator,
        )
    except ImportError:
        if os.environ.get("CI") == "true":
            pytest.fail("megatron-core is not installed, and CI installs .ci/validators.txt")
        # Megatron's documented rule: global batch = micro × data parallel × microbatches, exactly.
        assert global_batch % (micro * dp) == 0
        microbatches = global_batch // (micro * dp)
    else:
        microbatches = ConstantNumMicroBatchesCalculator(global_batch, micro, dp, False, 0).get()
    assert microbatches == spec.grad_accum
    assert int(args["--train-iters"]) == spec.steps
    if spec.lr is not None:
        assert float(args["--lr"]) == spec.lr


def megatron_lm_validate_args(text: str, world_size: int, monkeypatch: pytest.MonkeyPatch) -> Any:
    """Megatron-LM's own `parse_args` and `validate_args` (then `core_transformer_config_from_args`)
    on the exported flags, when megatron.training is importable (a Megatron-LM checkout on
    PYTHONPATH, or its container); skips otherwise: no package index ships megatron/training."""
    try:
        import megatron.training.arguments as mlm
    except ImportError:
        pytest.skip("Megatron-LM's megatron.training is not importable (put a Megatron-LM checkout "
                    "on PYTHONPATH to run its own validate_args)")
    words, env = megatron_source(text)
    for name in ("CUDA_DEVICE_MAX_CONNECTIONS", "RANK"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("WORLD_SIZE", str(world_size))
    monkeypatch.setattr(sys, "argv", ["pretrain_gpt.py", *words])
    import torch

    if not torch.cuda.is_available():  # judge as on a Hopper GPU, where every rule applies
        monkeypatch.setattr(mlm, "get_device_arch_version", lambda: 9)
    args = mlm.validate_args(mlm.parse_args())
    mlm.core_transformer_config_from_args(args)
    return args


def validate(fmt: str, text: str, spec: LaunchSpec, tmp: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Run the validator of `fmt`."""
    if fmt in ("deepspeed", "hf"):
        VALIDATORS[fmt](text, spec, tmp, monkeypatch)
    else:
        VALIDATORS[fmt](text, spec, tmp)


VALIDATORS: dict[str, Callable[..., None]] = {
    "slurm": validate_slurm, "torchrun": validate_torchrun, "kubeflow": validate_kubeflow,
    "pytorchjob": validate_pytorchjob, "skypilot": validate_skypilot, "deepspeed": validate_deepspeed,
    "hf": validate_hf, "megatron": validate_megatron,
}
