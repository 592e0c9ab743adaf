"""What one solve shares between its parts: the plan's noise, frontier, limits and objective, the
cost models and placements it has already computed (memoized for this solve, and kept across solves
in the caller's `SolveCache`), and the few steps every part repeats — the GPU counts of the plan, a
placement on one count, the candidates of every objective, the objective's pick, the pinned
configuration.

The solver's concepts (layout search, diagnosis and relaxations, uncertainty, the pinned
comparison, the ramp, the wording) each live in their own module and read this one; none of them
reads another's internals.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from budgetdsl.cost.cost_model import (
    CostModel,
    ShapeUnknown,
    Split,
    launchable_counts,
    plan_split,
)
from budgetdsl.plan.noise import NoiseEstimate, plan_error
from budgetdsl.solve.cache import PICKS, PLACEMENTS, SEEDS, SolveCache
from budgetdsl.solve.objectives import OBJECTIVES, choose
from budgetdsl.solve.placement import Limits, Placement, carried, evaluate, place, seeded
from budgetdsl.theory.frontier import Frontier

if TYPE_CHECKING:
    from budgetdsl.cost.throughput import StepCost
    from budgetdsl.plan.diagnostics import PlanError
    from budgetdsl.plan.model import Plan


@dataclass(frozen=True, slots=True)
class Context:
    """What every GPU count shares."""

    plan: Plan
    noise: NoiseEstimate
    frontier: Frontier
    limits: Limits
    objective: str
    memo: dict = field(default_factory=dict, compare=False)  # cost models and placements of this solve
    split: Split | None = None  # the layout searched (None: the plan's own)
    key: tuple = ()  # the plan's model and hardware (`SolveCache.model_key`); () keeps no cost model
    cache: SolveCache = field(default_factory=SolveCache, compare=False)  # what solves share (the caller's)


def plan_limits(plan: Plan) -> Limits:
    b = plan.budget
    return Limits(b.deadline, b.flops, b.gpu_hours, b.usd, b.usd_per_gpu_hour)


def cost_model(ctx: Context, gpus: int, split: Split | None = None, timed: bool = True,
               step: StepCost | None = None) -> CostModel:
    """The cost model of the context's layout (or `split`) on `gpus`, kept across solves in the
    context's cache (`SolveCache.cost_model`); a missing shape is a located error. `timed` False:
    one whose memory suffices (`build_cost_model`), kept in the context's memo only. `step`: its
    step in closed form where the caller has it (a layout search's `Pair.step`), not computed again."""
    if split is None:  # the context's layout: keyed by the count alone (no Split hashed)
        cm = ctx.memo.get(("cm", gpus))
        if cm is None:
            cm = ctx.memo[("cm", gpus)] = cost_model(ctx, gpus, ctx.split or plan_split(ctx.plan), step=step)
        return cm
    key = ("cm", gpus, split) if timed else ("memory", gpus, split)
    cm = ctx.memo.get(key)
    if cm is not None:
        return cm
    try:
        cm = ctx.memo[key] = ctx.cache.cost_model(ctx.key, ctx.plan, gpus, split, timed, step)
        return cm
    except ShapeUnknown as exc:
        raise plan_error(ctx.plan, ("model",), "shape-unknown", str(exc),
                         "give the shape, or the activation memory per token") from None


def raw_counts(plan: Plan) -> list[int]:
    """The GPU counts the plan names (a range listed), launchable or not."""
    from budgetdsl.plan.model import GpuRange

    gpus = plan.hardware.gpus
    return list(gpus.counts()) if isinstance(gpus, GpuRange) else [int(gpus)]


def gpu_counts(plan: Plan) -> list[int]:
    """The GPU counts of the plan that launch its own layout (a fixed count as given)."""
    from budgetdsl.plan.model import GpuRange

    gpus = plan.hardware.gpus
    if isinstance(gpus, GpuRange):
        return launchable_counts(plan, gpus.counts())
    return [int(gpus)]


def place_on(ctx: Context, gpus: int, limits: Limits | None = None, objective: str | None = None,
             micro_fixed: int | None = None) -> Placement:
    """`placement.place` on `gpus`, memoized within one solve (the pinned comparison and the
    relaxations ask for the same placements again) and kept across solves (`_shared`, in the
    context's cache)."""
    own = limits is None or limits is ctx.limits  # the context's own limits: keyed without hashing them
    limits = ctx.limits if limits is None else limits
    objective = ctx.objective if objective is None else objective
    key = ("place", gpus, None if own else limits, objective, micro_fixed)
    pl = ctx.memo.get(key)
    if pl is not None:
        return pl
    if objective == "min_cost":
        # On one GPU count cost is G·W/3600 (× price): a non-decreasing function of the wall clock,
        # and min_cost aims at min_time's batch. Its key (cost, wall, accumulation, distance) then
        # orders every configuration as min_time's (wall, cost, …) does, so the placement is
        # min_time's, term for term.
        pl = ctx.memo[key] = place_on(ctx, gpus, limits, "min_time", micro_fixed)
        return pl
    evals_key = ("evals", gpus, None if own else limits)
    group = ctx.memo.get(evals_key)
    if group is None:  # held by this solve's memo: its objectives share one `evals` to the end
        group = ctx.memo[evals_key] = _shared(ctx.cache, cost_model(ctx, gpus), _values(ctx, limits, own), own,
                                              ctx.frontier, limits)
    placed = group[2]
    pk = (objective, micro_fixed)
    pl = placed.get(pk)
    if pl is None:
        prev = group[3][0]  # the evaluations and placements it was seeded from (`_seed`)
        was = None if prev is None else prev[1].get(pk)
        pl = None if was is None else carried(was, ctx.frontier, limits, objective, micro_fixed, group[1], prev[0])
        if pl is None:
            pl = place(group[0], ctx.frontier, limits, objective, micro_fixed, group[1])
        placed[pk] = pl
    ctx.memo[key] = pl
    return pl


# A placement is a pure function of (cost model, frontier, limits, objective, micro_fixed): the
# placements of one cost model, frontier and limits, with what their objectives share (`evals`:
# the interval, the configurations evaluated), are kept across solves in the caller's cache, as the
# cost models are, so a warm re-solve places nothing again. Keyed by the cost model's identity (held
# in the entry, so the id stays its own); `own` apart, as within a solve (the context's own limits
# and an equal copy are placed apart there). Few are kept (`cache.PLACEMENTS` per generation): a
# sweep's rows, each with new limits, reuse none of an older row's.


def _values(ctx: Context, limits: Limits, own: bool) -> tuple:
    """The frontier's and the limits' numbers, as their (dataclass) equality compares them; the
    context's own computed once per solve."""
    if own:
        hit = ctx.memo.get("values")
        if hit is not None:
            return hit
    fr = ctx.frontier
    out = (fr.b_crit, fr.e_min, limits.deadline, limits.flops, limits.gpu_hours, limits.usd, limits.price)
    if own:
        ctx.memo["values"] = out
    return out


def _shared(cache: SolveCache, cm: CostModel, values: tuple, own: bool, fr: Frontier,
            limits: Limits) -> tuple[CostModel, dict, dict, list]:
    """(cm, the `evals` its placements share, the placements by (objective, micro_fixed), [what it
    was seeded from, or None]); `values`: the frontier's and limits' numbers (`_values`) of `fr`
    and `limits`."""
    key = (id(cm), values, own)
    generations = cache.placements
    newer = generations[0]
    group = newer.get(key)
    if group is not None and group[0] is cm:
        return group
    group = generations[1].pop(key, None)
    if group is None or group[0] is not cm:
        group = _seed(cache, cm, fr, limits, values) if own else (cm, {}, {}, [None])
    if len(newer) >= PLACEMENTS:
        newer = {}
        generations[:] = [newer, generations[0]]
    newer[key] = group
    return group


def _seed(cache: SolveCache, cm: CostModel, fr: Frontier, limits: Limits, values: tuple) -> tuple:
    """A new group of `cm` on the context's own `limits`, its evaluations handed on from the last
    such group of `cm` and the frontier where no evaluated configuration changes its verdict
    (`placement.seeded`; its placements then handed on where their inputs agree, `carried`).
    Either way the group's content is what placing afresh gives: only the work is saved."""
    skey = (id(cm), values[0], values[1])
    seeds = cache.seeds
    last = seeds.pop(skey, None)
    group: tuple = (cm, {}, {}, [None])
    if last is not None and last[0] is cm:
        before = last[2]
        before[3][0] = None  # a chain of seeds holds one link: the last group keeps its own work only
        evals = seeded(cm, fr, limits, last[1], before[1])
        if evals is not None:
            group = (cm, evals, {}, [(before[1], before[2])])
    seeds[skey] = (cm, limits, group)
    if len(seeds) > SEEDS:
        del seeds[next(iter(seeds))]
    return group


def candidates(ctx: Context, counts: list[int], micro_fixed: int | None) -> list[Placement]:
    """The feasible placements of every objective's own target on each count: the points the
    choice is made among (each objective's target, so the front holds the minimum-time, the
    minimum-FLOPs and the balanced batch of every count)."""
    out: list[Placement] = []
    memo = ctx.memo
    ckey = ("candidates", micro_fixed)
    for g in counts:
        group = memo.get(("evals", g, None))
        found = None if group is None else group[2].get(ckey)  # kept with the placements
        if found is None:
            found = []
            seen: list = []  # on one count equal configurations are one object (placement's `evals`)
            for objective in OBJECTIVES:
                if objective == "min_cost":  # placed as min_time (`place_on`), met just before it: the same object
                    continue
                pl = place_on(ctx, g, objective=objective, micro_fixed=micro_fixed)
                cfg = pl.config
                if cfg is not None and not cfg.violated and not any(cfg is c for c in seen):
                    seen.append(cfg)
                    found.append(pl)
            group = memo.get(("evals", g, None))
            if group is not None:
                group[2][ckey] = tuple(found)
        out.extend(found)
    return out


def pick(ctx: Context, items: list[Placement]) -> Placement | None:
    """The objective's pick from the non-dominated candidates (budgetdsl.solve.objectives). A pure
    function of the objective, B_crit and the (immutable) placements in order: kept (in the
    context's cache) for the same placements, which a re-solve finds again (`_shared`)."""
    picks = ctx.cache.picks
    key = (ctx.objective, ctx.frontier.b_crit, *map(id, items))
    hit = picks.get(key)
    if hit is not None and all(a is b for a, b in zip(hit[0], items)):  # held: the ids are theirs
        return hit[1]
    out = choose(ctx.objective, items, _config_of, ctx.frontier.b_crit)
    if len(picks) >= PICKS:
        picks.clear()
    picks[key] = (tuple(items), out)
    return out


def _config_of(pl: Placement):
    return pl.config


def closest(placements: list[Placement]) -> Placement:
    """For an infeasible range: the count with the fewest violated limits, ties to the most GPUs."""
    from budgetdsl.solve.infeasibility import conflicting_names

    def badness(pl: Placement) -> tuple[int, int]:
        return (len(conflicting_names(pl)), -pl.cm.gpus)
    return min(placements, key=badness)


def contains(pl: Placement, items: list[Placement]) -> bool:
    return any(pl is other for other in items)


# -- pinned configurations ----------------------------------------------------------------------

def pinned_sequences(run, seq_len: int) -> int | None:
    """The sequences of `run.batch`, or None when it is not a whole number of them."""
    assert run is not None and run.batch is not None
    sequences = run.batch / seq_len
    if abs(sequences - round(sequences)) > 1e-9 * max(1.0, sequences):
        return None
    return round(sequences)


def pinned_problem(run, seq_len: int, dp: int) -> str | None:
    """Why `run.batch` (and `run.micro_batch`) does not split over `dp` data-parallel replicas of
    `seq_len`-token sequences, or None when it does. Past a whole number of sequences, a dp the
    sequences are not a multiple of never splits (what a search of many counts checks first)."""
    s = seq_len
    sequences = pinned_sequences(run, s)
    if sequences is None:
        return f"run.batch ({run.batch:g} tokens) is not a whole number of {s}-token sequences"
    if sequences % dp:
        return (f"run.batch ({sequences} sequences) does not divide over {dp} data-parallel replicas")
    if run.micro_batch is not None and (sequences // dp) % run.micro_batch:
        return (f"run.micro_batch ({run.micro_batch}) does not divide the {sequences // dp} sequences "
                f"per replica of run.batch")
    return None


def pinned_division(run, seq_len: int, dp: int, pipeline: bool, micro_max: int) -> tuple[int, int] | str:
    """(micro, accum) of `run.batch` over `dp` replicas, or why it does not divide: run.micro_batch
    when pinned; else one sequence per micro-batch with a pipeline (the most micro-batches, the
    smallest bubble, budgetdsl.cost.throughput), the largest divisor that fits (`micro_max`) without."""
    problem = pinned_problem(run, seq_len, dp)
    if problem is not None:
        return problem
    per_replica = pinned_sequences(run, seq_len) // dp  # type: ignore[operator]
    if run.micro_batch is not None:
        return run.micro_batch, per_replica // run.micro_batch
    from budgetdsl.solve.placement import largest_divisor_at_most

    if pipeline:
        return 1, per_replica
    micro = largest_divisor_at_most(per_replica, max(1, micro_max))
    return micro, per_replica // micro


def pinned_micro_accum(ctx: Context, cm: CostModel) -> tuple[int, int] | str:
    """(micro, accum) of `run.batch` on this GPU count, or why it does not divide."""
    return pinned_division(ctx.plan.run, cm.seq_len, cm.data_parallel, cm.split.pipeline_parallel > 1,
                           cm.micro_batch_max)


def pinned_placement(ctx: Context, cm: CostModel) -> Placement | str:
    pair = pinned_micro_accum(ctx, cm)
    if isinstance(pair, str):
        return pair
    micro, accum = pair
    base = place_on(ctx, cm.gpus)  # intervals, for the report
    cfg = evaluate(cm, ctx.frontier, ctx.limits, micro, accum, cm.micro_batch_max)
    return Placement(cm, ctx.frontier, base.intervals, base.lo, base.hi, base.target, base.clipped,
                     cfg, cm.micro_batch_max, None)


def pinned_error(plan: Plan, problem: str | None):
    """The located error of a pinned run.batch that forms on no GPU count of a layout (`problem`:
    the first count's reason)."""
    return plan_error(plan, ("run", "batch"), "run-batch", problem or "run.batch does not fit",
                      "run.batch = micro_batch × accumulation × data-parallel replicas × seq_len")


# -- one layout ------------------------------------------------------------------------------------

def solve_layout(ctx: Context, pinned_batch: bool, micro_fixed: int | None,
                 counts: list[int] | None = None) -> tuple[Placement, list[Placement], list[Placement]]:
    """On the context's layout: (chosen, each count's placement, the feasible candidates)."""
    counts = gpu_counts(ctx.plan) if counts is None else counts
    if pinned_batch:
        options: list[Placement] = []
        problem = None
        split = ctx.split or plan_split(ctx.plan)
        tp, run, s = (split.tensor_parallel * split.pipeline_parallel * split.parallel(ctx.plan)[0],
                      ctx.plan.run, ctx.plan.model.seq_len)
        for i, g in enumerate(counts):
            # past the first count (whose cost model reports a missing shape), a count the batch
            # does not divide over is refused before its cost model is built
            res = (i and pinned_problem(run, s, g // tp)) or pinned_placement(ctx, cost_model(ctx, g))
            if isinstance(res, str):
                problem = problem or res
            else:
                options.append(res)
        if not options:
            raise pinned_error(ctx.plan, problem)
        feasible = [o for o in options if o.feasible]
        return (pick(ctx, feasible) or closest(options)), options, feasible
    if not counts:
        raise _no_gpu_count(ctx.plan)
    placements = [place_on(ctx, g, micro_fixed=micro_fixed) for g in counts]
    cands = candidates(ctx, counts, micro_fixed)
    return (pick(ctx, cands) or closest(placements)), placements, cands


def solve_core(ctx: Context, micro_fixed: int | None = None) -> tuple[Placement, list[Placement]]:
    """The chosen placement and every count's placement (one for a fixed count), on the
    context's layout, with the batch free."""
    counts = gpu_counts(ctx.plan)
    placements = [place_on(ctx, g, micro_fixed=micro_fixed) for g in counts]
    if not placements:
        raise _no_gpu_count(ctx.plan)
    return (pick(ctx, candidates(ctx, counts, micro_fixed)) or closest(placements)), placements


def _no_gpu_count(plan: Plan) -> PlanError:
    return plan_error(plan, ("hardware", "gpus"), "no-gpu-count",
                      "no GPU count in the range fills whole nodes and splits into t·p groups")
