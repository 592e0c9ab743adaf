"""A time limit's interval of batches with a pipeline: the reference line T(B) = f·B/rate + c
(one sequence a micro-batch) bounds no larger micro-batch's step — each micro-batch pays the
collectives' latency once, and the bubble keeps any one line from bounding the others — so each
size's own interval is a piece of the batches that meet the limit (`placement.size_intervals`).
Without them a deadline a hair above a plan's own answer was declared unmeetable (44 of 256
pipelined layouts of plans/minimal.yaml)."""

import shutil
from pathlib import Path

import pytest

from budgetdsl.cost.cost_model import Split, build_cost_model
from budgetdsl.plan.loader import load_plan
from budgetdsl.solve.placement import HULL_SIZES, Limits, evaluate, limit_intervals, place, size_intervals
from budgetdsl.solve.solver import solve
from budgetdsl.theory.frontier import Frontier

REPO = Path(__file__).resolve().parents[2]


def _plan(**hardware):
    plan = load_plan(REPO / "plans" / "minimal.yaml")
    return plan.model_copy(update={"hardware": plan.hardware.model_copy(update=dict(
        stack="megatron-core", recompute="none", **hardware))})




@pytest.mark.parametrize("hardware", [
    dict(tensor_parallel=8, pipeline_parallel=2, zero=0, network=5e10),
    dict(tensor_parallel=8, pipeline_parallel=4, zero=1, network=1.25e9),
    dict(tensor_parallel=8, pipeline_parallel=2, zero=1, network=1.25e9, intra_node_network=32e9,
         gpu="A100-SXM4-80GB"),
])
def test_a_deadline_a_hair_above_the_answer_is_met(hardware):
    plan = _plan(**hardware)
    base = solve(plan)
    assert base.feasible and base.batch.micro_batch > 1  # the answer runs more than one sequence a micro-batch
    for objective in ("min_time", "balanced"):
        tight = plan.model_copy(update={"objective": objective, "budget": plan.budget.model_copy(
            update={"deadline": base.wall_clock_s * (1 + 1e-6)})})
        assert solve(tight).feasible, objective


@pytest.mark.parametrize("t,p,zero,network", [(8, 2, 0, 5e10), (8, 4, 1, 1.25e9), (2, 4, 3, 1.25e9)])
def test_every_split_that_meets_a_deadline_is_in_a_piece(t, p, zero, network):
    """Brute force: every micro-batch that fits, every accumulation up to 64; a split whose wall
    clock meets the deadline has its batch in the reference line's interval or in its own
    micro-batch size's piece (`size_intervals`; sizes above HULL_SIZES: the line below them)."""
    plan = _plan(tensor_parallel=t, pipeline_parallel=p, zero=zero, network=network)
    cm = build_cost_model(plan, 64, Split(zero, t, p, "none", True))
    fr = Frontier(b_crit=1e6, e_min=1.2e10)
    mm = cm.micro_batch_max
    walls = {(b, m): evaluate(cm, fr, Limits(), b, m, mm) for b in range(1, min(mm, 24) + 1) for m in range(1, 65)}
    outside = 0
    for cfg in list(walls.values())[::97]:  # deadlines at a spread of the splits' own wall clocks
        deadline = cfg.wall * (1 + 1e-9)
        ref = limit_intervals(cm, fr, Limits(deadline=deadline))["deadline"]
        pieces = {b: (lo, hi) for b, lo, hi, ok in size_intervals(cm, fr, deadline, mm) if ok}
        for c in walls.values():
            if c.wall > deadline:
                continue
            own = pieces.get(c.micro_batch if c.micro_batch <= HULL_SIZES else 0)
            inside = [iv for iv in (ref, own) if iv is not None and iv[0] * (1 - 1e-9) <= c.batch <= iv[1] * (1 + 1e-9)]
            outside += ref is None or not (ref[0] <= c.batch <= ref[1])
            assert inside, (c.micro_batch, c.grad_accum, c.batch, ref, own)
    assert outside  # the reference line alone misses some: the pieces are needed


def test_a_sweep_of_deadlines_near_the_answer_equals_solve(tmp_path, monkeypatch):
    """Deadlines from 3 % under to 9 % over a pipelined plan's own wall clock, every objective: the
    sweep kernel weighs the micro-batch sizes' pieces as `place` does (every row equals solve()),
    and decides nearly every row itself, its binding limits from the widened interval too."""
    from budgetdsl.plan.loader import load_merged, read_merged
    from budgetdsl.solve.sweep import Setting, sweep
    from tests.budgetdsl.test_sweep_kernel import differences

    monkeypatch.setenv("BUDGETDSL_SWEEP_SCALAR", "0")
    shutil.copytree(REPO / "plans" / "base", tmp_path / "base")
    path = tmp_path / "plan.yaml"
    path.write_text((REPO / "plans" / "minimal.yaml").read_text().replace("  gpus: 64", "  gpus: 64\n  zero: 0\n"
                    "  tensor_parallel: 8\n  pipeline_parallel: 2\n  recompute: none\n  stack: megatron-core\n"
                    "  network: 50 GB/s") + "budget:\n  usd_per_gpu_hour: 2\n")
    source = read_merged(path)
    wall = solve(load_merged(source)).wall_clock_s
    settings = [Setting("budget.deadline", tuple(f"{wall * (0.97 + k * 0.006):.17g} s" for k in range(20))),
                Setting("noise.b_crit", ("300k", "1M", "3M")),
                Setting("objective", ("balanced", "min_time", "min_flops", "min_cost"))]
    kernel, scalar = sweep(source, settings, full=False), sweep(source, settings, full=True)
    assert differences(kernel, scalar, settings) == []
    feasible = [k for k, s in zip(kernel, scalar) if s.summary is not None and s.summary.feasible]
    assert len(feasible) >= len(kernel) // 2
    assert sum(k.solution is None for k in kernel) >= 0.95 * len(kernel)  # the sizes' rows too (widened bindings)


@pytest.mark.parametrize("t,p,zero,network,gpu", [
    (8, 2, 0, 5e10, "H100-SXM5-80GB"), (4, 2, 1, 1.25e9, "H100-SXM5-80GB"), (8, 4, 0, 5e10, "A100-SXM4-80GB")])
def test_the_kernel_places_as_place_where_the_sizes_widen(t, p, zero, network, gpu):
    """The sweep kernel's placement (`sweep_kernel._place`) on deadlines around the splits' own
    wall clocks equals `place`'s, split for split, for every objective it places — above all
    where a pipeline's micro-batch sizes widen the interval (`place` weighed their pieces)."""
    import numpy as np

    from budgetdsl.solve import sweep_kernel as sk
    from budgetdsl.solve.placement import place

    plan = _plan(tensor_parallel=t, pipeline_parallel=p, zero=zero, network=network, gpu=gpu)
    cm = build_cost_model(plan, 64, Split(zero, t, p, "none", True))
    pair = sk.Pair(cm, 64, cm.data_parallel, cm.seq_len, float(cm.data_parallel * cm.seq_len), cm.flops_per_token,
                   cm.rate, cm.fixed_time, cm.micro_batch_max, True, cm.split)
    fronts = [Frontier(b_crit=b, e_min=1.2e10) for b in (3e5, 1e6, 3e6)]
    base = [evaluate(cm, fr, Limits(), b, m, cm.micro_batch_max).wall
            for fr in fronts for b in (1, 2, 3, 5) for m in (4, 16)]
    deadlines = sorted({w * f for w in base for f in (0.99, 1.0 + 1e-9, 1.004, 1.03)})
    rows = [(fr, d) for fr in fronts for d in deadlines]
    R = len(rows)
    nan = np.full(R, np.nan)
    r = sk.Rows(np.array([fr.b_crit for fr, _ in rows]), np.array([fr.e_min for fr, _ in rows]),
                np.array([d for _, d in rows]), nan, nan, nan, nan, np.zeros(R, int))
    blk = sk.block([pair], np.zeros(R, int))
    lo, hi, empty, _, sized = sk._intervals(blk, r)
    widened = 0
    for kind in sk.KINDS:
        got = sk._place(blk, r, kind, lo, hi, empty, sized, None, sk._Divisors(), {})
        for i, (fr, d) in enumerate(rows):
            evals: dict = {}
            want = place(cm, fr, Limits(deadline=d), kind, None, evals)
            widened += ("pieces", kind, None) in evals
            if got.unsure[i]:
                continue
            if want.config is None or not want.config.feasible:
                assert not got.has[i], (kind, d)
            else:
                split = (want.config.micro_batch, want.config.grad_accum)
                assert got.has[i] and (got.micro[i], got.accum[i]) == split, (kind, fr.b_crit, d)
        assert got.unsure.sum() <= R // 10
    assert widened >= R // 10


@pytest.mark.parametrize("t,p,zero,network,gpu", [
    (8, 2, 0, 5e10, "H100-SXM5-80GB"), (8, 4, 0, 5e10, "A100-SXM4-80GB"), (2, 4, 0, 1.25e9, "H100-SXM5-80GB")])
def test_the_cheap_reach_test_never_rules_out_a_size_that_widens(t, p, zero, network, gpu, monkeypatch):
    """`placement._may_reach` (a few float operations a size) skips the sizes' intervals only where
    none could widen toward the target: with it, every placement equals the placement without it,
    over deadlines and GPU-hour limits around the splits' own wall clocks and every objective."""
    from budgetdsl.solve import placement

    plan = _plan(tensor_parallel=t, pipeline_parallel=p, zero=zero, network=network, gpu=gpu)
    cm = build_cost_model(plan, 64, Split(zero, t, p, "none", True))
    cases = []
    for fr in (Frontier(b_crit=b, e_min=1.2e10) for b in (3e5, 1e6, 3e6)):
        walls = [evaluate(cm, fr, Limits(), b, m, cm.micro_batch_max).wall for b in (1, 2, 4) for m in (2, 8, 32)]
        for w in walls:
            for f in (0.98, 1.0 + 1e-9, 1.01):
                cases += [(fr, Limits(deadline=w * f)), (fr, Limits(gpu_hours=w * f * 64 / 3600, flops=3e20))]
        cases += [(fr, Limits(gpu_hours=1e6)), (fr, Limits(deadline=1e9, flops=3e20))]  # loose: the bench's warm solves
    verdicts = []
    real = placement._may_reach

    def counted(*a):
        verdicts.append(real(*a))
        return verdicts[-1]
    for fr, limits in cases:
        for objective in ("balanced", "min_time", "min_flops"):
            with monkeypatch.context() as m:
                m.setattr(placement, "_may_reach", counted)
                with_test = place(cm, fr, limits, objective)
            with monkeypatch.context() as m:
                m.setattr(placement, "_may_reach", lambda *a: True)
                without = place(cm, fr, limits, objective)
            assert (with_test.config, with_test.lo, with_test.hi) == (without.config, without.lo, without.hi), (
                objective, limits)
    assert False in verdicts  # it does rule sizes out (the loose limits)
