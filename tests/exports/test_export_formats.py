"""Every format on hand-built specs: golden files, then the format's own validator."""

from __future__ import annotations

import dataclasses

import pytest
from export_specs import CASES
from export_validators import validate

from budgetdsl.exports import FORMATS, export
from budgetdsl.exports.spec import ExportError

SKIP = {("multi-node", "hf"), ("minimal", "skypilot"), ("minimal", "megatron")}  # refused by design: see test_refusals


@pytest.mark.parametrize("fmt", list(FORMATS))
@pytest.mark.parametrize("case", list(CASES))
def test_golden(case: str, fmt: str, golden) -> None:
    if (case, fmt) in SKIP:
        pytest.skip("this format refuses this case (test_refusals)")
    golden(f"{case}.{fmt}{FORMATS[fmt].suffix}", export(CASES[case], fmt))


@pytest.mark.parametrize("fmt", list(FORMATS))
@pytest.mark.parametrize("case", list(CASES))
def test_validator_accepts(case: str, fmt: str, tmp_path, monkeypatch) -> None:
    if (case, fmt) in SKIP:
        pytest.skip("this format refuses this case (test_refusals)")
    spec = CASES[case]
    validate(fmt, export(spec, fmt), spec, tmp_path, monkeypatch)


def test_refusals() -> None:
    with pytest.raises(ExportError, match="no tensor or pipeline parallelism"):
        export(CASES["multi-node"], "hf")
    with pytest.raises(ExportError, match="launch.accelerator"):
        export(CASES["minimal"], "skypilot")
    with pytest.raises(ExportError, match="set model.layers, model.d_model, model.heads in the plan"):
        export(CASES["minimal"], "megatron")
    # ZeRO-3 under a 2-stage pipeline: DeepSpeed's PipelineEngine asserts at start-up (ZeRO-1 exports)
    with pytest.raises(ExportError, match="ZeRO-3 with a 2-stage pipeline .* hardware.zero: 1"):
        export(dataclasses.replace(CASES["multi-node"], zero_stage=3), "deepspeed")
    assert export(CASES["multi-node"], "deepspeed")


@pytest.mark.parametrize("fmt", list(FORMATS))
def test_deterministic(fmt: str) -> None:
    assert export(CASES["single-node"], fmt) == export(CASES["single-node"], fmt)


def test_registry_matches_modules() -> None:
    for fmt in FORMATS.values():
        assert callable(fmt.render) and fmt.uses, fmt.name
