"""A brute-force oracle for the solver (issue 13): enumerate the whole search space — every layout
of the space, every GPU count the plan allows, every whole number of sequences per replica up to a
bound and every (micro-batch, accumulation) split of it — evaluating each configuration with the
cost model alone (`placement.evaluate`, one configuration at a time). Nothing here calls the
solver's search, its pruning or its candidate lists.

Asserted for each objective: the solver's answer is feasible, no enumerated feasible
configuration dominates it in (wall clock, cost, FLOPs), and its objective measure is the best of
the enumeration, within the snapping tolerance (the solver evaluates a few micro-batch splits of
each batch, the oracle all of them).

Each plan's space is enumerated once, and its Pareto front found once, for all four objectives
(`_oracle`); the dominance test runs on numpy arrays, row blocks against every configuration — the
same pairwise comparison as `_dominates`, written out on whole arrays instead of one pair at a time
(the pairwise Python loop over ~10^4 configurations took ~80 s of the suite's time).
"""

from __future__ import annotations

import functools
import math

import numpy as np
import pytest
from solver_plans import DAY, make_plan

from budgetdsl.cost.cost_model import Split, build_cost_model
from budgetdsl.plan.noise import noise_estimate
from budgetdsl.solve.placement import Limits, evaluate
from budgetdsl.solve.solver import solve
from budgetdsl.theory.frontier import frontier_from_target

TOL = 0.02  # snapping: the oracle tries every micro-batch split, the solver a few per batch
N_MAX = 48  # sequences per replica enumerated (x up to several B_crit on these plans)


def _space(plan):
    """The layout space as issue 13 states it, written out here on its own."""
    hw, m = plan.hardware, plan.model
    tps = [1, 2, 4, 8] if hw.tensor_parallel == "auto" else [int(hw.tensor_parallel)]
    tps = [t for t in tps if t <= hw.gpus_per_node and all(h is None or h % t == 0 for h in (m.heads, m.kv_heads))]
    pps = [1, 2, 4, 8, 16, 32] if hw.pipeline_parallel == "auto" else [int(hw.pipeline_parallel)]
    pps = [p for p in pps if m.layers is None or p <= m.layers]
    zeros = [0, 1, 2, 3] if hw.zero == "auto" else [int(hw.zero)]
    rcs = ["none", "selective", "full"] if str(hw.recompute) == "auto" else [str(hw.recompute)]
    # context and expert parallelism where the plan writes auto (issue 24 item 5): cp splitting the
    # sequence into 2·cp chunks, ep dividing the experts; None: the plan's own degree
    cps = [c for c in (1, 2, 4, 8, 16) if c == 1 or m.seq_len % (2 * c) == 0] \
        if hw.context_parallel == "auto" else [None]
    eps = [e for e in (1, 2, 4, 8, 16, 32, 64) if m.experts and e <= m.experts and m.experts % e == 0] \
        if hw.expert_parallel == "auto" else [None]
    # sequence parallelism and interleaving where the plan writes auto (issue 24): SP both ways
    # (Megatron-Core refuses it without tensor parallelism), v every power of two up to 8 whose
    # stages hold whole v-layer chunks (the pinned split's entries; else v dividing the layers)
    return [(t, p, z, r, cp, ep, sp, v) for t in tps for p in pps for z in zeros for r in rcs for cp in cps
            for ep in eps for sp in _sequence_parallel(hw, t) for v in _interleavings(plan, p)]


def _sequence_parallel(hw, t):
    if hw.sequence_parallel != "auto":
        return [None]
    return [False, True] if t > 1 else [False]


def _interleavings(plan, p):
    hw, m = plan.hardware, plan.model
    if hw.virtual_pipeline_stages != "auto":
        return [None]
    split = hw.stage_layers if hw.stage_layers is not None and len(hw.stage_layers) == p else None
    return [v for v in (1, 2, 4, 8) if v == 1 or p > 1 and (
        all(n % v == 0 for n in split) if split is not None else m.layers % v == 0 and m.layers >= p * v)]


def _counts(plan):
    g = plan.hardware.gpus
    return list(g.counts()) if hasattr(g, "counts") else [int(g)]


def _fits_nodes(g, t, p, gpn, cp=1, ep=1, etp=None):
    """Whole t·p·cp groups (GPUs = t·p·cp·dp), whole etp·ep expert groups in each stage's G/p
    GPUs, whole nodes: written out here, not read from budgetdsl.hardware.layout."""
    group = (etp or t) * ep
    return g % (t * p * cp) == 0 and (g // p) % group == 0 and (g <= gpn or g % gpn == 0)


def _enumerate(plan):
    noise = noise_estimate(plan)
    fr = frontier_from_target(plan.target, noise.b_crit)
    b = plan.budget
    limits = Limits(b.deadline, b.flops, b.gpu_hours, b.usd, b.usd_per_gpu_hour)
    out = []
    for t, p, z, r, cp, ep, sp, v in _space(plan):
        for g in _counts(plan):
            hw = plan.hardware
            if not _fits_nodes(g, t, p, hw.gpus_per_node, cp or hw.context_parallel, ep or hw.expert_parallel,
                               hw.expert_tensor_parallel):
                continue
            cm = build_cost_model(plan, g, Split(z, t, p, r, plan.hardware.flash_attention, cp, ep, sp, v))
            mm = cm.micro_batch_max
            for n in range(1, N_MAX + 1):
                for micro in range(1, min(n, mm) + 1):
                    if n % micro:
                        continue
                    cfg = evaluate(cm, fr, limits, micro, n // micro, mm)
                    if cfg.feasible:
                        out.append(cfg)
    return out, fr.b_crit


def _axes(c):
    return (c.wall, c.usd if c.usd is not None else c.gpu_hours, c.flops)


def _dominates(a, b, tol):
    """a no worse on every axis (to rounding), and better than b by more than tol on one."""
    return all(x <= y * (1 + 1e-9) for x, y in zip(a, b)) and any(x < y * (1 - tol) for x, y in zip(a, b))


def _dominating(axes, b, tol):
    """Which rows of `axes` dominate each row of `b`, as `_dominates(row, b_row, tol)` says, for a
    block of points at once: a boolean array (len(b), len(axes))."""
    a, b = axes[None, :, :], b[:, None, :]
    return (a <= b * (1 + 1e-9)).all(axis=2) & (a < b * (1 - tol)).any(axis=2)


def _dominated(axes, points, tol, block=256):
    """Which of `points` some row of `axes` dominates, by blocks of points."""
    return np.concatenate([_dominating(axes, points[i:i + block], tol).any(axis=1)
                           for i in range(0, len(points), block)] or [np.zeros(0, dtype=bool)])


def _front_mask(axes):
    """Which configurations nothing dominates (to rounding): what the pairwise `_dominates` says of
    every pair, without comparing every pair. Witnesses first — the points in lexicographic order,
    each kept unless a kept one dominates it (a skyline) — rule out most points; the few they do
    not rule out are then compared with every configuration, so the answer does not rest on the
    witnesses being the whole front."""
    witnesses: list[int] = []
    for i in np.lexsort(axes.T[::-1]):  # by wall clock, then cost, then FLOPs
        if not witnesses or not _dominating(axes[witnesses], axes[i:i + 1], 1e-9).any():
            witnesses.append(int(i))
    keep = ~_dominated(axes[witnesses], axes, 1e-9)
    maybe = np.flatnonzero(keep)
    keep[maybe] = ~_dominated(axes, axes[maybe], 1e-9)
    return keep


def _balance(x):
    return (1 + 1 / x) * (1 + x)


@functools.cache
def _oracle(name):
    """The enumeration of a plan of PLANS, its axes and its front: they do not depend on the
    objective, so each plan's space is enumerated and its front found once for all four."""
    configs, b_crit = _enumerate(make_plan(**PLANS[name]))
    axes = np.array([_axes(c) for c in configs], dtype=float).reshape(-1, 3)
    return configs, axes, _front_mask(axes), b_crit


def _check(name, objective):
    plan = make_plan(**PLANS[name]).model_copy(update={"objective": objective})
    sol = solve(plan)
    configs, axes, front, b_crit = _oracle(name)
    assert configs, "the oracle found no feasible configuration"
    assert sol.feasible, f"{objective}: the solver finds none, the oracle {len(configs)}"
    mine = (sol.wall_clock_s, sol.usd if sol.usd is not None else sol.gpu_hours, sol.flops)
    beaten = np.flatnonzero(_dominating(axes, np.array([mine], dtype=float), TOL)[0])
    assert not beaten.size, (f"{objective}: {sol.batch} is dominated by {configs[beaten[0]]}")
    if objective == "min_time":
        assert sol.wall_clock_s <= axes[:, 0].min() * (1 + TOL)
    elif objective == "min_flops":
        assert sol.flops <= axes[:, 2].min() * (1 + TOL)
    elif objective == "min_cost":
        assert mine[1] <= axes[:, 1].min() * (1 + TOL)
    else:  # balanced: the non-dominated point nearest x = 1
        best = min(_balance(c.batch / b_crit) for c, on_front in zip(configs, front) if on_front)
        assert _balance(sol.batch.tokens / b_crit) <= best * (1 + TOL), (sol.batch, best)
    return sol


# Keys a plan here does not search are pinned: a silent layout key is `auto` (issue 13).
PLANS = {
    # a fixed count, predicted, a mixture of experts (8 experts, top-2, SwiGLU, params counted from
    # the shape) with expert parallelism 4 folded into the data-parallel ranks: memory holds the
    # experts ÷ ep, FLOPs follow the active parameters, the all-to-all joins the step
    "fixed-moe-ep": dict(model={"params": None, "layers": 8, "d_model": 1024, "heads": 16, "kv_heads": 4,
                                "ffn_hidden": 2816, "mlp": "swiglu", "tied_embeddings": False, "vocab": 32000,
                                "seq_len": 2048, "experts": 8, "experts_per_token": 2},
                         hardware={"gpu": "H100-SXM5-80GB", "gpus": 16, "mfu": None, "expert_parallel": 4,
                                   "zero": "auto", "tensor_parallel": "auto", "pipeline_parallel": 1,
                                   "recompute": "auto"},
                         budget={"deadline": 30 * DAY, "flops": None, "gpu_hours": None},
                         target={"tokens": 2.6e10, "at_batch": 1e6}, noise={"b_crit": 1e6}),
    # the same model with expert parallelism searched too, on a GPU range (issue 24 item 5)
    "free-moe-ep-auto": dict(model={"params": None, "layers": 8, "d_model": 1024, "heads": 16, "kv_heads": 4,
                                    "ffn_hidden": 2816, "mlp": "swiglu", "tied_embeddings": False, "vocab": 32000,
                                    "seq_len": 2048, "experts": 8, "experts_per_token": 2},
                             hardware={"gpu": "H100-SXM5-80GB", "gpus": {"min": 8, "max": 32, "step": 8}, "mfu": None,
                                       "expert_parallel": "auto", "zero": 1, "tensor_parallel": "auto",
                                       "pipeline_parallel": 1, "recompute": "none"},
                             budget={"deadline": 30 * DAY, "flops": None, "gpu_hours": None},
                             target={"tokens": 2.6e10, "at_batch": 1e6}, noise={"b_crit": 1e6}),
    # issue 24 items 1 and 8: DeepSeek-style multi-latent attention with group-limited routing,
    # DeepEP dispatch in FP8 and the all-to-all overlapped, expert parallelism searched across nodes
    "free-mla-deepep-auto": dict(
        model={"params": None, "layers": 8, "d_model": 1024, "heads": 16, "mlp": "swiglu", "ffn_hidden": 2816,
               "tied_embeddings": False, "vocab": 32000, "seq_len": 2048, "attention": "mla", "q_lora_rank": 384,
               "kv_lora_rank": 256, "qk_nope_head_dim": 64, "qk_rope_head_dim": 32, "v_head_dim": 64,
               "experts": 32, "experts_per_token": 4, "expert_ffn_hidden": 512, "shared_experts": 1,
               "dense_layers": 1, "expert_groups": 4, "expert_groups_per_token": 2},
        hardware={"gpu": "H100-SXM5-80GB", "gpus": {"min": 8, "max": 32, "step": 8}, "mfu": None,
                  "expert_parallel": "auto", "zero": 1, "tensor_parallel": "auto", "pipeline_parallel": 1,
                  "recompute": "none", "precision": "fp8", "expert_dispatch": "deepep", "expert_overlap": True},
        budget={"deadline": 30 * DAY, "flops": None, "gpu_hours": None},
        target={"tokens": 2.6e10, "at_batch": 1e6}, noise={"b_crit": 1e6}),
    # context parallelism searched on long sequences, beside the tensor-parallel degree
    "fixed-cp-auto": dict(model={"params": 1.3e9, "layers": 24, "d_model": 2048, "heads": 16, "seq_len": 32768},
                          hardware={"gpu": "H100-SXM5-80GB", "gpus": 32, "mfu": None, "context_parallel": "auto",
                                    "zero": 1, "tensor_parallel": "auto", "pipeline_parallel": 1,
                                    "recompute": "none"},
                          budget={"deadline": 60 * DAY, "flops": None, "gpu_hours": None},
                          target={"tokens": 2.6e10, "at_batch": 4e6}, noise={"b_crit": 4e6}),
    # a free count, predicted, context parallelism 2 on long sequences: GPUs = t·p·cp·dp. With cp
    # the ZeRO-1 shards span dp·cp ranks even at dp = 1, and its sharded optimizer step and bf16
    # gather can undercut ZeRO-0's exposed fp32 all-reduce at the same micro-batch room: the
    # simpler-layout pruning must not drop ZeRO-1 for ZeRO-0 (layout_search.LayoutChoice.simpler)
    "free-cp": dict(model={"params": 1.3e9, "layers": 24, "d_model": 2048, "heads": 16, "seq_len": 16384},
                    hardware={"gpu": "H100-SXM5-80GB", "gpus": {"min": 8, "max": 32, "step": 8}, "mfu": None,
                              "context_parallel": 2, "zero": "auto", "tensor_parallel": "auto",
                              "pipeline_parallel": 1, "recompute": "none"},
                    budget={"deadline": 60 * DAY, "flops": None, "gpu_hours": None},
                    target={"tokens": 2.6e10, "at_batch": 4e6}, noise={"b_crit": 4e6}),
    # issue 24: sequence parallelism and interleaving searched with the tensor and pipeline degrees
    # and recomputation; SP off and every v are enumerated, the search prunes them as twins
    "fixed-sp-v-auto": dict(model={"params": 30e9, "layers": 48, "d_model": 7168, "heads": 56, "seq_len": 4096},
                            hardware={"gpu": "H100-SXM5-80GB", "gpus": 16, "mfu": None, "zero": 1,
                                      "tensor_parallel": "auto", "pipeline_parallel": "auto", "recompute": "none",
                                      "sequence_parallel": "auto", "virtual_pipeline_stages": "auto"},
                            budget={"deadline": 60 * DAY, "flops": None, "gpu_hours": None},
                            target={"tokens": 6e10, "at_batch": 2e6}, noise={"b_crit": 2e6}),
    # a pinned uneven split (first stage lighter): v = 2 is the only interleaving its stages allow;
    # a range of counts, so the bubble's share changes with the replicas
    "free-split-v-auto": dict(model={"params": 1.3e9, "layers": 30, "d_model": 2048, "heads": 16, "seq_len": 2048},
                              hardware={"gpu": "A100-SXM4-80GB", "gpus": {"min": 8, "max": 32, "step": 8},
                                        "mfu": None, "zero": 1, "tensor_parallel": "auto", "pipeline_parallel": 4,
                                        "stage_layers": [6, 8, 8, 8], "recompute": "none",
                                        "sequence_parallel": "auto", "virtual_pipeline_stages": "auto"},
                              budget={"deadline": 60 * DAY, "flops": None, "gpu_hours": None},
                              target={"tokens": 2.6e10, "at_batch": 1e6}, noise={"b_crit": 1e6}),
    # a fixed count, declared MFU: the MFU holds at the plan's default layout (t = p = 1) and the
    # modelled step, scaled through it, prices the searched ones; memory decides which fit
    "fixed-declared": dict(model={"params": 1.3e9, "layers": 24, "d_model": 2048, "heads": 16, "seq_len": 2048},
                           hardware={"gpus": 64, "zero": "auto", "recompute": "auto", "tensor_parallel": "auto"},
                           budget={"deadline": 60 * DAY, "flops": None, "gpu_hours": None},
                           target={"tokens": 2.6e10, "at_batch": 1e6}, noise={"b_crit": 1e6}),
    # issue 24: a fixed count, a declared MFU and a FLOP cap but no deadline. Where the declared
    # MFU was the whole step, the smallest batch (one sequence per replica) won every objective by
    # construction; anchored, the per-step costs price the small batches
    "fixed-declared-flops": dict(model={"params": 1.3e9, "layers": 24, "d_model": 2048, "heads": 16,
                                        "seq_len": 2048},
                                 hardware={"gpu": "H100-SXM5-80GB", "gpus": 64, "mfu": 0.4, "zero": None,
                                           "overlap": None, "network": None},
                                 budget={"deadline": None, "flops": 2.75e20, "gpu_hours": None},
                                 target={"tokens": 2.6e10, "at_batch": 1e6}, noise={"b_crit": 1e6}),
    # a fixed count, predicted utilization: the layout sets the step time
    "fixed-predicted": dict(model={"params": 1.3e9, "layers": 24, "d_model": 2048, "heads": 16, "seq_len": 2048},
                            hardware={"gpu": "H100-SXM5-80GB", "gpus": 32, "mfu": None, "zero": "auto",
                                      "tensor_parallel": "auto", "pipeline_parallel": "auto", "recompute": "none"},
                            budget={"deadline": 60 * DAY, "flops": None, "gpu_hours": None},
                            target={"tokens": 2.6e10, "at_batch": 1e6}, noise={"b_crit": 1e6}),
    # a fixed count, predicted, a modern layer: 4 KV heads (TP 8 cannot split them), a SwiGLU MLP,
    # untied embeddings, params counted from the shape, FP8 GEMMs; recomputation searched
    "fixed-gqa-fp8": dict(model={"params": None, "layers": 16, "d_model": 2048, "heads": 16, "kv_heads": 4,
                                 "ffn_hidden": 5632, "mlp": "swiglu", "tied_embeddings": False, "vocab": 32000,
                                 "seq_len": 4096},
                          hardware={"gpu": "H100-SXM5-80GB", "gpus": 16, "mfu": None, "precision": "fp8",
                                    "zero": "auto", "tensor_parallel": "auto", "pipeline_parallel": 1,
                                    "recompute": "auto"},
                          budget={"deadline": 30 * DAY, "flops": None, "gpu_hours": None},
                          target={"tokens": 2.6e10, "at_batch": 1e6}, noise={"b_crit": 1e6}),
    # a free count: the GPU count is searched with the layout
    "free-predicted": dict(model={"params": 1.3e9, "layers": 24, "d_model": 2048, "heads": 16, "seq_len": 2048},
                           hardware={"gpu": "H100-SXM5-80GB", "gpus": {"min": 8, "max": 32, "step": 8}, "mfu": None,
                                     "zero": "auto", "tensor_parallel": "auto", "pipeline_parallel": 1,
                                     "recompute": "none"},
                           budget={"deadline": 30 * DAY, "flops": None, "gpu_hours": None},
                           target={"tokens": 2.6e10, "at_batch": 1e6}, noise={"b_crit": 1e6}),
    # a free count with a plan's own (unsearched) layout and a step cost
    "free-fixed-layout": dict(model={"params": 1.3e9, "layers": 24, "d_model": 2048, "heads": 16, "seq_len": 2048},
                              hardware={"gpu": "A100-SXM4-80GB", "gpus": {"min": 8, "max": 128, "step": 8},
                                        "mfu": None, "step_overhead": 0.5, "tensor_parallel": 1,
                                        "pipeline_parallel": 1, "recompute": "none"},
                              budget={"deadline": 30 * DAY, "flops": None, "gpu_hours": None},
                              target={"tokens": 2.6e10, "at_batch": 1e6}, noise={"b_crit": 2e6}),
    # a free count beside a declared MFU: the silent layout keys take the framework default
    # (t = p = 1, ZeRO 0, no recomputation), so only the count and the batch are searched; a step
    # cost and a price make time, money and FLOPs pull apart; the deadline rules out the smallest counts
    "free-declared": dict(model={"params": 1.3e9, "layers": 24, "d_model": 2048, "heads": 16, "seq_len": 2048},
                          hardware={"gpus": {"min": 8, "max": 256, "step": 8}, "mfu": 0.4, "zero": None,
                                    "step_overhead": 0.3},
                          budget={"deadline": 1 * DAY, "flops": None, "gpu_hours": None, "usd_per_gpu_hour": 2.0},
                          target={"tokens": 2.6e10, "at_batch": 1e6}, noise={"b_crit": 1e6}),
    # the same beside a declared MFU, but the plan writes `auto` for ZeRO and recomputation: those
    # two are searched (memory decides what fits), tensor and pipeline parallelism stay 1
    "free-declared-auto": dict(model={"params": 6.7e9, "layers": 32, "d_model": 4096, "heads": 32, "seq_len": 2048},
                               hardware={"gpus": {"min": 8, "max": 128, "step": 8}, "mfu": 0.4, "zero": "auto",
                                         "recompute": "auto", "step_overhead": 0.3},
                               budget={"deadline": 20 * DAY, "flops": None, "gpu_hours": None},
                               target={"tokens": 1.3e11, "at_batch": 2e6}, noise={"b_crit": 2e6}),
}

# What each plan's silent or written layout keys come to: the layout every configuration runs.
SEARCHED = {"free-declared": {"tensor_parallel": [1], "pipeline_parallel": [1], "zero": [0], "recompute": ["none"]},
            "free-declared-auto": {"tensor_parallel": [1], "pipeline_parallel": [1], "zero": [0, 1, 2, 3],
                                   "recompute": ["none", "selective", "full"]}}


@pytest.mark.parametrize("objective", ["balanced", "min_time", "min_cost", "min_flops"])
@pytest.mark.parametrize("name", sorted(PLANS))
def test_each_objective_is_optimal_and_never_dominated(name, objective):
    sol = _check(name, objective)
    if name in SEARCHED:  # and the answer runs a layout the plan allows
        for key, allowed in SEARCHED[name].items():
            assert getattr(sol.batch, key) in allowed, (key, sol.batch)


def test_a_declared_mfu_keeps_the_default_layout_unless_the_plan_says_auto():
    """Beside a declared MFU the oracle's space is the one default layout when the plan is silent,
    and ZeRO × recomputation when it writes auto; either way it spans several GPU counts."""
    silent = _space(make_plan(**PLANS["free-declared"]))
    assert silent == [(1, 1, 0, "none", None, None, None, None)]
    written = _space(make_plan(**PLANS["free-declared-auto"]))
    assert {(t, p) for t, p, *_ in written} == {(1, 1)} and len(written) == 12
    for name in SEARCHED:
        configs, _, front, _ = _oracle(name)
        assert len({c.gpus for c in configs}) > 4 and len({c.gpus for c, f in zip(configs, front) if f}) > 1


def test_the_oracle_can_fail():
    """A dominated configuration is caught: the batch at B_crit on a fixed count with declared MFU
    is slower and spends more FLOPs than the floor (issue 13's 13B case in small)."""
    configs, axes, front, b_crit = _oracle("fixed-declared")
    i = min(range(len(configs)), key=lambda k: abs(math.log(configs[k].batch / b_crit)))
    assert any(_dominates(_axes(c), _axes(configs[i]), TOL) for c in configs)
    assert _dominating(axes, axes[i:i + 1], TOL)[0].any() and not front[i]


@pytest.mark.parametrize("name", sorted(PLANS))
def test_the_array_comparison_is_the_pairwise_one(name):
    """The numpy comparison says what `_dominates` says of every pair, and the front it finds is
    the pairwise front (on a sample of each plan's enumeration, with its best points)."""
    configs, axes, _, _ = _oracle(name)
    sample = sorted(set(range(0, len(configs), max(1, len(configs) // 250))) | set(axes.argmin(axis=0).tolist()))
    points = [_axes(configs[i]) for i in sample]
    for tol in (1e-9, TOL):
        pairwise = [[_dominates(d, c, tol) for d in points] for c in points]
        assert _dominating(axes[sample], axes[sample], tol).tolist() == pairwise
    front = [not any(_dominates(d, p, 1e-9) for d in points) for p in points]
    assert 0 < sum(front) < len(points)
    assert _front_mask(axes[sample]).tolist() == front


def test_the_oracle_enumerates_the_twins_the_search_prunes():
    """The oracle's space holds what the search drops as twins (SP off beside SP on, every v that
    divides the stages), and the search's answer still wins: on this plan it runs tensor parallelism
    with SP and interleaving, so the twins are real competitors, not an empty check."""
    from budgetdsl.solve.layout_search import candidates

    plan = make_plan(**PLANS["fixed-sp-v-auto"])
    space = _space(plan)
    assert {(sp, v) for t, p, *_, sp, v in space if t == 2 and p == 4} == \
        {(sp, v) for sp in (False, True) for v in (1, 2, 4, 8)}
    searched = {(c.sequence_parallel, c.virtual_stages) for c in candidates(plan)
                if (c.tensor_parallel, c.pipeline_parallel) == (2, 4)}
    # v = 2 has v = 4's split (12 layers a stage), its slower, fuller twin; v = 8's chunks of 8
    # cannot split 48 layers evenly over 4 stages ([8, 16, 16, 8]), another split: kept
    assert searched == {(True, 1), (True, 4), (True, 8)}
    sol = solve(plan)
    assert (sol.batch.tensor_parallel, sol.batch.sequence_parallel) == (2, True)
    assert sol.batch.virtual_pipeline_stages > 1
    split = _space(make_plan(**PLANS["free-split-v-auto"]))
    assert {v for *_, v in split} == {1, 2}  # [6, 8, 8, 8]: 4 does not divide 6
