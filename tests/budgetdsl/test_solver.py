"""`solve` on hand-built plans: pinned runs, GPU ranges, infeasibility, memory, uncertainty, calibration."""

import pathlib

import pytest
from pydantic import ValidationError
from solver_plans import DAY, make_plan

from budgetdsl.plan.diagnostics import PlanError
from budgetdsl.plan.loader import load_plan
from budgetdsl.solve.solution import FEASIBLE, Solution, Status
from budgetdsl.solve.solver import solve

REPO = pathlib.Path(__file__).resolve().parents[2]


def test_status_vocabulary_is_closed():
    assert {s.value for s in Status} == {"optimal", "pinned", "infeasible"}
    assert FEASIBLE == {Status.optimal, Status.pinned}


def test_result_is_immutable():
    sol = solve(make_plan())
    with pytest.raises(ValidationError):
        sol.steps = 1  # type: ignore[misc]


def test_balanced_is_clipped_to_the_batch_floor_and_says_which_limit_binds():
    sol = solve(make_plan())  # 1024 replicas × 4096 tokens = 4.19M > B_crit = 3M
    assert sol.status == "optimal"
    assert sol.batch.tokens == 1024 * 4096 and sol.batch.micro_batch == 1 and sol.batch.grad_accum == 1
    floor = sol.constraint("min_batch")
    assert floor.binding and floor.slack == 0
    assert not sol.constraint("deadline").binding
    assert "clipped" in sol.notes[0]


def test_balanced_lands_on_b_crit_when_it_is_feasible_and_not_dominated():
    # predicted utilization with a per-step cost (step_overhead) puts the minimum-time batch B* above
    # B_crit, so B_crit is on
    # the Pareto front of this GPU count
    # (the layout pinned: silence would search it, issue 13; this test is about the batch on one layout)
    plan = make_plan(hardware={"gpus": 64, "mfu": None, "step_overhead": 20.0, "tensor_parallel": 1,
                               "pipeline_parallel": 1, "recompute": "none"},
                     budget={"deadline": 400 * DAY, "gpu_hours": None})
    from budgetdsl.cost.cost_model import build_cost_model
    from budgetdsl.theory import closed_forms_generated as cf

    cm = build_cost_model(plan, 64)
    assert cf.min_time_batch(3e6, cm.flops_per_token, cm.rate, cm.fixed_time) > 3e6
    sol = solve(plan)
    # B_crit = 3M is 11.44 sequences per replica: 11 (x = 0.961) scores 2 + x + 1/x = 4.0015,
    # 12 (x = 1.049) 4.0022, so the solver launches 11
    assert sol.batch.sequences == 11 * 64
    assert sol.frontier.x == pytest.approx(11 * 64 * 4096 / 3e6, rel=1e-12)


def test_balanced_never_takes_a_dominated_batch_on_a_fixed_gpu_count():
    # Declared MFU and no per-step cost: W(B) = S_min (1 + B_crit/B) f B / rate grows with B, so
    # every batch above the floor is slower, costs more GPU-hours and spends more FLOPs (issue 13)
    sol = solve(make_plan(hardware={"gpus": 64}, budget={"deadline": 400 * DAY, "gpu_hours": None}))
    assert sol.batch.sequences == 64  # one sequence per replica
    assert any("dominated" in n for n in sol.notes)
    b_crit_run = solve(make_plan(hardware={"gpus": 64}, budget={"deadline": 400 * DAY, "gpu_hours": None},
                                 run={"batch": 11 * 64 * 4096}))
    assert b_crit_run.wall_clock_s > sol.wall_clock_s and b_crit_run.flops > sol.flops


def test_min_time_takes_the_square_root_batch():
    plan = make_plan(objective="min_time", hardware={"gpus": 64, "step_overhead": 0.5},
                     budget={"deadline": None, "flops": None, "gpu_hours": None})
    sol = solve(plan)
    from budgetdsl.cost.cost_model import build_cost_model
    from budgetdsl.theory import closed_forms_generated as cf

    cm = build_cost_model(plan, 64)
    b_star = cf.min_time_batch(3e6, cm.flops_per_token, cm.rate, cm.fixed_time)
    assert abs(sol.batch.tokens - b_star) <= 64 * 4096  # within one sequence per replica


def test_pinned_run_is_evaluated_and_compared():
    plan = load_plan(REPO / "plans/llama2-7b.yaml")
    sol = solve(plan)
    assert sol.status == "pinned"
    assert (sol.batch.tokens, sol.batch.micro_batch, sol.batch.grad_accum) == (4194304.0, 1, 1)
    assert sol.pinned is not None and sol.pinned.objective_feasible
    assert sol.pinned.batch_ratio == pytest.approx(sol.batch.tokens / sol.pinned.objective_batch_tokens)
    # at the batch the target was counted at, B_crit's uncertainty does not move the token count
    u = sol.uncertainty
    assert u.tokens.low == u.tokens.high == sol.tokens and u.all_hold


def test_a_pinned_batch_where_one_sequence_fits_accumulates_micro_batches_of_one():
    """A pinned batch of 8 sequences of 8,192 tokens per replica on 64 GPUs without tensor or
    pipeline parallelism, where one sequence fits in memory and two do not (micro_batch_max 1):
    the run is 8 micro-batches of one sequence, within memory, not 4 of two."""
    from budgetdsl.cost.cost_model import build_cost_model

    plan = make_plan(model={"seq_len": 8192}, run={"batch": 64 * 8192 * 8},
                     hardware={"gpus": 64, "tensor_parallel": 1, "pipeline_parallel": 1, "recompute": "none"},
                     budget={"deadline": None, "flops": None, "gpu_hours": None})
    assert build_cost_model(plan, 64).micro_batch_max == 1
    sol = solve(plan)
    assert sol.status == "pinned"
    assert (sol.batch.micro_batch, sol.batch.grad_accum) == (1, 8)
    assert sol.constraint("memory").satisfied


def test_pinned_run_that_breaks_a_limit_is_infeasible_with_its_relaxation():
    plan = make_plan(run={"batch": 1024 * 4096 * 4, "micro_batch": 2},
                     budget={"flops": 1e23, "deadline": None, "gpu_hours": None})
    sol = solve(plan)
    assert sol.status == "infeasible" and not sol.feasible
    (r,) = [r for r in sol.relaxations if r.name == "flops"]
    assert r.required == sol.flops > 1e23
    assert any(c.startswith("flops") for c in sol.conflicts)
    relaxed = plan.model_copy(update={"budget": plan.budget.model_copy(update={"flops": r.required})})
    assert solve(relaxed).status == "pinned"


@pytest.mark.parametrize("run, message", [
    ({"batch": 4096 * 1024 + 1}, "not a whole number of 4096-token sequences"),
    ({"batch": 4096 * 1000}, "does not divide over 1024 data-parallel replicas"),
    ({"batch": 4096 * 1024 * 3, "micro_batch": 2}, "run.micro_batch (2) does not divide the 3 sequences"),
])
def test_a_pinned_batch_that_cannot_launch_is_a_plan_error(run, message):
    with pytest.raises(PlanError) as exc:
        solve(make_plan(run=run))
    (d,) = exc.value.diagnostics
    assert d.code == "run-batch" and message in d.message


def test_infeasible_plan_names_conflicts_and_smallest_changes():
    plan = make_plan(budget={"deadline": 7.5 * DAY, "flops": 1.2e23, "gpu_hours": None})
    # 1024 GPUs need 8.09 days at the declared MFU; the FLOP budget caps the batch floor at ~1500 GPUs
    sol = solve(plan)
    assert sol.status == "infeasible"
    assert sol.steps is None and sol.batch.tokens is None
    assert any("deadline" in c for c in sol.conflicts)
    by = {r.name: r for r in sol.relaxations}
    assert by["deadline"].required > 7.5 * DAY and by["deadline"].message.startswith("deadline ≥ ")
    assert 1024 < by["gpus"].required <= 1512
    assert by["flops"].required is None and "conflict without it" in by["flops"].message
    # each change alone makes the plan feasible, and a slightly smaller one does not
    for name in ("deadline",):
        ok = plan.model_copy(update={"budget": plan.budget.model_copy(update={name: by[name].required})})
        assert solve(ok).feasible
        short = plan.model_copy(update={"budget": plan.budget.model_copy(update={name: by[name].required * 0.99})})
        assert not solve(short).feasible
    more = plan.model_copy(update={"hardware": plan.hardware.model_copy(update={"gpus": int(by["gpus"].required)})})
    assert solve(more).feasible


def test_no_gpu_count_helps_when_the_flop_budget_is_below_any_batch():
    sol = solve(make_plan(budget={"flops": 1e21}))  # f·E_min ≈ 3.9e22
    (g,) = [r for r in sol.relaxations if r.name == "gpus"]
    assert g.required is None and g.message.startswith("no GPU count in")
    assert "flops: no global batch meets it" in g.message
    (f,) = [r for r in sol.relaxations if r.name == "flops"]
    assert f.required > 3.9e22


def test_a_hopeless_gpu_search_says_where_its_ends_come_from(tmp_path):
    """issue 16: a 2-day deadline for a 70B; the span's ends are explained, not only listed."""
    import re

    path = tmp_path / "p.yaml"
    path.write_text(f"extends: {REPO / 'plans' / 'llama2-70b.yaml'}\nbudget: {{deadline: 2 days}}\n")
    plan = load_plan(path)
    (g,) = [r for r in solve(plan).relaxations if r.name == "gpus"]
    m = re.match(r"no GPU count in ([\d,]+)–([\d,]+) helps \(", g.message)
    assert m, g.message
    low, high = (int(v.replace(",", "")) for v in m.groups())
    t, gpus = plan.hardware.tensor_parallel, int(plan.hardware.gpus)
    assert low == t  # tensor 8 × pipeline 1: the fewest GPUs the layout launches ...
    assert (f"{low:,}, the fewest GPUs the layout launches (tensor {t} × pipeline 1), does not fit in memory"
            in g.message)
    assert gpus < high <= 64 * gpus and high % plan.hardware.gpus_per_node == 0  # ... and the search's reach
    assert f"{high:,}, the largest launchable count the search tries (up to 64× the plan's {gpus:,})" in g.message
    # what limits the top: one sequence per replica past that data-parallel degree is too big a batch
    dp_max = int(re.search(r"past data parallel ([\d,]+) one sequence per replica", g.message)[1].replace(",", ""))
    assert dp_max < high // t


def test_a_hopeless_gpu_search_with_no_batch_at_the_top_says_so(tmp_path):
    """A deadline below S_min × the fixed step time: at the search's top count no batch meets the
    limits at all, so the message must not speak of a largest data-parallel degree (it said
    'past data parallel 0 ... (0 tokens)')."""
    path = tmp_path / "p.yaml"
    path.write_text(f"extends: {REPO / 'plans' / 'minimal.yaml'}\nbudget: {{deadline: 10 min}}\n")
    sol = solve(load_plan(path))
    assert not sol.feasible
    (g,) = [r for r in sol.relaxations if r.name == "gpus"]
    assert g.required is None and g.message.startswith("no GPU count in")
    assert "no global batch meets the limits there at all" in g.message
    assert "past data parallel" not in g.message and "(0 tokens)" not in g.message


def test_memory_infeasible_names_remedies_with_numbers():
    plan = make_plan(model={"params": 70e9, "layers": 80, "d_model": 8192, "heads": 64},
                     hardware={"gpus": 64, "zero": 0}, budget={"deadline": None, "flops": None, "gpu_hours": None})
    sol = solve(plan)
    assert sol.status == "infeasible"
    assert sol.conflicts[0].startswith("memory: one sequence per device needs")
    mem = sol.constraint("memory")
    assert mem.binding and mem.value > mem.limit
    remedies = {m.change: m for m in sol.memory_remedies}
    assert remedies["hardware.zero: 3"].memory_per_device < remedies["hardware.zero: 1"].memory_per_device
    # no next step of one knob fits (ZeRO-3 still holds 109 GiB), so combinations are offered
    assert not remedies["hardware.zero: 3"].fits and not remedies["hardware.tensor_parallel: 2"].fits
    fitting = [m for m in sol.memory_remedies if m.fits]
    assert fitting
    # the combinations: the three with the fewest changes (then the most room), not every one found
    combined = [m.change.count(" with ") for m in sol.memory_remedies if " with " in m.change]
    assert len(combined) == 3 and combined == sorted(combined)
    for remedy in fitting:  # apply each: the plan then fits, with the micro-batch it promised
        hw = {"gpus": 64, "zero": 0}
        for part in remedy.change.split(" with "):
            key, value = part.removeprefix("hardware.").split(": ")
            hw[key] = int(value) if value.isdigit() else value
        fixed = solve(make_plan(model=plan.model.model_dump(), hardware=hw,
                                budget={"deadline": None, "flops": None, "gpu_hours": None}))
        assert fixed.feasible, remedy
        assert fixed.assumptions["micro_batch_max"].value == remedy.micro_batch_max


def _fixed(plan, gpus):
    return plan.model_copy(update={"hardware": plan.hardware.model_copy(update={"gpus": gpus})})


@pytest.mark.parametrize("objective", ["min_cost", "min_time", "min_flops", "balanced"])
def test_gpu_range_choice_matches_a_brute_force_over_counts(objective):
    plan = make_plan(objective=objective, hardware={"gpus": {"min": 64, "max": 1024, "step": 64},
                                                    "step_overhead": 0.05},
                     budget={"deadline": 30 * DAY, "flops": None, "gpu_hours": None, "usd_per_gpu_hour": 2.0})
    sol = solve(plan)
    assert sol.feasible and sol.gpu_choice is not None and sol.gpu_choice.chosen == sol.gpus
    def measure(s: Solution) -> float:
        return {"min_cost": s.usd, "min_time": s.wall_clock_s, "min_flops": s.flops,
                "balanced": s.frontier.s_over_smin * s.frontier.e_over_emin}[objective]
    fixed = {g: solve(_fixed(plan, g)) for g in range(64, 1025, 64)}
    feasible = {g: measure(s) for g, s in fixed.items() if s.feasible}
    best = min(feasible.values())
    fewest = min(g for g, v in feasible.items() if v <= best * (1 + 1e-12))
    assert sol.gpus == fewest
    assert measure(sol) == pytest.approx(best, rel=1e-12)
    if objective == "min_cost":  # the fewest GPUs that meet the deadline
        assert all(not fixed[g].feasible for g in range(64, sol.gpus, 64))
        assert "fewer GPUs miss the deadline" in sol.gpu_choice.reason or sol.gpus == 64


def test_uncertainty_ranges_cover_the_nominal_and_flag_broken_limits():
    plan = make_plan(hardware={"gpus": 64}, target={"tokens": None, "at_batch": None, "min_tokens": 8e11},
                     noise={"uncertainty": 0.5}, budget={"deadline": None, "gpu_hours": None, "flops": None})
    sol = solve(plan)
    u = sol.uncertainty
    assert u.b_crit_tokens.low == pytest.approx(1.5e6) and u.b_crit_tokens.high == pytest.approx(4.5e6)
    assert u.steps.low <= sol.steps <= u.steps.high and u.steps.low < u.steps.high
    assert u.wall_clock_s.low <= sol.wall_clock_s <= u.wall_clock_s.high
    tight = plan.model_copy(update={"budget": plan.budget.model_copy(update={"flops": sol.flops * 1.0001})})
    u2 = solve(tight).uncertainty
    assert u2.limits_hold["flops"] is False and not u2.all_hold


# -- B_crit from a calibration file --------------------------------------------------------------

class _StubCalibration:
    def __init__(self):
        self.calls = []

    def b_crit_tokens_at(self, loss, extrapolate=False):
        self.calls.append((loss, extrapolate))
        if not 2.0 <= loss <= 4.0 and not extrapolate:
            raise ValueError(f"at_loss {loss} is outside the calibrated range 2.0–4.0 nats")
        return 1.5e6 / loss, 0.2


def _calibrated_plan(tmp_path, at_loss, extra=""):
    (tmp_path / "cal").mkdir()
    (tmp_path / "cal" / "proxy.json").write_text("{}")
    plan = tmp_path / "plans" / "p.yaml"
    plan.parent.mkdir()
    plan.write_text(f"""name: calibrated
model: {{params: 1e9, layers: 16, d_model: 2048, heads: 16, seq_len: 2048}}
hardware: {{gpu: H100-SXM5-80GB, gpus: 64}}
target: {{min_tokens: 2e10}}
noise:
  calibration: ../cal/proxy.json
  at_loss: {at_loss}
{extra}""")
    return plan


def test_calibration_is_read_relative_to_the_plan_and_reports_its_source(tmp_path, monkeypatch):
    from budgetdsl.plan import noise as noise_source
    stub = _StubCalibration()
    seen = []
    monkeypatch.setattr(noise_source, "_load_calibration", lambda path, mtime, inside: seen.append(path) or stub)
    sol = solve(load_plan(_calibrated_plan(tmp_path, 3.0)))
    assert pathlib.Path(seen[0]).resolve() == (tmp_path / "cal" / "proxy.json").resolve()
    assert sol.frontier.b_crit_tokens == pytest.approx(5e5)
    assert sol.frontier.b_crit_uncertainty == 0.2  # the calibration's own, when the plan gives none
    assert "calibration proxy.json" in sol.frontier.b_crit_source and "3" in sol.frontier.b_crit_source


def test_a_loss_outside_the_calibration_is_a_located_error(tmp_path, monkeypatch):
    from budgetdsl.plan import noise as noise_source
    monkeypatch.setattr(noise_source, "_load_calibration", lambda path, mtime, inside: _StubCalibration())
    with pytest.raises(PlanError) as exc:
        solve(load_plan(_calibrated_plan(tmp_path, 1.5)))
    (d,) = exc.value.diagnostics
    assert d.code == "calibration-range" and "outside the calibrated range" in d.message
    assert d.location.file.endswith("p.yaml") and d.location.line == 7  # the at_loss line
    assert "extrapolate" in d.hint


def test_a_missing_calibration_file_is_a_located_error(tmp_path):
    plan = _calibrated_plan(tmp_path, 3.0)
    (tmp_path / "cal" / "proxy.json").unlink()
    with pytest.raises(PlanError) as exc:
        solve(load_plan(plan))
    (d,) = exc.value.diagnostics
    assert d.code == "calibration-missing" and d.location.line == 6


def test_a_real_calibration_file_end_to_end(tmp_path):
    """The calibration fixture (issue 4) read through a plan: B_crit and its uncertainty come from it."""
    fixtures = sorted((REPO / "tests/fixtures/calibration").glob("*.json"))
    if not fixtures:
        pytest.skip("no calibration fixture yet (issue 4 writes it)")
    from budgetdsl.plan.calibration_file import load_calibration

    cal = load_calibration(fixtures[0])
    loss = (cal.fit.loss_min + cal.fit.loss_max) / 2 if cal.fit is not None else None
    if loss is None:
        pytest.skip("fixture without a fit")
    b_crit, rel = cal.b_crit_tokens_at(loss)
    plan = tmp_path / "p.yaml"
    # The proxy's own sequence length: a B_crit of a few hundred byte-tokens is below one 2048-token
    # sequence, which the planner refuses (issue 15, tests/budgetdsl/test_transfer_checks.py).
    plan.write_text(f"""name: calibrated
model: {{params: 1e9, layers: 16, d_model: 2048, heads: 16, seq_len: 64}}
hardware: {{gpu: H100-SXM5-80GB, gpus: 8, zero: 1}}
target: {{min_tokens: 2e10}}
noise: {{calibration: {fixtures[0]}, at_loss: {loss!r}}}
""")
    sol = solve(load_plan(plan))
    assert sol.frontier.b_crit_tokens == pytest.approx(b_crit, rel=1e-12)
    assert sol.frontier.b_crit_uncertainty == (pytest.approx(rel) if rel else None)
    assert fixtures[0].name in sol.frontier.b_crit_source


def _dominates(a, b):
    return all(x <= y for x, y in zip(a, b)) and any(x < y for x, y in zip(a, b))


@pytest.mark.parametrize("name", ["gpt3-175b.yaml", "llama2-7b.yaml", "llama2-13b.yaml", "minimal.yaml"])
def test_notes_say_when_an_objective_dominates_the_launched_run(name):
    """issue 16: a pinned run that an objective's pick beats on wall clock, cost and FLOPs is
    named in the notes with the pick's figures; a run nothing dominates gets no such note."""
    sol = solve(load_plan(REPO / "plans" / name))
    cost = (lambda o: o.usd) if sol.usd is not None else (lambda o: o.gpu_hours)
    mine = (sol.wall_clock_s, cost(sol), sol.flops)
    better = [p for p in sol.front if p.objectives and _dominates((p.wall_clock_s, cost(p), p.flops), mine)]
    notes = [n for n in sol.notes if " is dominated: " in n]
    assert len(notes) == len(better)
    for p, note in zip(better, notes):
        assert note.startswith("the pinned run is dominated: " if sol.status == "pinned" else "the launched run")
        assert f"on {p.gpus:,} GPUs" in note and p.objectives[-1] in note
    if name == "gpt3-175b.yaml":  # GPT-3's published 3.2M-token batch, pinned: balanced beats it on every axis
        assert notes and "balanced" in notes[0]
    if sol.status == "optimal":  # the solver's own pick is never dominated
        assert not notes


@pytest.mark.parametrize("name, snapped", [("chinchilla-70b.yaml", False), ("minimal.yaml", True)])
def test_a_snapping_note_only_where_the_launched_batch_left_the_optimum(name, snapped):
    """Chinchilla's min_flops pick is the smallest batch its limits allow, one sequence per replica:
    launched as computed, no snapping note. minimal.yaml's optimum lies between whole sequences: the
    note names the launched split."""
    sol = solve(load_plan(REPO / "plans" / name))
    notes = [n for n in sol.notes if n.startswith("snapped to ")]
    assert sol.status == "optimal" and len(notes) == snapped
    b = sol.batch
    if snapped:
        assert notes[0].startswith(f"snapped to {b.sequences} sequences = {b.micro_batch} × {b.grad_accum} "
                                   f"accumulation × {b.data_parallel} replicas")


@pytest.mark.parametrize("name, pinned", [("minimal.yaml", False), ("llama2-7b.yaml", True)])
def test_only_a_pinned_batch_is_compared_with_the_objectives_pick(name, pinned):
    """The comparison with the objective's own choice belongs to a plan that pins run.batch; a plan
    whose batch the solver chose has nothing to compare (its JSON's `pinned` is null)."""
    sol = solve(load_plan(REPO / "plans" / name))
    assert (sol.pinned is not None) == pinned
    if pinned:
        assert sol.pinned.summary.startswith(f"the {sol.objective} choice is B = ")


def test_a_pinned_micro_batch_that_divides_no_replica_suggests_the_three_largest_that_do(tmp_path):
    """A searched layout with run.batch 4Mi (2,048 sequences over 1-64 replicas: powers of two per
    replica) and run.micro_batch 24: no layout launches it. The hint offers the three largest sizes
    up to 24 that divide some replica's sequences, largest first, and `auto`."""
    text = (REPO / "plans" / "minimal.yaml").read_text() + "run:\n  batch: 4Mi\n  micro_batch: 24\n"
    path = tmp_path / "plan.yaml"
    path.write_text(text)
    with pytest.raises(PlanError) as exc:
        solve(load_plan(path))
    (d,) = exc.value.diagnostics
    assert d.code == "run-batch" and "run.micro_batch (24) divides the sequences per replica on no" in d.message
    assert d.hint == "make run.micro_batch divide them (e.g. 16 or 8 or 4), or write run.micro_batch: auto"


def test_the_run_batch_error_lists_eight_replica_sizes_at_most(tmp_path):
    """2,520 sequences (many divisors) over a range of 1-64 GPUs: dozens of per-replica counts,
    none divisible by 11. The message lists the eight smallest and an ellipsis, not all of them."""
    text = (REPO / "plans" / "minimal.yaml").read_text().replace("  gpus: 64", "  gpus: {min: 1, max: 64}")
    path = tmp_path / "plan.yaml"
    path.write_text(text + "run:\n  batch: 2520 * model.seq_len\n  micro_batch: 11\n")
    with pytest.raises(PlanError) as exc:
        solve(load_plan(path))
    (d,) = exc.value.diagnostics
    assert "gives 45, 63, 90, 105, 126, 180, 210, 252, … per data-parallel replica" in d.message
    assert "(e.g. 10 or 9 or 8)" in d.hint


def test_gpu_relaxations_try_the_next_64_counts_then_about_ten_percent_steps():
    """The GPU counts a relaxation tries past the plan's (`relaxations._next_counts`): the next 64
    launchable counts one by one (8-GPU nodes: 72, 80, …, 576 from 64), then steps of about 10 %
    rounded to whole nodes (632, 688, …), so a far count costs a few hundred solves at most."""
    from budgetdsl.solve.context import Context
    from budgetdsl.solve.relaxations import _next_counts

    plan = make_plan(hardware={"gpus": 64})
    up = _next_counts(Context(plan, None, None, None, ""), 64, +1)  # type: ignore[arg-type]
    assert up[:64] == list(range(72, 577, 8))
    assert up[64:67] == [632, 688, 752]
    assert _next_counts(Context(plan, None, None, None, ""), 64, -1)[:8] == [56, 48, 40, 32, 24, 16, 8, 7]  # type: ignore[arg-type]


def test_a_gpu_relaxation_past_the_linear_counts_names_the_fewest_that_suffice():
    """Past the next 64 counts the relaxation steps ~10 % and bisects back over the launchable
    counts between: the count it names is feasible and the launchable count below it (one node
    fewer) is not, so the advice is the least the plan needs — between two steps (an 8-day
    deadline) and on a step itself (a deadline just above the wall clock a step count reaches)."""
    from budgetdsl.solve.context import Context
    from budgetdsl.solve.relaxations import _next_counts

    def with_gpus(plan, n, **update):
        return plan.model_copy(update={"hardware": plan.hardware.model_copy(update={"gpus": n}), **update})

    loose = make_plan(hardware={"gpus": 64}, budget={"deadline": 400 * DAY, "flops": None, "gpu_hours": None})
    on_step = _next_counts(Context(loose, None, None, None, ""), 64, +1)[64 + 7]  # type: ignore[arg-type]
    reached = solve(with_gpus(loose, on_step, objective="min_time")).wall_clock_s
    for deadline in (8 * DAY, reached * (1 + 1e-9)):
        plan = loose.model_copy(update={"budget": loose.budget.model_copy(update={"deadline": deadline})})
        (g,) = [r for r in solve(plan).relaxations if r.name == "gpus"]
        need = int(g.required)
        assert need > 64 + 64 * 8  # found in the ~10 % steps, not among the next 64 counts
        assert (solve(with_gpus(plan, need - 8)).feasible, solve(with_gpus(plan, need)).feasible) == (False, True)
        if deadline != 8 * DAY:
            assert need == on_step


@pytest.mark.parametrize("hardware", [
    {"gpus": 64, "tensor_parallel": 1, "pipeline_parallel": 1},
    {"gpus": 64, "tensor_parallel": 8, "pipeline_parallel": 1},
    {"gpus": 64, "tensor_parallel": 2, "pipeline_parallel": 1},  # unit 2: 2, 4, 6, 8 inside a node
    {"gpus": 48, "tensor_parallel": 4, "pipeline_parallel": 3},  # unit 12: whole nodes are multiples of 24
    {"gpus": 72, "tensor_parallel": 2, "pipeline_parallel": 3, "gpus_per_node": 4},  # unit 6 above a node
])
def test_the_gpu_relaxations_counts_are_every_launchable_count_in_order(hardware):
    """The bisection's and the ladders' counts (`relaxations._Launchable`, in closed form) are
    exactly the counts in [lo, hi] the layout launches on, sorted, with nothing past either end: the
    same list as asking `hardware.layout.launchable` of every count, for ranges that start at 1,
    inside a node and beyond it. Iterating the sequence ends at its length (IndexError past it)."""
    from budgetdsl.hardware.layout import launchable
    from budgetdsl.solve.context import Context
    from budgetdsl.solve.relaxations import _Launchable

    plan = make_plan(hardware=hardware)
    hw = plan.hardware
    ctx = Context(plan, None, None, None, "")  # type: ignore[arg-type]
    for lo, hi in ((1, 1), (1, 200), (2, 7), (3, 20), (5, 13), (7, 96), (24, 24), (25, 47), (100, 1000), (9, 3)):
        counts = _Launchable(ctx, lo, hi)
        brute = [g for g in range(lo, hi + 1)
                 if launchable(g, hw.tensor_parallel, hw.pipeline_parallel, hw.gpus_per_node)]
        assert list(counts) == brute and len(counts) == len(brute), (lo, hi)
        with pytest.raises(IndexError):
            counts[len(brute)]


def test_a_gpu_relaxation_down_reaches_the_fewest_gpus_the_layout_launches():
    """A FLOP budget that only one replica's batch meets: E = E_min(1 + B/B_crit), so one sequence
    of 4,096 tokens per step (tensor 8 on 8 GPUs, one replica) spends f·E_min(1 + 4096/B_crit) and
    two (16 GPUs, the plan's) f·E_min(1 + 8192/B_crit). With a budget between the two, the advice is
    the layout's own unit, 8 GPUs, the last count the downward search must try (it stopped one
    before it when the within-node counts started at 2·unit)."""
    def at(gpus, flops=None, objective="min_flops"):
        return make_plan(hardware={"gpus": gpus, "tensor_parallel": 8}, objective=objective,
                         budget={"deadline": None, "gpu_hours": None, "flops": flops})

    one, two = solve(at(8)), solve(at(16))
    assert (one.batch.tokens, two.batch.tokens) == (4096, 8192)
    # (to whole steps: the token counts round up to a multiple of the batch)
    assert two.flops / one.flops == pytest.approx((1 + 8192 / 3e6) / (1 + 4096 / 3e6), rel=1e-8)
    sol = solve(at(16, (one.flops + two.flops) / 2, "balanced"))
    assert sol.status == "infeasible"
    (g,) = [r for r in sol.relaxations if r.name == "gpus"]
    assert (g.required, g.message) == (8.0, "GPUs ≤ 8 (now 16)")
    assert solve(at(8, (one.flops + two.flops) / 2, "balanced")).feasible


def test_gpu_relaxations_reach_the_gpu_cap_itself():
    """The ~10 % steps stop at 64× the plan's count or at MAX_GPUS, both included: from 16,128
    GPUs the last count tried is MAX_GPUS exactly."""
    from budgetdsl.plan.model import MAX_GPUS
    from budgetdsl.solve.context import Context
    from budgetdsl.solve.relaxations import _next_counts

    plan = make_plan(hardware={"gpus": 16128})
    assert _next_counts(Context(plan, None, None, None, ""), 16128, +1)[-1] == MAX_GPUS  # type: ignore[arg-type]


def test_a_pinned_batch_written_as_an_expression_tolerates_float_noise():
    """`run.batch` as arithmetic (0.1 × 3 × 4096 × 10 / 3 × 100,000 tokens is 409,600,000 plus
    float noise, 100,000.00000000003 sequences of 4,096) is 100,000 whole sequences: the check
    tolerates noise relative to the count, and a real fraction of a sequence is still refused."""
    from budgetdsl.plan.model import Run
    from budgetdsl.solve.context import pinned_sequences

    assert pinned_sequences(Run(batch=0.1 * 3 * 4096 * 10 / 3 * 100000), 4096) == 100_000
    assert pinned_sequences(Run(batch=409_600_000 + 4096 * 1e-3), 4096) is None


def test_a_relaxation_never_asks_for_the_figure_the_plan_already_has():
    """A limit a hair short (0.07 % for a FLOP budget, 1 s of a day) used to read "flops ≥ 3.9e22
    FLOP (now 3.9e22 FLOP)": where the two round alike the line gives the gap as a share."""
    from budgetdsl.solve.relaxations import needs

    line = needs("flops", 3.9027e22, 3.9e22)
    assert line == "flops ≥ 3.9e22 FLOP (now 3.9e22 FLOP: 0.069 % more)"
    assert needs("deadline", 86401.0, 86400.0).endswith("(now 24 h: 0.0012 % more)")
    assert needs("flops", 4.5e22, 3.9e22) == "flops ≥ 4.5e22 FLOP (now 3.9e22 FLOP)"  # apart: as before
