"""The adapter: Plan + Solution → LaunchSpec, lr scaling, defaults, refusals; the launch section."""

from __future__ import annotations

import math
import textwrap
from dataclasses import replace
from pathlib import Path

import pytest
from export_specs import make_spec

from budgetdsl.exports.spec import ExportError, launch_spec, scale_lr
from budgetdsl.plan.diagnostics import PlanError
from budgetdsl.plan.loader import load_plan

REPO = Path(__file__).resolve().parents[2]
LLAMA = REPO / "plans" / "llama2-7b.yaml"


def test_lr_scaling_rules() -> None:
    assert scale_lr(3e-4, 4e6, 8e6, "linear") == pytest.approx(6e-4)  # Goyal et al. 2017
    assert scale_lr(3e-4, 4e6, 1e6, "sqrt") == pytest.approx(1.5e-4)  # Adam: √(1/4)
    assert scale_lr(3e-4, 4e6, 1e6, "none") == 3e-4


def _plan(tmp_path: Path, extra: str) -> Path:
    path = tmp_path / "p.yaml"
    path.write_text(f"extends: {LLAMA}\n" + textwrap.dedent(extra))
    return path


def _stub_solution(**kw):
    """The solver's documented keys (issue 3), as its JSON: the adapter reads nothing else."""
    batch = {"tokens": 4194304.0, "sequences": 1024, "micro_batch": 1, "grad_accum": 4,
             "data_parallel": 256}
    sol = {"feasible": True, "gpus": 256, "batch": batch, "steps": 1000, "wall_clock_s": 3600.0,
           "frontier": {"b_crit_tokens": 3e6}, "conflicts": [], "relaxations": []}
    sol.update(kw)
    return sol


def test_adapter_reads_the_solution(tmp_path) -> None:
    plan = load_plan(_plan(tmp_path, "optimizer: {lr: 3e-4, at_batch: 1Mi, scaling: linear, warmup_steps: 10}\n"))
    spec = launch_spec(plan, _stub_solution())
    assert (spec.nodes, spec.gpus_per_node, spec.data_parallel) == (32, 8, 256)
    assert (spec.micro_batch, spec.grad_accum, spec.steps) == (1, 4, 1000)
    assert spec.global_batch_sequences == 1024 and spec.global_batch_tokens == 4194304
    assert spec.lr == pytest.approx(3e-4 * 4)  # linear from 1Mi to 4Mi tokens
    assert spec.time_limit_s == 21 * 86400
    # 1Mi -> 4Mi tokens crosses the 3,000,000-token B_crit: 4,194,304 / 3e6 - 1 = 40 % past it
    assert any(w.startswith("linear lr scaling from B₀ = 1,048,576 to B = 4,194,304 tokens reaches "
                            "40% past B_crit (3,000,000 tokens)") for w in spec.warnings)
    assert {d.key for d in spec.defaulted} >= {"launch.image", "launch.command", "launch.partition"}


@pytest.mark.parametrize(("at_batch", "b_crit", "uncertainty", "warns"), [
    ("4Mi", 4e6, None, False),   # B/B₀ = 1: lr tuned at this batch, nothing rescaled (issue 16)
    ("4Mi", 1e6, None, False),   # far past B_crit, but still B/B₀ = 1
    ("1Mi", 4e6, None, False),   # crosses B_crit by 4.9 %: inside the margin
    ("1Mi", 3e6, None, True),    # crosses by 40 %
    ("1Mi", 3e6, 0.5, False),    # ... inside a stated ±50 % B_crit uncertainty
    ("2Mi", 1e6, None, True),    # tuned past B_crit, rescaled further past it
    ("16Mi", 1e6, None, True),   # tuned far past B_crit, rescaled down: the rule still spans it
])
def test_lr_warning_only_when_the_rescaling_reaches_past_b_crit(tmp_path, at_batch, b_crit,
                                                                uncertainty, warns) -> None:
    plan = load_plan(_plan(tmp_path, f"optimizer: {{lr: 3e-4, at_batch: {at_batch}, scaling: sqrt}}\n"))
    frontier = {"b_crit_tokens": b_crit, "b_crit_uncertainty": uncertainty}
    spec = launch_spec(plan, _stub_solution(frontier=frontier))  # B = 4,194,304 tokens
    assert any("past B_crit" in w for w in spec.warnings) == warns


def test_no_warning_below_b_crit_and_warmup_warning(tmp_path) -> None:
    plan = load_plan(_plan(tmp_path, "optimizer: {lr: 3e-4, at_batch: 1Mi, scaling: linear, warmup_steps: 0}\n"))
    spec = launch_spec(plan, _stub_solution(frontier={"b_crit_tokens": 1e9}))
    assert not any("B_crit" in w for w in spec.warnings)
    assert any("warmup" in w for w in spec.warnings)


@pytest.mark.parametrize(("at_batch", "warns"), [("1Mi", True), ("4Mi", False), ("16Mi", False)])
def test_the_warmup_warning_only_when_linear_scaling_grows_the_lr(tmp_path, at_batch, warns) -> None:
    """Goyal et al. 2017's gradual warmup belongs to a linear rescaling to a larger batch: at the batch
    the lr was tuned at (B/B₀ = 1) or scaled down to a smaller one there is nothing to warm up."""
    plan = load_plan(_plan(tmp_path, f"optimizer: {{lr: 3e-4, at_batch: {at_batch}, scaling: linear, "
                                     "warmup_steps: 0}\n"))
    spec = launch_spec(plan, _stub_solution(frontier={"b_crit_tokens": 1e9}))  # B = 4,194,304 tokens
    assert any("without warmup" in w for w in spec.warnings) == warns


def test_a_solution_without_a_gpu_count_launches_dp_times_the_model_parallel_ranks(tmp_path) -> None:
    """The adapter reads the solver's JSON: where it omits `gpus` the launch has dp · tp · pp · cp of
    them (here 256 replicas × t 2 × p 2 of the plan's pinned layout = 1,024 GPUs on 128 nodes)."""
    plan = load_plan(_plan(tmp_path, "hardware: {tensor_parallel: 2, pipeline_parallel: 2}\n"))
    sol = _stub_solution(gpus=None)
    spec = launch_spec(plan, sol)
    assert spec.data_parallel == 256 and spec.nodes * spec.gpus_per_node == 1024


def test_infeasible_exports_nothing(tmp_path) -> None:
    plan = load_plan(LLAMA)
    with pytest.raises(ExportError, match="infeasible: deadline and flops conflict"):
        launch_spec(plan, _stub_solution(feasible=False, conflicts=["deadline and flops conflict"]))


def test_gpus_must_fill_nodes() -> None:
    plan = load_plan(LLAMA)
    sol = _stub_solution(gpus=12, batch={"micro_batch": 1, "grad_accum": 1, "data_parallel": 12})
    with pytest.raises(ExportError, match="do not fill whole nodes"):
        launch_spec(plan, sol)


def test_fewer_gpus_than_a_node_is_one_node() -> None:
    plan = load_plan(LLAMA)
    spec = launch_spec(plan, _stub_solution(gpus=4, batch={"micro_batch": 2, "grad_accum": 1, "data_parallel": 4}))
    assert (spec.nodes, spec.gpus_per_node) == (1, 4)


def test_the_real_solver(tmp_path) -> None:
    from budgetdsl.solve.solver import solve

    plan = load_plan(LLAMA)
    solution = solve(plan)
    spec = launch_spec(plan, solution)
    assert spec.global_batch_sequences == solution.batch.sequences
    assert spec.gpus == solution.gpus
    expected = 3e-4 * math.sqrt(spec.global_batch_tokens / (4 * 2**20))
    assert spec.lr == pytest.approx(expected)


def test_spec_checks_its_arithmetic() -> None:
    # the product of the degrees it names, context parallelism only where there is some
    with pytest.raises(ValueError, match=r"^tensor 1 × pipeline 1 × data 3 parallel ≠ 2 GPUs$"):
        replace(make_spec(), data_parallel=3)
    with pytest.raises(ValueError, match=r"^tensor 1 × pipeline 1 × context 2 × data 2 parallel ≠ 2 GPUs$"):
        replace(make_spec(), context_parallel=2)
    with pytest.raises(ValueError, match="positive integer"):
        replace(make_spec(), micro_batch=0)


@pytest.mark.parametrize(("launch", "message"), [
    ("image: 'x; rm -rf /'", "is not a container image reference"),
    ("partition: \"gpu'; reboot\"", "is not a Slurm name"),
    ("env: {RANK: '3'}", "RANK is set by the launcher"),
    ("env: {PET_NNODES: '3'}", "PET_NNODES is set by the launcher"),
    ("env: {'BAD NAME': x}", "is not an environment variable name"),
    ("namespace: Team_A", "is not a Kubernetes namespace"),
    ("command: ['--master-addr=evil', 'train.py']", "would be read as a torchrun option"),
    ("command: []", "at least 1 item"),
    ("rdzv_port: 80", "must be at least 1024"),
])
def test_launch_section_is_validated_with_locations(tmp_path, launch: str, message: str) -> None:
    path = _plan(tmp_path, f"launch:\n  {launch}\n")
    with pytest.raises(PlanError) as info:
        load_plan(path)
    text = str(info.value)
    assert message in text and f"{path.name}:3:" in text.replace(str(tmp_path) + "/", ""), text


def test_spec_checks_its_ramp_and_its_experts() -> None:
    """Ramp stages start at 0 tokens and increase, each against the one before it (a third stage
    that goes back is refused though it is after the first); a token may go to every expert."""
    from budgetdsl.exports.spec import BatchStage

    unit = 2 * 2  # micro-batch × data parallel of make_spec (3 accumulations, 5 steps)
    ok = (BatchStage(0, unit, 1, 1), BatchStage(5_000, 2 * unit, 2, 2), BatchStage(9_000, 3 * unit, 3, 2))
    assert make_spec(batch_stages=ok).batch_stages == ok
    back = (*ok[:2], BatchStage(4_000, 3 * unit, 3, 2))
    with pytest.raises(ValueError, match="must start at 0 tokens and increase"):
        make_spec(batch_stages=back)
    every = make_spec(experts=8, experts_per_token=8)
    assert every.experts_per_token == every.experts
    with pytest.raises(ValueError, match="experts_per_token"):
        make_spec(experts=8, experts_per_token=9)


@pytest.mark.parametrize("ep", [2, 4])
def test_a_count_that_does_not_split_into_expert_groups_is_refused(tmp_path, ep) -> None:
    """Routed experts are sharded over expert_parallel ranks (× expert tensor parallelism, which
    defaults to t): 6 GPUs split into groups of 4 do not, and neither do 3 into groups of 2 —
    the export names the rule instead of writing a launch the framework rejects."""
    plan = load_plan(_plan(tmp_path, f"model: {{params: null, experts: 8, experts_per_token: 2}}\n"
                                     f"hardware: {{expert_parallel: {ep}, tensor_parallel: 1}}\n"))
    gpus = ep + ep // 2
    sol = _stub_solution(gpus=gpus, batch={"micro_batch": 1, "grad_accum": 1, "data_parallel": gpus})
    with pytest.raises(ExportError, match=f"= {ep} expert groups"):
        launch_spec(plan, sol)


@pytest.mark.parametrize("name", ["llama-3.1-405b-h100-fp8-16k-gpus-ramp-batch-sweep-final", "Ünïcode/run name",
                                  "x" * 200, "7b_run"])
def test_a_long_or_irregular_run_name_becomes_a_full_length_rfc_1035_label(name) -> None:
    """Kubernetes names a job's pods from the run name: it is made an RFC 1035 label (lower-case
    letters, digits and '-', a letter first, alphanumeric last) of at most 40 characters, kept
    distinct by a digest of the original, and as long as the budget allows (no character lost
    to an off-by-one)."""
    import re

    from budgetdsl.exports._text import dns1035

    label = dns1035(name)
    assert re.fullmatch(r"[a-z]([a-z0-9-]*[a-z0-9])?", label) and len(label) <= 40
    if len(name) > 40 and name.isalnum():  # nothing to replace or strip: the stem fills the budget
        assert len(label) == 40 and label[:33] == name.lower()[:33] and label[33] == "-"
    assert dns1035(name + "-b") != label


@pytest.mark.parametrize("text, shown", [("a\x1b]0;x\x07b", "a\\u001b]0;x\\u0007b"),
                                         ("line\nbreak\t", "line\\nbreak\\t"),
                                         ("\u202eevil", "\\u202eevil"), ("plain é", "plain é")])
def test_a_comment_shows_control_characters_as_their_escapes(text, shown) -> None:
    """Plan text in a generated script's or manifest's comment: a control or bidi character is
    written as its JSON escape, backslash included, so a reviewer reads what the plan holds and
    the comment stays one line; printable text, accents included, stays as written."""
    from budgetdsl.exports._text import comment

    assert comment(text) == shown


def test_a_plan_without_an_optimizer_launches_without_warmup() -> None:
    """No optimizer section: the learning rate and its schedule are the training program's own, so
    the launch asks for no warmup steps (0), and says the lr was left to the program."""
    from budgetdsl.solve.solver import solve

    plan = load_plan(Path(__file__).resolve().parents[2] / "plans" / "minimal.yaml")
    assert plan.optimizer is None
    spec = launch_spec(plan, solve(plan))
    assert spec.warmup_steps == 0 and spec.lr is None
    assert any(d.key == "optimizer.lr" for d in spec.defaulted)


def test_a_run_without_a_ramp_trains_its_batch_times_its_steps() -> None:
    """Megatron's --train-samples for a run at one batch: the global batch in sequences (micro ×
    accumulation × data-parallel) times the steps, 2 × 3 × 2 × 5 = 60 for the hand-built spec."""
    spec = make_spec()
    assert not spec.batch_stages
    assert spec.global_batch_sequences == 12 and spec.total_sequences == 60
