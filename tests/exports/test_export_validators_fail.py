"""Each validator rejects a broken export: none of the validation tests can pass vacuously."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
import yaml
from export_specs import make_spec, multi_node
from export_validators import (
    PYTORCHJOB_CRD,
    TRAINJOB_CRD,
    check_bash,
    kubeflow_errors,
    pytorchjob_webhook_errors,
    sbatch_test_only,
    trainjob_webhook_errors,
    validate,
)

from budgetdsl.exports import export


def test_shellcheck_catches_unquoted_expansion(tmp_path) -> None:
    with pytest.raises(AssertionError, match="SC2086"):
        check_bash("#!/bin/bash\nx=$1\necho $x\n", tmp_path)


def test_bash_n_catches_syntax(tmp_path) -> None:
    with pytest.raises(AssertionError, match="bash -n"):
        check_bash("#!/bin/bash\nif true; then\n", tmp_path)


def test_sbatch_refuses_a_shape_the_cluster_lacks(tmp_path) -> None:
    script = tmp_path / "big.sbatch"
    script.write_text("#!/bin/bash\n#SBATCH --nodes=100000\n#SBATCH --gpus-per-node=8\nsrun true\n")
    with pytest.raises(AssertionError, match="rejected"):
        sbatch_test_only(script, "--partition=budgetdsl")


def test_sbatch_refuses_a_bad_time(tmp_path) -> None:
    script = tmp_path / "t.sbatch"
    script.write_text("#!/bin/bash\n#SBATCH --nodes=1\n#SBATCH --time=1-99:99:99:99\nsrun true\n")
    with pytest.raises(AssertionError, match="rejected"):
        sbatch_test_only(script, "--partition=budgetdsl")


def test_torchrun_flags_checked_exactly(tmp_path, monkeypatch) -> None:
    spec = make_spec()
    text = export(spec, "torchrun").replace("--nproc-per-node=", "--nproc=")  # an abbreviation
    with pytest.raises(AssertionError, match="not a torchrun option"):
        validate("torchrun", text, spec, tmp_path, monkeypatch)


def test_strict_crd_schema_rejects_unknown_and_misplaced_keys() -> None:
    job = yaml.safe_load(export(multi_node(), "kubeflow"))
    job["spec"]["trainer"]["numGpus"] = 8
    job["spec"]["trainer"]["resourcesPerNode"]["limits"]["nvidia.com/gpu"] = "eight"
    errors = "\n".join(kubeflow_errors(job, TRAINJOB_CRD))
    assert "numGpus" in errors and "eight" in errors


def test_trainjob_cel_and_webhook_rules() -> None:
    job = yaml.safe_load(export(multi_node(), "kubeflow"))
    job["metadata"]["name"] = "Llama_13B"
    job["spec"]["trainer"]["numProcPerNode"] = 8.5
    job["spec"]["trainer"]["env"].append({"name": "PET_NNODES", "value": "3"})
    errors = "\n".join(kubeflow_errors(job, TRAINJOB_CRD) + trainjob_webhook_errors(job))
    assert "RFC 1035" in errors and "8.5" in errors and "PET_NNODES" in errors


def test_pytorchjob_webhook_rules() -> None:
    job = yaml.safe_load(export(multi_node(), "pytorchjob"))
    job["spec"]["pytorchReplicaSpecs"]["Master"]["replicas"] = 2
    job["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["name"] = "main"
    errors = pytorchjob_webhook_errors(job)
    assert any("Master].replicas: must be 1" in e for e in errors)
    assert any("container named pytorch" in e for e in errors)
    job["spec"]["nprocPerNode"] = 8  # a string in this API
    assert any("nprocPerNode" in e for e in kubeflow_errors(job, PYTORCHJOB_CRD))


def test_deepspeed_refuses_inconsistent_batch(tmp_path, monkeypatch) -> None:
    spec = multi_node()
    config = json.loads(export(spec, "deepspeed"))
    config["train_batch_size"] += 1
    with pytest.raises(AssertionError, match="train_batch_size"):
        validate("deepspeed", json.dumps(config), spec, tmp_path, monkeypatch)


def test_hf_refuses_extra_keys(tmp_path, monkeypatch) -> None:
    spec = make_spec()
    args = json.loads(export(spec, "hf"))
    args["train_batch_size"] = 12
    with pytest.raises(ValueError, match="train_batch_size"):
        validate("hf", json.dumps(args), spec, tmp_path, monkeypatch)


def test_megatron_calculator_refuses_indivisible_batch(tmp_path, monkeypatch) -> None:
    spec = multi_node()
    text = export(spec, "megatron").replace(f"--global-batch-size {spec.global_batch_sequences}",
                                            f"--global-batch-size {spec.global_batch_sequences + 1}")
    with pytest.raises(AssertionError):
        validate("megatron", text, spec, tmp_path, monkeypatch)


def test_skypilot_refuses_a_bad_task(tmp_path, monkeypatch) -> None:
    spec = make_spec()
    text = export(spec, "skypilot").replace("num_nodes: 1", "num_nodes: one")
    with pytest.raises(AssertionError, match="from_yaml rejected"):
        validate("skypilot", text, replace(spec), tmp_path, monkeypatch)
