"""A calibration's hardware profile as evidence for the plan's kernel efficiency (issue 15 item 4):
read, worded as a report note, never fed silently into the cost model."""

import json
import pathlib

import pytest

from budgetdsl.hardware.calibration_hardware import (
    achieved_flops_per_device,
    kernel_evidence,
    same_part,
)
from budgetdsl.hardware.gpus import find_preset
from budgetdsl.plan.calibration_file import parse_calibration
from budgetdsl.plan.loader import load_plan
from budgetdsl.solve.solver import solve

FIXTURE = pathlib.Path(__file__).resolve().parents[1] / "fixtures/calibration/gpt-micro-stdlib.json"


def _cal(**hardware):
    data = json.loads(FIXTURE.read_text())
    data["hardware"].update(hardware)
    return parse_calibration(json.dumps(data), "cal.json")


class _Plan:
    class hardware:
        gpu = "H100-SXM5-80GB"


@pytest.mark.parametrize("device, preset, same", [
    ("NVIDIA H100 80GB HBM3", "H100-SXM5-80GB", True), ("NVIDIA H100-SXM5-80GB", "H100-SXM5-80GB", True),
    ("NVIDIA A100-SXM4-80GB", "H100-SXM5-80GB", False), ("AMD Instinct MI300X", "MI300X", True)])
def test_the_device_name_is_matched_to_the_preset_family(device, preset, same):
    assert same_part(device, preset) is same


def test_on_the_plans_gpu_the_note_gives_the_fraction_of_peak():
    cal = _cal(device="cuda", device_name="NVIDIA H100 80GB HBM3", world_size=2, tokens_per_s=2e6)
    flops = 2e6 * cal.provenance.model.flops_per_token / 2  # model FLOP/s per device (PaLM appendix B)
    assert achieved_flops_per_device(cal) == pytest.approx(flops)
    note = kernel_evidence(_Plan, cal, "cal.json")
    assert f"{flops / find_preset('H100-SXM5-80GB').peak_flops:.1%} of the H100-SXM5-80GB dense peak" in note
    assert "lower bound" in note


def test_elsewhere_it_is_no_evidence_and_without_throughput_nothing_is_said():
    assert "no evidence" in kernel_evidence(_Plan, _cal(), "cal.json")  # the fixture ran on a CPU
    assert "not H100-SXM5-80GB" in kernel_evidence(
        _Plan, _cal(device="cuda", device_name="NVIDIA A100-SXM4-80GB", tokens_per_s=1e6), "cal.json")
    assert kernel_evidence(_Plan, _cal(tokens_per_s=None), "cal.json") is None


def test_the_note_reaches_the_report_of_a_plan_that_reads_the_calibration(tmp_path):
    plan = tmp_path / "p.yaml"
    plan.write_text(f"""name: proxy
model: {{params: 25M, layers: 6, d_model: 512, heads: 8, seq_len: 64}}
hardware: {{gpu: H100-SXM5-80GB, gpus: 8}}
target: {{min_tokens: 2B}}
noise: {{calibration: {FIXTURE}, at_loss: 2.7}}
""")
    notes = solve(load_plan(plan)).notes
    assert any(n.startswith("calibration gpt-micro-stdlib.json measured") for n in notes)
