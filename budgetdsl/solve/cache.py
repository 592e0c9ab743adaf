"""`SolveCache`: what solves may share, owned by the caller that solves many times (the TUI, a sweep,
`diff`, a benchmark) and passed to `solve(plan, cache)`. A single solve makes its own.

Every entry is a pure function of its key — cost models of (model, hardware, GPU count, layout) and
what they share (`cost_model.cost_basis`), search spaces and their bounds, placements of (cost model,
frontier, limits), picks of placements, the last search of a space (`search_replay`) — so an answer
never depends on what was solved before. New limits on a cost model start from its last placements
(`seeds`): handed on only where placing afresh gives the same (`placement.seeded`, `carried`), so
that too changes no answer (tests/budgetdsl/test_solve_caches.py). Each table is bounded: a sweep's
rows must not pile up.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import TYPE_CHECKING, Any

from budgetdsl.cost.cost_model import (
    Anchor,
    Basis,
    CostModel,
    Split,
    build_cost_model,
    cost_basis,
    cost_model_key,
    declared_anchor,
)

if TYPE_CHECKING:
    from budgetdsl.cost.throughput import StepCost
    from budgetdsl.plan.model import Plan

COST_MODELS = 4096  # a search builds cost models only for the pairs it places
SPACES = 64
PLACEMENTS = 64  # per generation: kept many, they cost more than they save (memory a new limit no longer reuses)
PICKS = 256
WALKS = 64
RECORDS = 64
IDENTS = 16  # a few plans solved in turn
SEEDS = 1024  # the last placements of each cost model and frontier (`context._seed`): a search places fewer


class SolveCache:
    """The tables `solve` fills and reads (see the module docstring); `forget_limits` empties what
    depends on the limits (placements, picks, the replay's records), as a search afresh meets it."""

    __slots__ = ("cost_models", "anchors", "bases", "splits", "model_keys", "spaces", "space_by_ident", "walks",
                 "records", "placements", "picks", "seeds")

    def __init__(self) -> None:
        self.cost_models: OrderedDict[tuple, CostModel] = OrderedDict()  # (model key, gpus, split), LRU
        self.anchors: dict[tuple, Anchor | None] = {}  # model key -> a declared MFU's anchor
        self.bases: dict[tuple, Basis] = {}  # model key -> what its cost models share (`cost_basis`)
        self.splits: dict[tuple, dict] = {}  # model key -> the stages' balanced splits (`memory.stage_memory`)
        self.model_keys: dict[tuple[int, int], tuple[Any, Any, tuple]] = {}  # (id model, id hardware)
        self.spaces: OrderedDict[tuple, tuple] = OrderedDict()  # (model key, counts, layouts), LRU
        self.space_by_ident: dict[tuple[int, int], tuple] = {}  # (id model, id hardware) -> entry
        self.walks: dict[tuple, tuple] = {}  # (id bounds, B_crit, S_min, f·E_min, price) -> bounds, orders
        self.records: dict[tuple, Any] = {}  # the walk's key, objective, micro_fixed -> search_replay.Record
        # placements by (id cost model, frontier and limits' numbers, own): two generations, the
        # older dropped when the newer fills (a solve holds its own entries to its end)
        self.placements: list[dict[tuple, tuple[CostModel, dict, dict, list]]] = [{}, {}]
        self.picks: dict[tuple, tuple] = {}
        # (id cost model, B_crit, E_min) -> (cm, limits, its last group of placements on the
        # solve's own limits): what new limits on it start from (`context._seed`)
        self.seeds: dict[tuple, tuple] = {}

    def model_key(self, plan: Plan) -> tuple:
        """`cost_model_key(plan)`, remembered by the identity of the (frozen) model and hardware
        sections: a warm re-solve, and every copy of a plan that keeps them, serialises them once."""
        model, hardware = plan.model, plan.hardware
        ident = (id(model), id(hardware))
        hit = self.model_keys.get(ident)
        if hit is not None and hit[0] is model and hit[1] is hardware:  # held here: the ids are theirs
            return hit[2]
        key = cost_model_key(plan)
        self.model_keys[ident] = (model, hardware, key)
        if len(self.model_keys) > IDENTS:
            del self.model_keys[next(iter(self.model_keys))]
        return key

    def cost_model(self, key: tuple, plan: Plan, gpus: int, split: Split, timed: bool = True,
                   step: StepCost | None = None) -> CostModel:
        """`build_cost_model(plan, gpus, split)`, kept under `key` (`model_key(plan)`; () keeps none).
        `timed` False: its memory suffices (a kept cost model, else one built without the step, not
        kept: the caller keeps what it reuses). `step`: its step in closed form, where the caller has
        it (`build_cost_model`)."""
        if not key:
            return build_cost_model(plan, gpus, split, timed=timed, step=step)
        full = (key, gpus, split)
        cm = self.cost_models.get(full)
        if cm is not None:
            self.cost_models.move_to_end(full)
            return cm
        splits = self.splits.get(key)
        if splits is None:
            if len(self.splits) >= IDENTS:
                del self.splits[next(iter(self.splits))]
            splits = self.splits[key] = {}
        if not timed:
            return build_cost_model(plan, gpus, split, self.anchor(key, plan), self.basis(key, plan), timed=False,
                                    splits=splits)
        cm = self.cost_models[full] = build_cost_model(plan, gpus, split, self.anchor(key, plan), self.basis(key, plan),
                                                       step=step, splits=splits)
        if len(self.cost_models) > COST_MODELS:
            self.cost_models.popitem(last=False)
        return cm

    def anchor(self, key: tuple, plan: Plan) -> Anchor | None:
        """`declared_anchor(plan)`, once per model key (it builds a cost model of its own)."""
        if key not in self.anchors:
            if len(self.anchors) >= IDENTS:
                del self.anchors[next(iter(self.anchors))]
            self.anchors[key] = declared_anchor(plan)
        return self.anchors[key]

    def basis(self, key: tuple, plan: Plan) -> Basis:
        """`cost_basis(plan)`, once per model key: the plan-level part of every cost model (FLOPs per
        token, the device, the shape), which a search of ~1,800 layout × count pairs built each time."""
        basis = self.bases.get(key)
        if basis is None:
            if len(self.bases) >= IDENTS:
                del self.bases[next(iter(self.bases))]
            basis = self.bases[key] = cost_basis(plan)
        return basis

    def forget_limits(self) -> None:
        """Empty what depends on the limits: a solve then searches afresh on the kept cost models."""
        self.placements[:] = [{}, {}]
        self.picks.clear()
        self.records.clear()
        self.seeds.clear()
