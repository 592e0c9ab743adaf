"""Writing values back into plan files: only the changed values move, in the file that holds them."""

import difflib
import pathlib
import shutil

import pytest

from budgetdsl.plan.diagnostics import PlanError
from budgetdsl.plan.edit import EditError, render_scalar, save_changes
from budgetdsl.plan.loader import load_plan

REPO = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture
def plans(tmp_path):
    shutil.copytree(REPO / "plans", tmp_path / "plans")
    return tmp_path / "plans"


def changed_lines(before: str, after: str) -> list[str]:
    return [line for line in difflib.unified_diff(before.splitlines(), after.splitlines(), lineterm="", n=0)
            if line[:1] in "+-" and not line.startswith(("+++", "---"))]


def test_a_value_in_the_plan_changes_in_place(plans):
    path = plans / "llama2-7b.yaml"
    before = path.read_text()
    assert save_changes(path, {"hardware.gpus": 2048, "budget.deadline": "14 days"}) == [str(path)]
    after = path.read_text()
    assert changed_lines(before, after) == [
        "-  gpus: 1024", "+  gpus: 2048", "-  deadline: 21 days", "+  deadline: 14 days"]
    plan = load_plan(path)
    assert plan.hardware.gpus == 2048 and plan.budget.deadline == 14 * 86400


def test_a_value_from_the_base_changes_in_the_base(plans):
    path, base = plans / "llama2-7b.yaml", plans / "base" / "a100-cluster.yaml"
    plan_before, base_before = path.read_text(), base.read_text()
    assert save_changes(path, {"hardware.zero": 2}) == [str(base)]  # the plan declares its own mfu
    assert path.read_text() == plan_before
    assert changed_lines(base_before, base.read_text()) == ["-  zero: 1", "+  zero: 2"]
    assert load_plan(path).hardware.zero == 2


def test_comments_and_order_are_kept(plans):
    path = plans / "llama2-7b.yaml"
    before = path.read_text()
    save_changes(path, {"target.tokens": "2.2T"})
    after = path.read_text()
    assert changed_lines(before, after) == [
        "-  tokens: 2T                    # the published token count ...",
        "+  tokens: 2.2T                  # the published token count ..."]  # the comment keeps its column


def test_a_new_key_goes_at_the_end_of_its_section(plans):
    path = plans / "llama2-7b.yaml"
    before = path.read_text()
    save_changes(path, {"hardware.step_overhead": "50 ms"})
    assert changed_lines(before, path.read_text()) == ["+  step_overhead: 50 ms"]
    assert load_plan(path).hardware.step_overhead == pytest.approx(0.05)


def test_a_new_key_in_an_inline_mapping_and_a_new_section(tmp_path):
    path = tmp_path / "p.yaml"
    path.write_text("name: p  # a plan\nmodel: {params: 7B, seq_len: 2048}\nhardware: {gpu: H100-SXM5-80GB, gpus: 64}\n"
                    "target: {min_tokens: 140B}\nnoise: {b_crit: 2M}\n")
    save_changes(path, {"model.layers": 32, "budget.deadline": "7 days"})
    assert path.read_text() == (
        "name: p  # a plan\nmodel: {params: 7B, seq_len: 2048, layers: 32}\nhardware: {gpu: H100-SXM5-80GB, gpus: 64}\n"
        "target: {min_tokens: 140B}\nnoise: {b_crit: 2M}\nbudget:\n  deadline: 7 days\n")


def test_none_removes_a_key(plans, tmp_path):
    path = plans / "llama2-7b.yaml"
    before = path.read_text()
    save_changes(path, {"run.micro_batch": None})
    assert changed_lines(before, path.read_text()) == [
        "-  micro_batch: 1                # 1 sequence × 1024 replicas × 4096 tokens = 4Mi tokens"]
    flow = tmp_path / "flow.yaml"
    flow.write_text("name: f\nmodel: {params: 7B, seq_len: 2048}\nhardware: {gpu: H100-SXM5-80GB, gpus: 64, mfu: 0.5}\n"
                    "target: {min_tokens: 140B}\nnoise: {b_crit: 2M, uncertainty: 10%}\n")
    save_changes(flow, {"hardware.mfu": None, "noise.b_crit": "3M"})
    assert "hardware: {gpu: H100-SXM5-80GB, gpus: 64}\n" in flow.read_text()
    assert "noise: {b_crit: 3M, uncertainty: 10%}\n" in flow.read_text()


def test_an_invalid_change_writes_nothing(plans):
    path, base = plans / "llama2-7b.yaml", plans / "base" / "a100-cluster.yaml"
    before, base_before = path.read_text(), base.read_text()
    with pytest.raises(PlanError) as info:
        save_changes(path, {"hardware.gpus": 2048, "hardware.mfu": 2})
    assert "must be at most 1" in str(info.value)
    assert path.read_text() == before and base.read_text() == base_before
    assert sorted(p.name for p in plans.iterdir()) == sorted(p.name for p in (REPO / "plans").iterdir())


def test_text_that_is_not_a_plain_scalar_is_quoted():
    assert render_scalar("7 days") == "7 days"
    assert render_scalar("yes") == '"yes"'  # would read back as a boolean
    assert render_scalar("a: b") == '"a: b"'
    assert render_scalar('x"; rm -rf /\n') == '"x\\"; rm -rf /\\n"'
    assert render_scalar(2048) == "2048" and render_scalar(0.42) == "0.42" and render_scalar(2048.0) == "2048"


def test_a_section_cannot_be_replaced_by_a_scalar(plans):
    with pytest.raises(EditError):
        save_changes(plans / "llama2-7b.yaml", {"hardware": 3})


_PROXY = ("name: p\nmodel: {params: 100k, layers: 2, d_model: 32, seq_len: 32, flops_per_token: 6e5}\n"
          "hardware: {peak_flops: 1e12, memory_per_device: 8 GiB, gpus: 1, mfu: 0.01}\n"
          "target: {tokens: 51200, at_batch: 256}\nnoise: {b_crit: 512}  # measured\n")
_STAGES = [{"until": "31.2%", "batch": 512, "b_noise": 600}, {"until": "100%", "batch": 1024, "b_noise": 1100}]


@pytest.mark.parametrize("run, written", [
    # an inline `run` gets an inline list
    ("run: {batch: 256, micro_batch: 8}\n",
     ["-run: {batch: 256, micro_batch: 8}", "+run: {batch: 256, micro_batch: 8, batch_schedule: [{until: 31.2%, "
      "batch: 512, b_noise: 600}, {until: 100%, batch: 1024, b_noise: 1100}]}"]),
    # a block `run` gets block lines after its last entry, before a comment that follows the section
    ("run:\n  batch: 256  # pinned\n  micro_batch: 8\n# the end\n",
     ["+  batch_schedule:", "+    - {until: 31.2%, batch: 512, b_noise: 600}",
      "+    - {until: 100%, batch: 1024, b_noise: 1100}"]),
    # as many stages as before: only the changed values, a stage's comment kept
    ("run:\n  batch_schedule:\n    - {until: 50%, batch: 256}  # first\n    - {until: 100%, batch: 1024}\n",
     ["-    - {until: 50%, batch: 256}  # first", "-    - {until: 100%, batch: 1024}",
      "+    - {until: 31.2%, batch: 512, b_noise: 600}  # first", "+    - {until: 100%, batch: 1024, b_noise: 1100}"]),
    # another number of stages: the list anew, at its indentation, the section's other keys kept
    ("run:\n  batch_schedule:\n    - {until: 50%, batch: 256}\n    - {until: 80%, batch: 512}\n"
     "    - {until: 100%, batch: 2048}\n  # the ramp\n  micro_batch: 8\n",
     ["-    - {until: 50%, batch: 256}", "-    - {until: 80%, batch: 512}", "-    - {until: 100%, batch: 2048}",
      "+    - {until: 31.2%, batch: 512, b_noise: 600}", "+    - {until: 100%, batch: 1024, b_noise: 1100}"]),
])
def test_a_batch_schedule_is_written_as_a_list_in_the_files_own_style(tmp_path, run, written):
    path = tmp_path / "p.yaml"
    path.write_text(_PROXY + run)
    save_changes(path, {"run.batch_schedule": _STAGES})
    after = path.read_text()
    assert changed_lines(_PROXY + run, after) == written
    assert "# measured" in after and all(c in after for c in ("# pinned", "# the end", "# the ramp") if c in run)
    schedule = load_plan(path).run.batch_schedule
    assert [(s.until, s.batch, s.b_noise) for s in schedule] == [(0.312, 512, 600), (1.0, 1024, 1100)]
