"""The layout search of a plan whose layout keys are `auto` (issue 13): which layout × GPU-count
pairs exist (`search_space`, a pure function of the plan's model and hardware, kept across solves),
and the bound-and-prune walk that places only the pairs that can supply the objective's pick or
dominate it (`search_layouts`).

Two exact prunings (docs/solver.md, Layout search):
- a layout that a simpler one (same t and p, less ZeRO or recomputation) matches in micro-batch
  room is never better on any axis (`budgetdsl.solve.layout_search`): skipped, in `search_space`;
- a pair whose best conceivable point (`lower_bound`: the least wall clock, cost and FLOPs of any
  batch, each on its own) cannot beat or dominate the pick found so far is never placed.
"""

from __future__ import annotations

import bisect
import contextlib
import gc
import operator
from collections.abc import Sequence
from dataclasses import dataclass, fields, replace
from typing import TYPE_CHECKING, cast

from budgetdsl.cost.cost_model import DECLARED, CostModel, Split
from budgetdsl.cost.memory import micro_batch_room, zero_divisors
from budgetdsl.cost.throughput import (
    BACKWARD_SHARE,
    Layout,
    StepCost,
    exposed_dp,
    scaled_step_fields,
    step_cost_columns,
)
from budgetdsl.hardware.layout import gpu_unit
from budgetdsl.plan.diagnostics import PlanError
from budgetdsl.plan.noise import NoiseEstimate
from budgetdsl.solve.cache import IDENTS, RECORDS, SPACES, WALKS, SolveCache
from budgetdsl.solve.context import (
    Context,
    candidates,
    closest,
    cost_model,
    pinned_division,
    pinned_error,
    pinned_placement,
    pinned_problem,
    pinned_sequences,
    place_on,
    raw_counts,
)
from budgetdsl.solve.context import pick as choose_pick
from budgetdsl.solve.layout_search import BLOCK_AUTO, LayoutChoice, concrete
from budgetdsl.solve.layout_search import candidates as layout_candidates
from budgetdsl.solve.objectives import OBJECTIVES, Pool, axes, choose, pareto, rank, rank_key, rounded
from budgetdsl.solve.placement import Config, Limits, Placement, evaluate
from budgetdsl.solve.search_replay import Placed, Record, replay
from budgetdsl.theory.frontier import Frontier, balance, e_over_emin, wall_bound
from budgetdsl.theory.xp import SCALAR

if TYPE_CHECKING:
    from budgetdsl.plan.model import Plan


class Pair:
    """One layout on one GPU count that launches and that no simpler layout dominates.

    layout           the layout (tensor/pipeline degree, ZeRO stage, recomputation)
    gpus             the GPU count
    split            the same layout as a `cost_model.Split` (what `cost_model.cached_cost_model`
                     takes, with the plan's flash_attention)
    micro_batch_max  the largest micro-batch (sequences per device) that fits every pipeline stage;
                     0 when not even one sequence fits
    data_parallel    dp = gpus / (t·p)
    step             the step time in closed form (`throughput.StepCost`: T(micro, accumulation));
                     None with a declared MFU and no shape (T(B) = f·B/(G·P·u), `CostModel.step_time`)

    Immutable, compared and hashed by these fields; a view of its layout's columns (`_Block`), so
    reading every pair of a space builds no `StepCost` until `step` is read."""

    __slots__ = ("_block", "_k")
    _FIELDS = ("layout", "gpus", "split", "micro_batch_max", "data_parallel", "step")
    _block: _Block
    _k: int

    def __init__(self, block: _Block, k: int):
        object.__setattr__(self, "_block", block)
        object.__setattr__(self, "_k", k)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"Pair is immutable: cannot set {name}")

    @property
    def layout(self) -> LayoutChoice:
        return self._block.layout

    @property
    def gpus(self) -> int:
        return self._block.gpus[self._k]

    @property
    def split(self) -> Split:
        return self._block.split

    @property
    def micro_batch_max(self) -> int:
        return self._block.micro[self._k]

    @property
    def data_parallel(self) -> int:
        return self._block.dp[self._k]

    @property
    def step(self) -> StepCost | None:
        return self._block.step(self._k)

    def _fields(self) -> tuple:
        return (self.layout, self.gpus, self.split, self.micro_batch_max, self.data_parallel, self.step)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Pair):
            return NotImplemented
        return self._fields() == other._fields()

    def __hash__(self) -> int:
        return hash(self._fields())

    def __repr__(self) -> str:
        return "Pair(" + ", ".join(f"{n}={v!r}" for n, v in zip(self._FIELDS, self._fields())) + ")"


class _Block:
    """One layout's pairs as columns (a space holds ~100,000 pairs; the search reads a few of them
    as `Pair`s): GPU counts ascending, micro-batch room, dp, and the step's fields
    (`throughput.step_cost_columns`, None with a declared MFU and no shape to model)."""

    __slots__ = ("layout", "split", "gpus", "micro", "dp", "step_columns", "_steps")

    def __init__(self, layout: LayoutChoice, split: Split, gpus: list[int], micro: list[int], dp: list[int],
                 step_columns: tuple | None):
        self.layout, self.split, self.gpus, self.micro, self.dp = layout, split, gpus, micro, dp
        self.step_columns = step_columns
        self._steps: list | None = None

    def step(self, k: int) -> StepCost | None:
        """The `StepCost` of the block's k-th count (built once, on first read)."""
        if self.step_columns is None:
            return None
        steps = self._steps
        if steps is None:
            steps = self._steps = [None] * len(self.gpus)
        st = steps[k]
        if st is None:
            ks, window, bubble, zero3, per_micro, reduce, gather, overlap, fixed, lat, share = self.step_columns
            st = steps[k] = StepCost(ks[k], window, bubble[k], zero3, per_micro[k], reduce[k], gather[k],
                                     overlap, fixed[k], lat[k], share)
        return st

    def steps(self) -> list[StepCost | None]:
        """Every count's `StepCost` (built once)."""
        if self.step_columns is None:
            return [None] * len(self.gpus)
        if self._steps is None:
            ks, window, bubble, zero3, per_micro, reduce, gather, overlap, fixed, lat, share = self.step_columns
            self._steps = [StepCost(k, window, bk, zero3, pm, r, ga, overlap, fx, la, share)
                           for k, bk, pm, r, ga, fx, la in zip(ks, bubble, per_micro, reduce, gather, fixed, lat)]
        elif any(st is None for st in self._steps):
            self._steps = [self.step(k) for k in range(len(self.gpus))]
        return self._steps

    def _key(self) -> tuple:
        return (self.layout, self.split, self.gpus, self.micro, self.dp, self.step_columns)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Block) and self._key() == other._key()


class Pairs(Sequence):
    """The pairs of a search space, in order, built as `Pair`s only when read (`SearchSpace.pairs`):
    a sequence of `Pair` (index, slice, iterate, len, compare), held as one `_Block` per layout."""

    __slots__ = ("blocks", "_starts", "_n")

    def __init__(self, blocks: list[_Block]):
        self.blocks = tuple(blocks)
        starts, n = [], 0
        for b in self.blocks:
            starts.append(n)
            n += len(b.gpus)
        self._starts, self._n = starts, n

    def __len__(self) -> int:
        return self._n

    def _pair(self, b: _Block, k: int) -> Pair:
        return Pair(b, k)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return tuple(self[j] for j in range(*i.indices(self._n)))
        if i < 0:
            i += self._n
        if not 0 <= i < self._n:
            raise IndexError("pair index out of range")
        at = bisect.bisect_right(self._starts, i) - 1
        return self._pair(self.blocks[at], i - self._starts[at])

    def __iter__(self):
        for b in self.blocks:
            for k in range(len(b.gpus)):
                yield self._pair(b, k)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Pairs):
            return self.blocks == other.blocks
        if isinstance(other, (tuple, list)):
            return len(other) == self._n and all(a == b for a, b in zip(self, other))
        return NotImplemented

    def __hash__(self) -> int:
        return hash(tuple((b.layout, tuple(b.gpus)) for b in self.blocks))

    def __repr__(self) -> str:
        return f"Pairs({self._n} pairs in {len(self.blocks)} layouts)"


@dataclass(frozen=True, slots=True)
class SearchSpace:
    """The layout × GPU-count pairs of a plan's search (`search_space`).

    pairs       the pairs that launch and that no simpler layout dominates, layouts simplest first
                (`LayoutChoice.sort_key`), each layout's GPU counts ascending (`Pairs`: a sequence
                of `Pair`, kept as one block of columns per layout)
    considered  how many layout × GPU-count pairs launch (before the simpler-layout pruning)
    pruned      how many of those were skipped: a simpler layout on the same count fits a
                micro-batch at least as large (so `considered - pruned == len(pairs)`)
    layouts     every candidate layout (`layout_search.candidates`), simplest first
    counts      the GPU counts the plan names (a range listed), launchable or not
    """

    pairs: Pairs
    considered: int
    pruned: int
    layouts: tuple[LayoutChoice, ...]
    counts: tuple[int, ...]


def search_space(plan: Plan, cache: SolveCache | None = None) -> SearchSpace:
    """The layout × GPU-count pairs of `plan` that launch and that no simpler layout dominates, with
    each pair's micro-batch room, data-parallel degree and step cost (`SearchSpace`, `Pair`), and
    how many pairs were considered and pruned. Depends only on `plan.model` and `plan.hardware`
    (kept in `cache` under the cost models' key, the GPU counts and the candidate layouts). A plan
    whose layout is fixed has a space of one layout. Raises a located PlanError when the shape the
    memory model needs is missing."""
    return _entry(plan, SolveCache() if cache is None else cache)[0]


def _entry(plan: Plan, cache: SolveCache) -> tuple[SearchSpace, _Bounds]:
    """The space of `plan` and its bounds (`_Bounds`), kept in `cache`: a pure function of the
    plan's model and hardware (a sweep of limits, objectives or targets, or a warm re-solve, reuses
    it), found first by the identity of the plan's (frozen) model and hardware sections."""
    model, hardware = plan.model, plan.hardware
    ident = (id(model), id(hardware))
    by_ident = cache.space_by_ident
    hit = by_ident.get(ident)
    if hit is not None and hit[0] is model and hit[1] is hardware:  # held there: the ids are theirs
        return hit[2]
    counts = tuple(raw_counts(plan))
    layouts = tuple(layout_candidates(plan))
    key = cache.model_key(plan)
    memo_key = (key, counts, layouts)
    spaces = cache.spaces
    entry = spaces.get(memo_key)
    if entry is not None:
        spaces.move_to_end(memo_key)
    else:
        with _no_gc():
            space = _build(plan, key, layouts, counts, cache)
        entry = spaces[memo_key] = (space, _Bounds(plan, key, space, cache))
        if len(spaces) > SPACES:
            spaces.popitem(last=False)
    by_ident[ident] = (model, hardware, entry)
    if len(by_ident) > IDENTS:  # a sweep's rows must not pile up
        del by_ident[next(iter(by_ident))]
    return entry


@contextlib.contextmanager
def _no_gc():
    """The cyclic garbage collector paused while a space is built: ~100,000 pairs' columns and
    bound rows are acyclic (lists and tuples of numbers), yet each allocation counts toward a
    collection that traverses them all again (it doubled the build's time)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


class _Bounds:
    """What `lower_bound` reads of each pair, computed once per search space, when first read (a
    pinned batch's search never reads it): the plan's tokens per sequence and FLOPs per token, and
    per pair (a, c0, smallest batch, GPU count) of T(B) ≥ a·B + c0. `natural`: the pairs' own order
    is the search's tie order (simplicity, then GPU count). The values are `_bounds_of`'s.
    `columns` and `roomless` keep what the walk derives of them (`_columns`, `_roomless`)."""

    __slots__ = ("_source", "_values", "columns", "roomless")

    def __init__(self, plan: Plan, key: tuple, space: SearchSpace, cache: SolveCache):
        self._source: tuple | None = (plan, key, space, cache)
        self._values: tuple | None = None
        self.columns: tuple | None = None
        self.roomless: dict[int, dict[LayoutChoice, int]] = {}

    def _get(self) -> tuple:
        if self._values is None:
            assert self._source is not None
            with _no_gc():
                self._values = _bounds_of(*self._source)
            self._source = None
        return self._values

    @property
    def seq_len(self) -> int:
        return self._get()[0]

    @property
    def flops_per_token(self) -> float:
        return self._get()[1]

    @property
    def per_pair(self) -> tuple[tuple[tuple, float, int], ...]:  # (step_bound lines, b_min, gpus), in pairs order
        return self._get()[2]

    @property
    def natural(self) -> bool:
        return self._get()[3]


class _StepView:
    """A pair's `throughput.StepCost` fields, by the same names: what `step_bound` reads of a step.
    One view per layout is refilled for each of its pairs (`step_bound` keeps no reference to it),
    so the bounds of ~100,000 pairs build no `StepCost` each (the frozen dataclass takes longer to
    build than `step_bound` takes to run)."""

    __slots__ = ("per_sequence", "window", "bubble_k", "zero3", "dp_per_micro", "reduce", "gather", "overlap",
                 "fixed", "latency", "gather_share")
    per_sequence: float
    window: float
    bubble_k: float
    zero3: bool
    dp_per_micro: float
    reduce: float
    gather: float
    overlap: float | None
    fixed: float
    latency: float
    gather_share: float


def _bounds_of(plan: Plan, key: tuple, space: SearchSpace, cache: SolveCache) -> tuple[int, float, tuple, bool]:
    """(seq_len, flops_per_token, per pair (step_bound lines, b_min, gpus), natural) of `_Bounds`:
    lower_bound's a and c0, term for term (`step_bound` of each pair's step, micro-batch room,
    smallest batch dp·s, and with a declared MFU f/(G·P·u))."""
    blocks = space.pairs.blocks
    if not blocks:
        return (0, 0.0, (), True)
    first = blocks[0]
    probe = Context(plan, None, None, None, "", key=key, cache=cache)  # type: ignore[arg-type]  # cost models only
    ref = cost_model(probe, first.gpus[0], first.split)
    s, f = ref.seq_len, ref.flops_per_token
    rows: list[tuple] = []
    for b in blocks:
        if b.step_columns is None:
            peak, mfu = ref.peak_flops, cast(float, ref.mfu)  # a declared MFU: no step in closed form
            rows += [(step_bound(None, mm, b_min, f / (g * peak * mfu)), b_min, g)
                     for g, mm, b_min in zip(b.gpus, b.micro, [float(dp * s) for dp in b.dp])]
        else:
            ks, bubble, per_micro, reduce, gather, fixed, lat = (b.step_columns[i] for i in (0, 2, 4, 5, 6, 8, 9))
            view = _StepView()
            view.window, view.zero3, view.overlap = b.step_columns[1], b.step_columns[3], b.step_columns[7]
            view.gather_share = b.step_columns[10]
            add = rows.append
            for g, mm, dp, k, bk, pm, r, ga, fx, la in zip(b.gpus, b.micro, b.dp, ks, bubble, per_micro, reduce,
                                                           gather, fixed, lat):
                view.per_sequence, view.bubble_k, view.dp_per_micro, view.reduce, view.gather, view.fixed = \
                    k, bk, pm, r, ga, fx
                view.latency = la
                b_min = float(dp * s)
                add((step_bound(view, mm, b_min, 0.0), b_min, g))  # type: ignore[arg-type]
    # the tie order (simplicity, then GPU count): each block's counts ascend, so the order is
    # natural when each block's last pair ties before the next block's first
    natural = all((a.layout.sort_key(), a.gpus[-1]) < (c.layout.sort_key(), c.gpus[0])
                  for a, c in zip(blocks, blocks[1:]))
    return (s, f, tuple(rows), natural)


def _build(plan: Plan, key: tuple, layouts: tuple[LayoutChoice, ...], counts: tuple[int, ...],
           cache: SolveCache) -> SearchSpace:
    gpn = int(plan.hardware.gpus_per_node)
    flash = plan.hardware.flash_attention
    probe = Context(plan, None, None, None, "", key=key, cache=cache)  # type: ignore[arg-type]  # cost models only
    considered = pruned = 0
    # The counts that launch a t·p split (layout.launch_problem is None: at least one GPU, whole
    # t·p groups, whole nodes above one node), once per split rather than per layout and count.
    by_split: dict[int, list[int]] = {}
    # each layout's micro-batch room on each count of its split's launch list (index-aligned: the
    # layouts simpler than one have its t and p, so the same list)
    micro_max: dict[LayoutChoice, list[int]] = {}
    shared: dict = {}  # the data-parallel collectives by (bytes, t, device), for every layout
    # each family's stages that can bind the micro-batch room; by a layout's fields but its ZeRO
    # stage, its family's split (`_pairs_of`)
    binding: dict = {}
    top = max(counts, default=0)  # no count launches a t·p above it
    blocks: list[_Block] = []
    for choice in layouts:
        t, p = choice.tensor_parallel, choice.pipeline_parallel
        own = choice.split(flash)  # with the choice's (or the plan's) context and expert parallelism
        cp = own.parallel(plan)[0]
        tp = t * p * cp  # GPUs of one data-parallel replica; counts are multiples of the layout's unit
        unit = gpu_unit(t, p, cp, own.expert_group(plan))
        launch = by_split.get(unit)
        if launch is None:
            launch = by_split[unit] = [] if unit > top else \
                [g for g in counts if g >= 1 and not g % unit and not (g > gpn and g % gpn)]
        if not launch:
            micro_max[choice] = []
            continue
        if choice.recompute_layers == BLOCK_AUTO:  # one choice per fewest-fitting N, on the counts it holds on
            for n, counts_n in _block_layers(probe, choice, own, tp, launch, plan, binding):
                considered += len(counts_n)
                blocks.extend(_pairs_of(plan, probe, replace(choice, recompute_layers=n), counts_n, micro_max,
                                        binding, shared))
            continue
        considered += len(launch)
        before = len(blocks)
        blocks.extend(_pairs_of(plan, probe, choice, launch, micro_max, binding, shared, own))
        pruned += len(launch) - (len(blocks[-1].gpus) if len(blocks) > before else 0)
    return SearchSpace(Pairs(blocks), considered, pruned, layouts, counts)


def _block_layers(probe: Context, choice: LayoutChoice, own: Split, tp: int, launch: list[int], plan: Plan,
                  binding: dict) -> list[tuple[int, list[int]]]:
    """Block recomputation's candidates (`layout_search.BLOCK_AUTO`): on each count of `launch`, the
    fewest layers per stage (chunk) N that fit one sequence, where no recomputation (N = 0) fits none
    and full recomputation does (N below the largest chunk); as (N, its counts). The room only grows
    with N (fewer activations kept) and with dp (ZeRO shards more), so the fewest N falls with dp: a
    bisection over N per count, each N's room on every count computed once."""
    dps = [g // tp for g in launch]
    cp = own.parallel(plan)[0]
    folded = (cp, choice.tensor_parallel, own.expert_group(plan)) if plan.model.experts or cp > 1 else None
    rooms: dict[int, list[int]] = {}

    def room(n: int) -> list[int]:
        if n not in rooms:
            family = cost_model(probe, tp, replace(own, zero=0, recompute_layers=n), timed=False)
            stages = binding.get(family.split)
            if stages is None:
                stages = binding[family.split] = _binding_stages(family, folded is not None)
            rooms[n] = _quick_all(family, choice, dps, stages, folded)
        return rooms[n]

    family = cost_model(probe, tp, replace(own, zero=0, recompute_layers=0), timed=False)
    v = family.layout.virtual_stages if family.layout is not None else 1
    top = -(-max(st.layers or 0 for st in family.stages) // max(1, v)) - 1  # the largest N short of full
    out: dict[int, list[int]] = {}
    for j, gpus in enumerate(launch):
        if top < 1 or room(0)[j] >= 1 or room(top)[j] < 1:
            continue
        lo, hi = 1, top  # room(hi) fits, room(lo - 1) does not
        while lo < hi:
            mid = (lo + hi) // 2
            if room(mid)[j] >= 1:
                hi = mid
            else:
                lo = mid + 1
        out.setdefault(lo, []).append(gpus)
    return sorted(out.items())


_BUT_ZERO = operator.attrgetter(*(f.name for f in fields(Split) if f.name != "zero"))  # a Split's other fields


def _pairs_of(plan: Plan, probe: Context, choice: LayoutChoice, launch: list[int],
              micro_max: dict[LayoutChoice, list[int]], binding: dict, shared: dict,
              own: Split | None = None) -> list[_Block]:
    """The block of `choice`'s pairs on the counts of `launch` that no simpler layout prunes (none
    where it prunes them all); records the choice's room on every count in `micro_max`. `own`:
    `choice.split` where the caller has it."""
    t, p = choice.tensor_parallel, choice.pipeline_parallel
    if own is None:
        own = choice.split(plan.hardware.flash_attention)
    cp = own.parallel(plan)[0]
    tp = t * p * cp
    # (t, p, recomputation) on dp = 1 without ZeRO: the unsharded stages, one split for the ZeRO
    # stages of a layout (kept in `binding` by the layout's other fields)
    other = _BUT_ZERO(own)
    unsharded = binding.get(other)
    if unsharded is None:
        unsharded = binding[other] = replace(own, zero=0)
    family = cost_model(probe, tp, unsharded, timed=False)  # memory only: its step is not read
    dps = [g // tp for g in launch]
    # ZeRO divides the routed experts over edp copies and the rest over dp·cp (memory.stage_memory)
    folded = (cp, t, own.expert_group(plan)) if plan.model.experts or cp > 1 else None
    stages = binding.get(family.split)
    if stages is None:
        stages = binding[family.split] = _binding_stages(family, folded is not None)
    room = micro_max[choice] = _quick_all(family, choice, dps, stages, folded)
    simpler = [micro_max[s] for s in choice.simpler() if s in micro_max]
    simpler = [r for r in simpler if len(r) == len(room)]  # same t and p: the same launch list
    if simpler:  # pruned where a simpler layout fits a micro-batch at least as large
        most = simpler[0] if len(simpler) == 1 else list(map(max, *simpler))
        kept = [i for i, (mm, r) in enumerate(zip(room, most)) if mm > r]
    else:
        kept = list(range(len(launch)))
    if not kept:
        return []
    gpus = [launch[i] for i in kept]
    fl = family.layout
    columns = None
    if family.models_step:  # throughput.step_cost per count, what the counts share computed once
        assert fl is not None and family.shape is not None and family.device is not None  # predicted
        columns = step_cost_columns(
            family.shape, family.device, Layout(gpus[0], t, p, fl.virtual_stages, choice.zero,
                                                choice.recompute, fl.flash_attention, fl.sequence_parallel,
                                                fl.grad_bytes, fl.overlap, fl.context_parallel,
                                                fl.expert_parallel, fl.expert_tensor_parallel, fl.stage_split,
                                                fl.stack, choice.recompute_layers),
            gpus, family.step_overhead, shared)
        if family.anchor is not None:  # a declared MFU: the modelled step anchored (cost_model.declared_anchor)
            columns = scaled_step_fields(columns, family.anchor.scale)
    return [_Block(choice, own, gpus, [room[i] for i in kept], [dps[i] for i in kept], columns)]


def _binding_stages(family: CostModel, folded: bool = False) -> list[tuple]:
    """(weights, grads, optimizer, per sequence) of the family's pipeline stages that can bind the
    micro-batch room: a stage that another matches or exceeds in all four has at least its room on
    every dp and ZeRO stage (the same divisions of each), so it never sets the least (p stages:
    up to 65,536). Sorted by per-sequence bytes, largest first, so a stage's dominators come before it.
    `folded` (`_quick_all`: routed experts or context parallelism): (weights, grads, optimizer, per
    sequence, and the routed experts' weights, grads and optimizer), a stage dropped where another
    matches or exceeds it in the seven numbers `_quick_all` divides and adds (the rest of each static
    and the experts' share of it, and the per-sequence bytes): rounded differences, quotients and
    sums keep the order, so it has at least the other's room too."""
    if folded:
        rows7 = sorted({((w - ew, ew, gr - eg, eg, o - eo, eo, ps), (w, gr, o, ps, ew, eg, eo))
                        for w, gr, o, ps, (ew, eg, eo) in ((st.weights, st.grads, st.optimizer, st.per_sequence,
                                                            st.experts) for st in family.stages)}, reverse=True)
        keys: list[tuple] = []
        out: list[tuple] = []
        for key, row in rows7:
            if not any(all(a >= b for a, b in zip(k, key)) for k in keys):
                keys.append(key)
                out.append(row)
        return out
    rows = sorted({(st.weights, st.grads, st.optimizer, st.per_sequence) for st in family.stages},
                  key=lambda r: (r[3], r[0], r[1], r[2]), reverse=True)
    kept: list[tuple] = []
    for r in rows:
        if not any(k[0] >= r[0] and k[1] >= r[1] and k[2] >= r[2] and k[3] >= r[3] for k in kept):
            kept.append(r)
    return kept


def _quick_all(family: CostModel, choice: LayoutChoice, dps: list[int],
               stages: list[tuple] | None = None,
               folded: tuple[int, int, int] | None = None) -> list[int]:
    """The largest micro-batch of `choice` at each data-parallel degree of `dps` (ascending), from
    its family's cost model (same t, p and recomputation on dp = 1 without ZeRO): ZeRO only divides
    the weights, gradients and optimizer state by dp (memory_model.stage_memory), so this is
    memory_model.micro_batch_max with the statics sharded, the stages' numbers read once. With the
    step in closed form (throughput.step_cost) no cost model is built for a pair the search prunes.

    The room is a non-decreasing function of dp, in floating point too (w/dp falls as dp grows,
    and rounded sums, differences, quotients and floor keep the order), so where it is equal at
    both ends of a run of degrees it is equal on the whole run: the degrees are split in halves
    until each run's ends agree, and each distinct room costs a few evaluations, not one per count.
    `stages`: the family's `_binding_stages` (the least over them is the least over all stages),
    with the routed experts' shares where `folded`. `folded` (cp, t, etp·ep) with context
    parallelism or routed experts: ZeRO shards the stages' routed experts (`StageMemory.experts`)
    over edp = t·cp·dp/(etp·ep) and the rest over dp·cp."""
    z = choice.zero
    # the bytes the counted tensors may take (cost_model.CostModel.free_bytes): the same on every
    # count of more than one replica; on one, without the data-parallel communicator's buffers
    free_one, free_many = family.free_bytes(1), family.free_bytes(2)
    if stages is None:
        stages = _binding_stages(family, folded is not None)

    def at(dp: int) -> int:
        free = free_one if dp == 1 else free_many
        if folded is not None:
            cp, t, group = folded
            d3, d2, d1 = zero_divisors(dp * cp, z)
            e3, e2, e1 = zero_divisors(max(1, t * cp * dp // group), z)
            return micro_batch_room(free, [((w - ew) / d3 + ew / e3 + (gr - eg) / d2 + eg / e2 + (o - eo) / d1
                                            + eo / e1, ps) for w, gr, o, ps, ew, eg, eo in stages])
        d3, d2, d1 = zero_divisors(dp, z)
        return micro_batch_room(free, [(w / d3 + gr / d2 + o / d1, ps) for w, gr, o, ps in stages])

    if len(dps) > 1 and dps[0] == 1 and free_one != free_many:  # one replica, then the rest (the room
        return [at(1)] + _quick_all(family, choice, dps[1:], stages, folded)  # is non-decreasing from 2 on)
    n = len(dps)
    if not n:
        return []
    if z == 0:  # nothing sharded: the room is the same on every count
        return [at(dps[0])] * n
    out = [0] * n
    lo_v, hi_v = at(dps[0]), at(dps[-1])
    stack = [(0, n - 1, lo_v, hi_v)]
    while stack:
        lo, hi, a, b = stack.pop()
        if a == b:
            out[lo:hi + 1] = [a] * (hi - lo + 1)
            continue
        out[lo], out[hi] = a, b
        if hi - lo <= 1:
            continue
        mid = (lo + hi) // 2
        m = at(dps[mid])
        stack.append((lo, mid, a, m))
        stack.append((mid, hi, m, b))
    return out


# -- bound and prune --------------------------------------------------------------------------------

@dataclass(slots=True)
class LayoutResult:
    """One searched layout's own answer: its chosen placement, every placed count, its candidates."""

    choice: LayoutChoice
    ctx: Context
    chosen: Placement
    placements: list[Placement]
    candidates: list[Placement]


def _pinned_problem(plan: Plan, space: SearchSpace) -> PlanError | None:
    """Why a pinned run.batch with a pinned run.micro_batch forms on no searched layout, when the
    reason is the micro-batch (it divides the sequences per replica of no pair): located at
    run.micro_batch rather than at the GPU count, which is not what is wrong."""
    from budgetdsl.plan.noise import plan_error

    run = plan.run
    if run is None or run.batch is None or not isinstance(run.micro_batch, int):
        return None
    s = plan.model.seq_len
    sequences = run.batch / s
    if abs(sequences - round(sequences)) > 1e-9 * max(1.0, sequences):
        return None  # not whole sequences: every layout's own error says so
    sequences = round(sequences)
    per_replica = {sequences // dp for b in space.pairs.blocks for dp in b.dp if sequences % dp == 0}
    micro = run.micro_batch
    if not per_replica or any(n % micro == 0 for n in per_replica):
        return None
    shown = sorted(per_replica)
    listed = ", ".join(f"{n:,}" for n in shown[:8]) + (", …" if len(shown) > 8 else "")
    fits = sorted({d for n in shown for d in range(1, min(n, micro) + 1) if n % d == 0}, reverse=True)[:3]
    return plan_error(plan, ("run", "micro_batch"), "run-batch",
                      f"run.micro_batch ({micro}) divides the sequences per replica on no searched layout: "
                      f"run.batch of {sequences:,} sequences gives {listed} per data-parallel replica",
                      f"make run.micro_batch divide them (e.g. {' or '.join(map(str, fits))}), "
                      "or write run.micro_batch: auto")


class _PairModel:
    """What `placement.evaluate` reads of a cost model, for one pair of the space, without
    building it (`_search_pinned`): its GPU count, dp, tokens per sequence, FLOPs per token, the
    step in closed form (`Pair.step`) or the declared MFU's rate (`CostModel.step_time`, the same
    function). The memory at a micro-batch is not modelled here (0): the configurations these
    give are compared, never reported — the reported ones are evaluated on the pair's cost model."""

    __slots__ = ("gpus", "data_parallel", "seq_len", "flops_per_token", "mode", "rate", "fixed_time", "_step")

    step_time = CostModel.step_time

    def __init__(self, gpus: int, dp: int, ref: CostModel, step: StepCost | None):
        self.gpus, self.data_parallel, self.seq_len, self.flops_per_token = gpus, dp, ref.seq_len, ref.flops_per_token
        self.mode, self._step = ref.mode, step
        # declared without a shape: T(B) = f·B/(G·P·u), as build_cost_model sets rate and fixed_time
        self.rate = gpus * ref.peak_flops * cast(float, ref.mfu) if ref.mode == DECLARED else 0.0
        self.fixed_time = 0.0

    def memory_at(self, micro_batch: int) -> float:
        return 0.0


def _search_pinned(space: SearchSpace, base: Plan, ctx_of, fr: Frontier, limits: Limits,
                   objective: str) -> list[LayoutResult]:
    """A pinned run.batch on every layout × GPU count of the space: each pair has one configuration
    (`solve_context.pinned_division`), evaluated from the pair's own numbers (`_PairModel`: the step
    in closed form, micro-batch room, dp) with `placement.evaluate`, no cost model built per pair.
    The choices are `solve_layout`'s (each layout's pick among its feasible configurations, else
    its closest) and the solver's (the pick of every layout's feasible configurations, else the
    layout with the fewest violated limits), made on those numbers; placements on cost models
    (`solve_context.pinned_placement`) are built only for what the answer reads:
    - each layout's chosen configuration (the report's runners-up);
    - every count of the layout that wins (the GPU-count choice);
    - as candidates, the feasible configurations on the Pareto front of all of them: the solver's
      pick among those is its pick among all (a point on the whole front is on the front of any
      part that holds it, and the pick is the front's least rank, ties to the first).
    Raises the first layout's located error when the batch forms on no layout (as `solve_layout`)."""
    run = base.run
    blocks = space.pairs.blocks
    ref: CostModel | None = None
    bc = fr.b_crit
    first_problem: tuple[_Block, str | None] | None = None
    per_layout: list[tuple[_Block, list[int], list[int], int]] = []  # (block, options, feasible, chosen)
    configs: dict[tuple[int, int], Config] = {}  # (block index, k)
    everything: list[tuple[int, int]] = []  # every feasible configuration, in the solver's order
    s = base.model.seq_len
    sequences = pinned_sequences(run, s)
    for bi, b in enumerate(blocks):
        options: list[int] = []
        # a dp the sequences are no multiple of never divides (`pinned_problem`): skipped unread
        for k in ([] if sequences is None else [k for k, dp in enumerate(b.dp) if not sequences % dp]):
            split = pinned_division(run, s, b.dp[k], b.layout.pipeline_parallel > 1, b.micro[k])
            if isinstance(split, str):
                continue
            if ref is None:
                ref = cost_model(ctx_of(b.layout, b.split), b.gpus[k])
            configs[(bi, k)] = evaluate(_PairModel(b.gpus[k], b.dp[k], ref, b.step(k)), fr, limits,  # type: ignore[arg-type]
                                        split[0], split[1], b.micro[k])
            options.append(k)
        if not options:
            if first_problem is None:  # solve_layout's error: the first count's reason
                first_problem = (b, pinned_problem(run, s, b.dp[0]))
            continue
        row = {k: configs[(bi, k)] for k in options}  # this layout's configurations by count index
        feasible = [k for k in options if not row[k].violated]
        chosen = choose(objective, feasible, row.__getitem__, bc)
        if chosen is None:  # solve_context.closest: the fewest violated limits, ties to the most GPUs
            gpus = b.gpus
            chosen = min(options, key=lambda k: (len(row[k].violated), -gpus[k]))
        per_layout.append((b, options, feasible, chosen))
        everything += [(bi, k) for k in feasible]
    if not per_layout:
        if first_problem is None:  # no layout × count pair at all: the solver's no-layout error
            return []
        b0, problem = first_problem
        raise _pinned_problem(base, space) or pinned_error(base, problem)
    # the front of every feasible configuration, scanned once; the pick among it is the pick among
    # all, and the solver's (it picks among the candidates below, this front)
    on_front = pareto(everything, lambda e: axes(configs[e]))
    best = choose(objective, on_front, configs.__getitem__, bc)
    index = {id(b): bi for bi, b in enumerate(blocks)}
    if best is not None:
        front = set(on_front)
        win = best[0]
    else:  # the solver's `min` over the layouts' chosen configurations: the first with the fewest
        win = index[id(min(per_layout, key=lambda e: len(configs[(index[id(e[0])], e[3])].violated))[0])]
        front = set()
    built: dict[tuple[int, int], Placement] = {}

    def placement(bi: int, k: int) -> Placement:
        pl = built.get((bi, k))
        if pl is None:
            b = blocks[bi]
            res = pinned_placement(ctx_of(b.layout, b.split), cost_model(ctx_of(b.layout, b.split), b.gpus[k]))
            assert not isinstance(res, str) and res.config is not None
            assert res.config == configs[(bi, k)]._replace(memory=res.config.memory)
            pl = built[(bi, k)] = res
        return pl

    results = []
    for b, options, feasible, chosen in per_layout:
        bi = index[id(b)]
        cctx = ctx_of(b.layout, b.split)
        chosen_pl = placement(bi, chosen)
        placements = [placement(bi, k) for k in options] if bi == win else [chosen_pl]
        cands = [placement(bi, k) for k in feasible if (bi, k) in front]
        results.append(LayoutResult(b.layout, cctx, chosen_pl, placements, cands))
    return results


class _Contexts:
    """The solve context of each searched layout (its split), built for the layouts placed only:
    called as `ctx_of(choice, split)` by the walk, the pinned search and the replay."""

    __slots__ = ("base", "noise", "fr", "limits", "objective", "key", "cache", "by_layout")

    def __init__(self, base: Plan, noise: NoiseEstimate, fr: Frontier, limits: Limits, objective: str,
                 key: tuple, cache: SolveCache):
        self.base, self.noise, self.fr, self.limits, self.objective = base, noise, fr, limits, objective
        self.key, self.cache = key, cache
        self.by_layout: dict[LayoutChoice, Context] = {}

    def __call__(self, choice: LayoutChoice, split: Split) -> Context:
        cctx = self.by_layout.get(choice)
        if cctx is None:
            cctx = self.by_layout[choice] = Context(self.base, self.noise, self.fr, self.limits, self.objective,
                                                    split=split, key=self.key, cache=self.cache)
        return cctx


def search_layouts(plan: Plan, noise: NoiseEstimate, fr: Frontier, limits: Limits, objective: str,
                   pinned_batch: bool, micro_fixed: int | None, cache: SolveCache
                   ) -> tuple[list[LayoutResult], int, int, int, Pool[Placement] | None]:
    """Every candidate layout's own answer on the pairs of `search_space(plan)`, placing a pair only
    when it can matter: a layout × GPU-count pair whose best conceivable point (`lower_bound`) is
    dominated by a configuration already found is never placed — none of its configurations can
    reach the front, so no objective can pick one. Pairs are placed in the order of their bound's
    rank for the objective, so the good configurations found first prune the rest (`_Walk`).
    Returns (results, pairs considered, pruned as dominated by a simpler layout, pruned by bound,
    the pool of every placed candidate with its pick and front; None with a pinned batch)."""
    space, consts = _entry(plan, cache)
    considered, pruned = space.considered, space.pruned
    base = concrete(plan, None)  # run.micro_batch: auto read as omitted; the layout stays `auto`
    ctx_of = _Contexts(base, noise, fr, limits, objective, cache.model_key(plan), cache)
    if pinned_batch:
        return _search_pinned(space, base, ctx_of, fr, limits, objective), considered, pruned, 0, None
    if objective not in OBJECTIVES and space.pairs:
        raise ValueError(f"unknown objective {objective!r}")
    # The bounds are a pure function of the space and (B_crit, S_min, f·E_min, price): kept for the
    # next solve that shares them (a sweep of limits, the TUI's steps, a warm re-solve).
    memo_key = (id(consts), fr.b_crit, fr.s_min, consts.flops_per_token * fr.e_min, limits.price)
    # A search of the same space, frontier, price, objective and micro-batch under other (or the
    # same) limits: replayed when the pairs it placed give the same candidates (search_replay).
    replay_key = (*memo_key, objective, micro_fixed)
    record = cache.records.get(replay_key)
    if record is not None and record.consts is consts:
        replayed = replay(record, ctx_of, micro_fixed)
        if replayed is not None:
            return ([LayoutResult(*r) for r in replayed[0]], record.considered, record.pruned, record.bounded,
                    replayed[1])
    walk = _Walk(space, consts, _walk_bounds(cache, memo_key, consts, fr, limits.price), ctx_of, objective,
                 micro_fixed, base)
    walk.run()
    results = [LayoutResult(choice, ctx_of.by_layout[choice],
                            choose_pick(ctx_of.by_layout[choice], cands) or closest(pls), pls, cands)
               for choice, (pls, cands) in walk.placed.items()]
    bounded = walk.done.count(False)
    if len(cache.records) >= RECORDS:
        del cache.records[next(iter(cache.records))]
    cache.records[replay_key] = Record(consts, tuple(walk.history), tuple(r.chosen for r in results), walk.pool,
                                       considered, pruned, bounded)
    return results, considered, pruned, bounded, walk.pool


def _walk_bounds(cache: SolveCache, memo_key: tuple, consts: _Bounds, fr: Frontier, price: float | None) -> tuple:
    """(consts, walls, costs, flops, orders): each pair's bound on the wall clock, cost and FLOPs
    (`lower_bound`, inline over the space's constants), and the orders of the objectives walked
    (filled by `_Walk.order_for`); kept in `cache` under `memo_key`."""
    memo = cache.walks.get(memo_key)
    if memo is not None and memo[0] is consts:
        return memo
    bc, s_min, shrink = fr.b_crit, fr.s_min, 1.0 - 1e-9
    fe = consts.flops_per_token * fr.e_min
    walls: list[float] = []
    costs: list[float] = []
    flops: list[float] = []
    if len(consts.per_pair) >= _VECTOR_PAIRS:
        walls, costs, flops = _axes_bounds(consts, bc, s_min, fe, price)
    for lines, b_min, g in ([] if walls else consts.per_pair):  # pairs by index into the space
        wall = wall_bound(lines, b_min, bc, s_min) * shrink
        gpu_hours = g * wall / 3600.0
        walls.append(wall)
        costs.append(gpu_hours * price if price else gpu_hours)
        flops.append(fe * e_over_emin(bc, b_min) * shrink)
    memo = cache.walks[memo_key] = (consts, walls, costs, flops, {})
    if len(cache.walks) > WALKS:
        del cache.walks[next(iter(cache.walks))]
    return memo


def _order_keys(obj: str, consts: _Bounds, walls: list[float], costs: list[float], flops: list[float],
                bc: float, s_min: float, price: float | None) -> list[tuple[float, ...]]:
    """Each pair's bound key for `obj` (`bound_rank`, inline): the first measure rounded as
    `objectives.choose` rounds it (`rank_key`), then the objective's two tie-breaks."""
    if obj == "balanced":
        return (_balanced_keys(consts, bc, s_min, price) if len(consts.per_pair) >= _VECTOR_PAIRS else
                [balanced_key(lines, b_min, g, bc, s_min, price) for lines, b_min, g in consts.per_pair])
    keys: list[tuple[float, ...]] = []
    first = {"min_time": 0, "min_cost": 1, "min_flops": 2}[obj]
    for wall, cost, fl in zip(walls, costs, flops):
        r0 = wall if first == 0 else cost if first == 1 else fl  # axis_rank's first axis
        r0 = rounded(r0)  # rank_key: the first measure rounded as objectives.choose rounds it
        keys.append((r0, cost, fl) if first == 0 else (r0, wall, fl) if first == 1 else (r0, wall, cost))
    return keys


def _vector_order(obj: str, consts: _Bounds, walls: list[float], costs: list[float], flops: list[float],
                  bc: float, s_min: float, price: float | None, tie=None):
    """`_Walk.order_for` from numpy columns (a large space; ties by index, or by `tie`, each pair's
    rank in the tie order); None when a measure is not positive and finite (then one by one)."""
    import numpy as np

    if obj == "balanced":
        measure, second, third = _balanced_keys(consts, bc, s_min, price, columns=True)
    else:
        wall, cost, fl = np.array(walls), np.array(costs), np.array(flops)
        measure, second, third = {"min_time": (wall, cost, fl), "min_cost": (cost, wall, fl),
                                  "min_flops": (fl, wall, cost)}[obj]
    if not (np.isfinite(measure).all() and (measure > 0).all()):
        return None
    return _sorted_keys(measure, second, third, tie)


def _roomless(consts: _Bounds, pairs: Pairs, least: int) -> dict[LayoutChoice, int]:
    """Each layout's largest pair with no micro-batch room (below `least` sequences), kept with
    the bounds: of a layout's such pairs only that one can be its closest (`_Walk.place_pair`)."""
    largest = consts.roomless.get(least)
    if largest is None:
        largest = consts.roomless[least] = {}
        for i, pr in enumerate(pairs):
            if pr.micro_batch_max < least:
                j = largest.get(pr.layout)
                if j is None or pr.gpus > pairs[j].gpus:
                    largest[pr.layout] = i
    return largest


class _Walk:
    """The bound-and-prune walk of one search (exact): every configuration of a pair ranks no better
    than its bound, so a pair whose bound ranks below the best pick so far cannot supply the pick;
    it is placed only if it could still dominate the pick (its bound no worse on every axis), which
    would take the pick off the front. Pairs go in the order of their bound (`order_for`).

    State: which pairs are placed (`done`), each layout's placements and candidates (`placed`), the
    pool of candidates with every objective's pick (the plan's objective decides the answer; the
    others are where each lands on the front the report shows), and the pairs placed in order
    (`history`, what `search_replay` replays)."""

    def __init__(self, space: SearchSpace, consts: _Bounds, bounds: tuple, ctx_of: _Contexts, objective: str,
                 micro_fixed: int | None, base: Plan):
        fr = ctx_of.fr
        self.space, self.consts, self.pairs, self.ctx_of, self.base = space, consts, space.pairs, ctx_of, base
        _, self.walls, self.costs, self.flops, self.orders = bounds
        self.bc, self.s_min, self.price = fr.b_crit, fr.s_min, ctx_of.limits.price
        self.fe = consts.flops_per_token * fr.e_min
        self.objective, self.micro_fixed = objective, micro_fixed
        self.others = tuple(o for o in OBJECTIVES if o != objective)
        self.placed: dict[LayoutChoice, tuple[list[Placement], list[Placement]]] = {}
        self.done = [False] * len(self.pairs)
        # A pair with no micro-batch room (not even run.micro_batch, or one sequence, fits) has no
        # configuration (placement.place: empty for memory) on any count: it violates memory alone.
        # Of a layout's such pairs only the largest count can be its closest (solve_context.closest:
        # the fewest violated limits, ties to the most GPUs), so the first one met places that one and
        # the others need no cost model each (an infeasible space of 10,000 counts: ~100,000 pairs).
        self.least = max(1, micro_fixed or 1)
        self.roomless: dict[LayoutChoice, int | None] = dict(_roomless(consts, self.pairs, self.least))
        self.history: list[Placed] = []
        self.tie_order: list[int] | None = None  # `_tie_order`, where the pairs' own order is not it
        # every objective's pick: the report's front shows where each objective's own plan lands
        self.pool: Pool[Placement] = Pool(objective, _config, self.bc, self.others)

    def run(self) -> None:
        """The plan's objective's walk, then each other objective's own, over the same pool. A walk
        that places pairs can take another's pick off the front (or add a point only an unplaced
        pair dominates): a walk runs again while pairs were placed since it last ended, until none
        places anything (the plan's objective first, as alone). With an empty pool a walk places
        every pair (no pick to break off at), so an infeasible space is diagnosed on all of them."""
        objective, done = self.objective, self.done
        self.walk(objective)
        if not self.pool.items:
            return
        ended = {objective: done.count(True)}
        while True:
            now = done.count(True)
            stale = [o for o in (*self.others, objective) if ended.get(o, -1) != now]
            if not stale:
                return
            for o in stale:
                self.walk(o)
                ended[o] = done.count(True)

    def order_for(self, obj: str) -> tuple[list[tuple[float, ...]], list[int]]:
        """Each pair's bound key for `obj`, and the pairs in that order (kept with the bounds)."""
        hit = self.orders.get(obj)
        if hit is None:
            hit = self.orders[obj] = self._order(obj)
        return hit

    def _order(self, obj: str) -> tuple[list[tuple[float, ...]], list[int]]:
        consts, pairs = self.consts, self.pairs
        args = (consts, self.walls, self.costs, self.flops, self.bc, self.s_min, self.price)
        if len(consts.per_pair) >= _VECTOR_PAIRS:
            vector = _vector_order(obj, *args, tie=None if consts.natural else self._tie())
            if vector is not None:
                return vector
        keys = _order_keys(obj, *args)
        # a stable sort by key of the pairs in tie order (simplest layout, then fewest GPUs): their
        # own order where it is that (`natural`)
        return keys, sorted(range(len(pairs)) if consts.natural else self._tie_order(), key=keys.__getitem__)

    def _tie_order(self) -> list[int]:
        """The pairs' indices in tie order (`_tie_keys`), sorted once per walk."""
        if self.tie_order is None:
            simple, gpus = self._tie_keys()
            self.tie_order = sorted(range(len(gpus)), key=lambda i: (simple[i], gpus[i]))
        return self.tie_order

    def _tie_keys(self) -> tuple[list[tuple], list[int]]:
        """Each pair's layout `sort_key` and GPU count, by pair index: the walk's tie order
        (simplicity, then GPU count), read from the blocks (one sort_key per layout)."""
        simple: list[tuple] = []
        gpus: list[int] = []
        for b in self.pairs.blocks:
            simple += [b.layout.sort_key()] * len(b.gpus)
            gpus += b.gpus
        return simple, gpus

    def _tie(self):
        """Each pair's rank in the tie order (`_tie_order`; no two pairs tie there), a numpy column:
        what `_sorted_keys` breaks ties by where the pairs' own order is not it."""
        import numpy as np

        order = self._tie_order()
        rank = np.empty(len(order), dtype=np.int64)
        rank[order] = np.arange(len(order))
        return rank

    def place_pair(self, i: int) -> list[Placement]:
        """Place pair `i` (a roomless pair: its layout's largest roomless one, once) and return the
        candidates it gives; a located error past PLACED_MAX pairs."""
        done, pairs = self.done, self.pairs
        done[i] = True
        pr = pairs[i]
        if pr.micro_batch_max < self.least:
            j = self.roomless[pr.layout]
            if j is None:
                return []
            self.roomless[pr.layout] = None
            done[j] = True
            pr = pairs[j]
        cctx = self.ctx_of(pr.layout, pr.split)
        pls, cands = self.placed.setdefault(pr.layout, ([], []))
        cost_model(cctx, pr.gpus, step=pr.step)  # the pair's step: its cost model need not compute it again
        pls.append(place_on(cctx, pr.gpus, micro_fixed=self.micro_fixed))
        new = candidates(cctx, [pr.gpus], self.micro_fixed)
        cands.extend(new)
        self.history.append(Placed(pr.layout, pr.split, pr.gpus, tuple(new)))
        if len(self.history) > PLACED_MAX:
            raise _too_many(self.base, self.space)
        return new

    def _best_key(self, obj: str, pick: Placement | None) -> tuple[float, ...] | None:
        return None if pick is None else rank_key(rank(obj, pick.config, self.bc))

    def walk(self, obj: str) -> None:
        """Place the pairs `obj`'s pick needs (exact): in the order of their bound, up to the first
        whose bound ranks after the pick; then every pair that could dominate the pick. A pair
        placed as a threat may take the pick off the front, and the new pick may rank after the pair
        the walk broke off at (issue 13: the search stopped there and missed the pick of the whole
        space): the walk goes on from there."""
        keys, order = self.order_for(obj)
        pool = self.pool
        pick = pool.pick(obj) if pool.items else None
        start = 0
        while True:
            stop, pick = self._scan(obj, keys, order, start, pick)
            pick = self._place_threats(obj, order, pick)
            if pick is None or stop == len(order):
                return
            best_key = self._best_key(obj, pick)
            if best_key is None or keys[order[stop]] > best_key:
                return
            start = stop

    def _scan(self, obj: str, keys: list[tuple[float, ...]], order: list[int], start: int,
              pick: Placement | None) -> tuple[int, Placement | None]:
        """Place pairs in `order` from `start` until one's bound key ranks after the pick's: returns
        where the walk broke off (len(order) when it did not) and the pick then.

        The pick is chosen only when a test needs it. It is a pool item, so its key is no less than
        the least key in the pool and its wall clock and cost no less than the pool's least: a pair
        whose bound key is no greater than that key cannot trigger the break, and (balanced) a pair
        faster or cheaper than every item cannot be skipped, whatever the pick is. The pairs placed,
        and so every answer, are the same."""
        pool, done, walls, costs = self.pool, self.done, self.walls, self.costs
        balanced = obj == "balanced"
        best_key = self._best_key(obj, pick)
        stale = False  # the pool grew since `pick` was chosen
        for pos in range(start, len(order)):
            i = order[pos]
            if done[i]:
                continue
            if stale and (pool.nan or (least := pool.min_key[obj]) is None or keys[i] > least
                          or (balanced and walls[i] >= pool.min_wall and costs[i] >= pool.min_cost)):
                pick = pool.pick(obj)
                best_key = self._best_key(obj, pick)
                stale = False
            if not stale:
                if best_key is not None and keys[i] > best_key:
                    return pos, pick  # sorted: no later pair can supply the pick either
                if balanced and pick is not None and self._dominated(i, pick):
                    continue
            new = self.place_pair(i)
            if new or pick is None:  # the pick of an unchanged pool is the same pick
                pool.add(new)
                stale = True
        return len(order), (pool.pick(obj) if stale else pick)

    def _dominated(self, i: int, pick: Placement) -> bool:
        """balanced, the pick below x = 1: a batch below the pick's, or above B_crit²/its, ranks
        worse; the pair's configurations between spend at least its FLOPs (E grows with B), and if
        its bound there is no faster and no cheaper the pick dominates (or ties) every one of them."""
        cfg = pick.config
        assert cfg is not None  # a pool item
        if cfg.batch > self.bc:
            return False
        pw, pc, _ = axes(cfg)
        if self.walls[i] >= pw and self.costs[i] >= pc:
            return True
        lines, b_min, g = self.consts.per_pair[i]
        bc, pb, price = self.bc, cfg.batch, self.price
        lo = pb if pb > b_min else b_min
        wall = wall_bound(lines, lo, bc, self.s_min, max(lo, bc * bc / pb)) * (1.0 - 1e-9)
        gpu_hours = g * wall / 3600.0
        return wall >= pw and (gpu_hours * price if price else gpu_hours) >= pc

    def _place_threats(self, obj: str, order: list[int], pick: Placement | None) -> Placement | None:
        """The pick must stay on the front: place every pair that could dominate it, until none
        can; returns the pick then."""
        walls, costs, flops, done, per_pair = self.walls, self.costs, self.flops, self.done, self.consts.per_pair
        while pick is not None:
            pw, pc, pf = axes(pick.config)
            pw, pc, pf = pw * (1.0 + 1e-9), pc * (1.0 + 1e-9), pf * (1.0 + 1e-9)
            threats = [i for i in order if walls[i] <= pw and not done[i] and costs[i] <= pc and flops[i] <= pf
                       and _threat(per_pair[i], pw, pc, pf, self.fe, self.bc, self.s_min, self.price)]
            if not threats:
                break
            for i in threats:
                self.pool.add(self.place_pair(i))
            pick = self.pool.pick(obj)
        return pick


# The most layout × GPU-count pairs one search places. A plan's bounds settle its search within a
# few thousand (the hostile plans of bench/bench_search.py: 75–7,776); where the configurations of
# most pairs tie on every axis within rounding — a fixed step time of 1e10 s, a target batch of
# 1e15 tokens on {max: 10000} GPUs — no bound rules a pair out and the search would place ~80,000
# (minutes). Past this it stops with a located error, the same for every run (not a time limit).
PLACED_MAX = 10_000


def _too_many(plan: Plan, space: SearchSpace) -> PlanError:
    from budgetdsl.plan.noise import plan_error

    return plan_error(plan, ("hardware", "gpus"), "search-too-large",
                      f"the layout search placed {PLACED_MAX:,} of {space.considered:,} layout × GPU-count pairs "
                      "and no bound rules out the rest: their configurations tie on every axis (the step time, "
                      "the steps and the cost barely depend on the layout or the count)",
                      "narrow hardware.gpus to fewer counts, or give tensor_parallel, pipeline_parallel, zero "
                      "and recompute; then check the plan's numbers (a fixed step time or a target batch far "
                      "from a real run's)")


# A space of this many pairs has its bounds computed in numpy (imported then only): the same float
# operations in the same order as `wall_bound` and `balanced_key`, so the same numbers.
_VECTOR_PAIRS = 8192


def _columns(consts: _Bounds):
    """The step_bound lines, smallest batch and GPU count of every pair, as numpy columns (kept)."""
    import numpy as np

    if consts.columns is None:
        rows = [(l1[0], l1[1], l2[0], l2[1], b_min, g) for (l1, l2), b_min, g in consts.per_pair]
        consts.columns = tuple(np.array(c, dtype=float) for c in zip(*rows))
    return consts.columns


def _wall_bounds(cols, lo, bc: float, s_min: float, hi=None):
    """`wall_bound` of every pair (numpy columns of the lines) on [lo, hi] (hi None: no upper end)."""
    import numpy as np

    a1, c1, a2, c2 = cols[:4]
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        return wall_bound(((a1, c1), (a2, c2)), lo, bc, s_min, hi, np)


def _axes_bounds(consts: _Bounds, bc: float, s_min: float, fe: float, price: float | None):
    """Each pair's `axis_bounds` (wall clock, cost, FLOPs), on numpy columns, as lists."""
    import numpy as np

    a1, c1, a2, c2, b_min, g = _columns(consts)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        wall, cost, fl = axis_bounds(((a1, c1), (a2, c2)), b_min, g, fe, bc, s_min,
                                     lambda gpu_hours: gpu_hours * price if price else gpu_hours, np)
    return wall.tolist(), cost.tolist(), fl.tolist()


def _balanced_keys(consts: _Bounds, bc: float, s_min: float, price: float | None, columns: bool = False):
    """`balanced_key` of every pair (`balanced_bound` on numpy columns; the balance rounded in
    Python); `columns`: the (balance, cost, wall clock) columns instead, unrounded."""
    import numpy as np

    a1, c1, a2, c2, b_min, g = _columns(consts)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        v, cost, wall = balanced_bound(((a1, c1), (a2, c2)), b_min, g, bc, s_min,
                                       lambda gpu_hours: gpu_hours * price if price else gpu_hours, np)
    if not columns:
        return [(rounded(x), c, w) for x, c, w in zip(v.tolist(), cost.tolist(), wall.tolist())]
    return v, cost, wall


class _LazyKeys:
    """The walk's bound keys (measure rounded, then the two tie-breaks), each built when first
    read: a walk reads a few hundred of a space's 100,000."""

    __slots__ = ("measure", "second", "third", "built")

    def __init__(self, measure: list[float], second: list[float], third: list[float]):
        self.measure, self.second, self.third = measure, second, third
        self.built: dict[int, tuple[float, float, float]] = {}

    def __getitem__(self, i: int) -> tuple[float, float, float]:
        key = self.built.get(i)
        if key is None:
            key = self.built[i] = (rounded(self.measure[i]), self.second[i], self.third[i])
        return key


def _sorted_keys(measure, second, third, tie=None) -> tuple[_LazyKeys, list[int]]:
    """The pairs in the order of their keys (measure rounded, second, third, then index, or `tie`:
    each pair's rank in the order that breaks ties, distinct), as `sorted` orders the built tuples,
    from numpy columns: sorted by the raw measure first (rounding keeps order), then each run of
    measures that may round alike (within 1e-11 of each other: rounding moves a value by at most
    5e-13 of it) re-sorted by the built keys."""
    import numpy as np

    n = len(measure)
    if tie is None:
        tie = np.arange(n)
    order = np.lexsort((tie, third, second, measure))
    m = measure[order]
    near = m[1:] <= m[:-1] * (1.0 + 1e-11)  # may round alike with the next (all measures > 0)
    keys = _LazyKeys(measure.tolist(), second.tolist(), third.tolist())
    out = order.tolist()
    if near.any():
        edges = np.flatnonzero(np.diff(np.concatenate(([0], near.astype(np.int8), [0]))))
        for a, b in zip(edges[0::2].tolist(), (edges[1::2] + 1).tolist()):  # runs [a, b) of `order`
            if m[a] == m[b - 1]:
                continue  # one measure: already ordered by the tie-breaks, then the index
            out[a:b] = sorted(out[a:b], key=lambda i: (keys[i], tie[i]))
    return keys, out


def _threat(bounds: tuple, pw: float, pc: float, pf: float, fe: float, bc: float, s_min: float,
            price: float | None) -> bool:
    """Whether a pair may hold a configuration no worse than (pw, pc, pf) on every axis (the pick,
    with the tolerance added), once its batch is held to what spends no more than pf FLOPs:
    f·E_min(1 + B/B_crit) ≤ pf, so B ≤ B_crit(pf/(f·E_min) − 1), and there the least wall clock
    and cost (`wall_bound` on that interval) must be no more than the pick's."""
    lines, b_min, g = bounds
    b_max = bc * (pf / (fe * (1.0 - 1e-9)) - 1.0)
    if b_max < b_min:
        return False
    wall = wall_bound(lines, b_min, bc, s_min, b_max) * (1.0 - 1e-9)
    gpu_hours = g * wall / 3600.0
    return wall <= pw and (gpu_hours * price if price else gpu_hours) <= pc


def bound_rank(objective: str, bound: tuple[float, float, float], dp: int, ref: CostModel,
               fr: Frontier, lines: tuple | None = None, gpus: int = 0,
               price: float | None = None) -> tuple[float, ...]:
    """The objective's rank of a pair's bound (objectives.rank's order), the first measure rounded
    as `choose` rounds it: no configuration of the pair ranks before it. balanced: `balanced_key`
    (the pair's step_bound `lines`, GPU count and the price needed)."""
    wall, cost, flops = bound
    if objective != "balanced":
        from budgetdsl.solve.objectives import axis_rank

        return rank_key(axis_rank(objective, wall, cost, flops))
    assert lines is not None
    return balanced_key(lines, float(dp * ref.seq_len), gpus, fr.b_crit, fr.s_min, price)


def lower_bound(ref: CostModel, gpus: int, dp: int, step: StepCost | None, fr: Frontier,
                limits: Limits, micro_max: int = 1) -> tuple[float, float, float]:
    """No configuration of this layout on `gpus` does better than this on any axis (wall clock,
    cost, FLOPs), each bound taken on its own. The step: T ≥ max of two lines in B for every
    micro-batch split that fits (`step_bound`: the per-sequence work, the least bubble, the
    optimizer and overhead, and the least exposed data-parallel time); a declared MFU without a
    shape: T(B) = f·B/(G·P·u) exactly. With S(B) = S_min(1 + B_crit/B) the wall clock's least is `wall_bound`;
    FLOPs ≥ f·E_min(1 + B/B_crit) at the smallest batch, one sequence per replica. Steps are
    rounded up, so the continuous frontier bounds them."""
    b_min = float(dp * ref.seq_len)
    linear = 0.0 if step is not None else ref.flops_per_token / (gpus * ref.peak_flops * cast(float, ref.mfu))
    price = limits.price
    return axis_bounds(step_bound(step, micro_max, b_min, linear), b_min, gpus, ref.flops_per_token * fr.e_min,
                       fr.b_crit, fr.s_min, lambda gpu_hours: gpu_hours * price if price else gpu_hours)


def axis_bounds(lines, b_min, gpus, fe, b_crit, s_min, cost_of, xp=SCALAR) -> tuple:
    """`lower_bound` from a pair's `step_bound` lines, smallest batch and GPU count (fe = f·E_min;
    `cost_of(GPU-hours)` the cost): floats, or numpy arrays of pairs or of a sweep's rows with `xp`
    numpy. Each bound is lowered by 1e-9 so that float noise never lets it exclude its own pair."""
    wall = wall_bound(lines, b_min, b_crit, s_min, None, xp) * (1.0 - 1e-9)
    return (wall, cost_of(gpus * wall / 3600.0), fe * e_over_emin(b_crit, b_min) * (1.0 - 1e-9))


def step_bound(step: StepCost | None, micro_max: int, b_min: float,
               linear: float = 0.0) -> tuple[tuple[float, float], tuple[float, float]]:
    """Two lines (a1, c1), (a2, c2) with T ≥ max(a1·B + c1, a2·B + c2) for every configuration of a
    pair that fits in memory: B = n·b_min tokens, n = m·b sequences per replica in m micro-batches of
    b ≤ min(micro_max, n) sequences (`throughput.StepCost.total`, term for term): n·K; the bubble
    bubble_k·b ≥ bubble_k (b ≥ 1); the optimizer and overhead; and the exposed data-parallel time at
    its least, the most compute hiding it (b at its largest):
    - ZeRO 0–2: the bubble and the exposed time together, bubble_k·b + `throughput.exposed_dp` =
      bubble_k·b + reduce + gather − min(reduce, ⅔·b·window), piecewise linear in b: least at b = 1
      when the bubble grows faster than the hidden reduction (a pipeline), else at
      b_c = min(reduce/(⅔·window), micro_max) —
      or at b = n when n < b_c (line 2: its value at b = n, a line in n; line 1: the constant);
    - ZeRO-3: m·max(0, dp_per_micro − b·window) = n·max(0, dp_per_micro/b − window) ≥
      n·max(0, dp_per_micro/micro_max − window) (line 1) and ≥ dp_per_micro − n·window (line 2);
    - `overlap` declared: the exposed part is total·(1 − overlap), exact for ZeRO 0–2; for ZeRO-3
      m·dp_per_micro with m ≥ n/micro_max (line 1) and m ≥ 1 (line 2).
    The latency every micro-batch pays whatever its size (`StepCost.latency`, m·latency) adds
    latency/micro_max per sequence to line 1 (m ≥ n/micro_max) and latency to line 2 (m ≥ 1).
    `step` None (a declared MFU): T(B) = B·`linear` exactly (cost_model.CostModel.step_time)."""
    if step is None:
        return (linear, 0.0), (linear, 0.0)
    mm = float(max(1, micro_max))
    k, w, const = step.per_sequence, step.window, step.bubble_k + step.fixed
    if step.zero3:
        d = step.dp_per_micro
        if step.overlap is not None:
            d *= 1.0 - step.overlap
            line1, line2 = (k + d / mm, const), (k, const + d)
        else:
            line1, line2 = (k + max(0.0, d / mm - w), const), (k - w, const + d)
    else:
        total = step.reduce + step.gather

        def exposed(b: float) -> float:
            return exposed_dp(False, step.dp_per_micro, step.reduce, step.gather, step.overlap, b, w, 1.0, SCALAR,
                              step.gather_share)[0]
        if step.overlap is not None:
            line1 = line2 = (k, const + exposed(1.0))
        else:
            # bubble + exposed = g(b) = bubble_k·b + exposed_dp(b): slope bubble_k − ⅔·window until
            # the reduction is hidden (b = reduce/(⅔·window)), bubble_k after
            bk, fixed = step.bubble_k, step.fixed
            hidden = BACKWARD_SHARE * w  # per sequence of micro-batch
            slope = bk - hidden
            share = step.gather_share * w  # the stack hides the weights' all-gather too (convex, two kinks)
            if share > 0.0:
                kinks = [1.0, mm, step.reduce / hidden if hidden > 0 else 1.0, step.gather / share]
                line1 = (k, fixed + min(bk * b + exposed(b) for b in (max(1.0, min(x, mm)) for x in kinks)))
                line2 = (k + min(0.0, slope - share), fixed + total)
            elif slope >= 0.0:  # least at b = 1 whatever n
                line1 = line2 = (k, fixed + bk + exposed(1.0))
            else:  # least at b_c = min(reduce/(⅔·window), micro_max), or at b = n below it
                b_c = max(1.0, min(step.reduce / hidden, mm))
                line1 = (k, fixed + bk * b_c + exposed(b_c))
                line2 = (k + slope, fixed + total)
    lat = step.latency
    if lat:
        line1, line2 = (line1[0] + lat / mm, line1[1]), (line2[0], line2[1] + lat)
    return (line1[0] / b_min, line1[1]), (max(0.0, line2[0]) / b_min, line2[1])


def balanced_key(lines: tuple[tuple[float, float], tuple[float, float]], b_min: float, gpus: int,
                 b_crit: float, s_min: float, price: float | None) -> tuple[float, float, float]:
    """No configuration of a pair ranks before this for `balanced` (objectives.rank: (balance,
    cost, wall), the balance rounded as `choose` rounds it). The balance (1 + 1/x)(1 + x) is least
    at the pair's batch nearest B_crit (whole sequences per replica: multiples of b_min); a
    configuration that ties it after rounding has a balance within 1e-11 of it, so its batch lies
    where (1 + 1/x)(1 + x) ≤ that (x + 1/x ≤ V − 2), and its cost and wall clock are no less than
    their bounds on that interval of B (`wall_bound`)."""
    v, cost, wall = balanced_bound(lines, b_min, gpus, b_crit, s_min,
                                   lambda gpu_hours: gpu_hours * price if price else gpu_hours)
    return (rounded(v), cost, wall)


def least_balance(b_crit, b_min, xp=SCALAR):
    """The least (S/S_min)(E/E_min) over a pair's batches, whole sequences per replica (multiples
    of b_min): at the multiple on either side of B_crit. Floats, or numpy arrays with `xp` numpy."""
    n = b_crit / b_min
    v0 = balance(xp.maximum(xp.floor(n), 1) * b_min / b_crit)
    v1 = balance(xp.maximum(xp.ceil(n), 1) * b_min / b_crit)
    return xp.where(v1 < v0, v1, v0)


def balanced_bound(lines, b_min, gpus, b_crit, s_min, cost_of, xp=SCALAR) -> tuple:
    """`balanced_key` unrounded, (balance, cost, wall clock), with `cost_of(GPU-hours)` the cost:
    floats, or numpy arrays of pairs with `xp` numpy."""
    v = least_balance(b_crit, b_min, xp)
    t = 0.5 * (v * (1.0 + 1e-11) - 2.0)  # x + 1/x ≤ 2t
    root = xp.where(t > 1.0, xp.sqrt(xp.maximum(t * t - 1.0, 0.0)), 0.0)
    lo = xp.maximum(b_min, (t - root) * b_crit)
    wall = wall_bound(lines, lo, b_crit, s_min, xp.maximum(lo, (t + root) * b_crit), xp) * (1.0 - 1e-9)
    return v, cost_of(gpus * wall / 3600.0), wall


def _config(pl: Placement):
    return pl.config
