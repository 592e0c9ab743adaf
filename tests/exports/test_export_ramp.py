"""A batch-size ramp through the exports: Megatron's step schedule (thresholds in tokens), the
BUDGETDSL_BATCH_SCHEDULE stage list for the launch formats, and the plan end to end."""

from pathlib import Path

import pytest
from export_specs import make_spec
from export_validators import megatron_args, validate_megatron

from budgetdsl.exports import FORMATS, export
from budgetdsl.exports.spec import BatchStage, launch_spec

REPO = Path(__file__).parents[2]


def ramp_spec():
    # micro 2 × dp 2 = 4 sequences per accumulation step; 128 tokens per sequence
    stages = (BatchStage(0, 4, 1, 3), BatchStage(3 * 4 * 128, 8, 2, 2), BatchStage(3 * 4 * 128 + 2 * 8 * 128, 12, 3, 4))
    return make_spec(grad_accum=3, steps=9, batch_stages=stages)


def test_megatron_carries_the_stages_as_a_token_threshold_schedule(tmp_path):
    spec = ramp_spec()
    text = export(spec, "megatron")
    args = megatron_args(text)
    assert args["--step-batch-size-schedule"] == "0:4 1536:8 3584:12"
    assert args["--train-samples"] == str(3 * 4 + 2 * 8 + 4 * 12)
    assert args["--lr-warmup-samples"] == "4"  # one warmup step in the first stage
    assert "--global-batch-size" not in args and "--train-iters" not in args
    assert "Megatron-LM main" in text
    validate_megatron(text, spec, tmp_path)


@pytest.mark.parametrize("fmt", ["slurm", "torchrun", "kubeflow", "pytorchjob", "skypilot"])
def test_launch_formats_carry_the_stage_list(fmt):
    text = export(ramp_spec(), fmt)
    assert "BUDGETDSL_BATCH_SCHEDULE" in text and "0:4 1536:8 3584:12" in text


def test_inconsistent_stages_are_refused():
    with pytest.raises(ValueError, match="sequences = grad_accum"):
        make_spec(grad_accum=3, steps=9, batch_stages=(BatchStage(0, 5, 1, 9),))
    with pytest.raises(ValueError, match="start at 0"):
        make_spec(grad_accum=1, steps=9, batch_stages=(BatchStage(10, 4, 1, 9),))
    with pytest.raises(ValueError, match="last stage"):
        make_spec(grad_accum=3, steps=8, batch_stages=ramp_spec().batch_stages)


def test_a_plan_with_an_auto_ramp_exports_its_stages(tmp_path):
    from budgetdsl.plan.loader import load_plan
    from budgetdsl.solve.solver import solve

    plan = load_plan(REPO / "plans" / "ramp-gpt-micro-proxy.yaml")
    sol = solve(plan)
    assert sol.ramp is not None
    spec = launch_spec(plan, sol)
    assert [b.sequences for b in spec.batch_stages] == [st.sequences for st in sol.ramp.stages]
    assert spec.steps == sol.ramp.steps and spec.micro_batch == sol.ramp.micro_batch
    validate_megatron(export(spec, "megatron"), spec, tmp_path)
    for fmt in FORMATS:
        if fmt not in ("megatron", "deepspeed", "hf"):
            assert spec.schedule_text() in export(spec, fmt)
