"""Base fragments (`fragment: true`): checked for what they say alone, never planned, not inherited."""

import pathlib
import textwrap

import pytest

from budgetdsl.cli import main
from budgetdsl.plan.diagnostics import PlanError
from budgetdsl.plan.loader import check_fragment, load_plan, read_merged

REPO = pathlib.Path(__file__).resolve().parents[2]
BASE = REPO / "plans/base/a100-cluster.yaml"

CHILD = """\
name: child
extends: base.yaml
model: {params: 1e9, seq_len: 2048}
target: {min_tokens: 20e9}
noise: {b_crit: 1M}
"""


def write(tmp_path, name, text):
    path = tmp_path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    return path


def codes(exc: PlanError) -> list[str]:
    return [d.code for d in exc.diagnostics]


def test_the_projects_base_is_a_fragment_and_checks_clean(capsys):
    check_fragment(read_merged(BASE))
    assert main(["check", str(BASE)]) == 0
    assert "1 plan valid (1 base fragment)" in capsys.readouterr().err


def test_a_fragment_is_not_a_whole_plan(capsys):
    with pytest.raises(PlanError) as info:
        load_plan(BASE)
    [d] = info.value.diagnostics
    assert d.code == "fragment" and d.location.line == 4  # the `fragment: true` line
    assert main(["plan", str(BASE)]) == 2
    assert "error[fragment]" in capsys.readouterr().err


def test_a_plan_does_not_inherit_the_mark(tmp_path):
    write(tmp_path, "base.yaml", "fragment: true\nhardware: {gpu: H100-SXM5-80GB, gpus: 8}\n")
    plan = load_plan(write(tmp_path, "child.yaml", CHILD))
    assert plan.fragment is False and plan.hardware.gpus == 8


def test_a_fragment_may_leave_out_whole_plan_keys_and_refer_to_what_plans_set(tmp_path):
    frag = write(tmp_path, "base.yaml", """\
        fragment: true
        hardware:
          gpu: H100-SXM5-80GB          # no gpus: each plan sets its own
          mfu: 0.4
        budget:
          flops: 6 * model.params * 30e9   # late-bound: the plan sets model.params
        noise:
          uncertainty: 30%             # the plan names the B_crit source
        """)
    check_fragment(read_merged(frag))
    plan = load_plan(write(tmp_path, "child.yaml", CHILD + "hardware: {gpus: 16}\n"))
    assert plan.budget.flops == pytest.approx(6 * 1e9 * 30e9)
    assert plan.noise.uncertainty == pytest.approx(0.3)


@pytest.mark.parametrize(("text", "code", "line"), [
    ("fragment: true\nhardware:\n  gpu_count: 8\n", "unknown-key", 3),
    ("fragment: true\nhardware:\n  mfu: 1.5\n", "out-of-range", 3),
    ("fragment: true\nbudget:\n  deadline: 80 GiB\n", "dimension", 3),
    ("fragment: true\nhardware:\n  gpu: B300-IMAGINARY\n", "plan-rule", 3),
    ("fragment: true\nmodell: {}\n", "unknown-key", 2),
    ("fragment: yes please\n", "wrong-type", 1),
])
def test_what_a_fragment_sets_is_still_checked(tmp_path, text, code, line):
    with pytest.raises(PlanError) as info:
        check_fragment(read_merged(write(tmp_path, "base.yaml", text)))
    assert [(d.code, d.location.line) for d in info.value.diagnostics] == [(code, line)]


def test_without_the_mark_a_partial_file_is_an_invalid_plan(tmp_path):
    path = write(tmp_path, "base.yaml", "hardware: {gpu: H100-SXM5-80GB}\n")
    with pytest.raises(PlanError) as info:
        load_plan(path)
    assert "missing-key" in codes(info.value)
    assert main(["check", str(path)]) == 2


def test_a_fragment_may_extend_a_fragment(tmp_path):
    write(tmp_path, "cluster.yaml", "fragment: true\nhardware: {gpu: H100-SXM5-80GB, mfu: 0.5}\n")
    write(tmp_path, "base.yaml", "fragment: true\nextends: cluster.yaml\nhardware: {gpus: 32}\n")
    check_fragment(read_merged(tmp_path / "base.yaml"))
    plan = load_plan(write(tmp_path, "child.yaml", CHILD))
    assert (plan.hardware.gpus, plan.hardware.mfu) == (32, 0.5)
