"""The layout search carried to new limits: a solve whose plan differs from the last one only in its
limits (a sweep's rows, the TUI's edits, a re-solve) places again only the pairs the last search
placed, and when each gives the same candidates — the same configurations, in the same order — it
keeps the last search's answer, made of the new placements.

Why that is exact: the walk (`search_space.search_layouts`) reads the limits only through the
candidates it places. Its bounds and orders depend on the space and the frontier (not the limits),
and every choice it makes — which pair next, where to break off, which pairs threaten the pick — is
a function of the pool, which holds the candidates' configurations. With the same configurations
the walk places the same pairs in the same order and ends with the same pool, so nothing of it
needs to run again; only each placement's reported interval is new, and the placements are new.
When a candidate differs (a limit moved that binds on a placed pair), the walk runs in full.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, NamedTuple

from budgetdsl.solve.context import Context, candidates, closest, place_on
from budgetdsl.solve.objectives import Pool
from budgetdsl.solve.placement import Placement

if TYPE_CHECKING:
    from budgetdsl.cost.cost_model import Split
    from budgetdsl.solve.layout_search import LayoutChoice


class Placed(NamedTuple):
    """One pair the walk placed, in the walk's order: its layout, split and count, and the
    candidates it gave (their configurations are what a replay compares). A named tuple, as
    `Record`: built at start-up in a fraction of a frozen dataclass's time (no code generated)."""

    layout: LayoutChoice
    split: Split
    gpus: int
    candidates: tuple[Placement, ...]


class Record(NamedTuple):
    """What a search placed and kept: enough to replay it under other limits."""

    consts: object  # the space's bounds (`search_space._Bounds`), held so its id stays its own
    placed: tuple[Placed, ...]
    chosen: tuple[Placement, ...]  # each layout's chosen placement, in the results' order
    pool: Pool[Placement]
    considered: int
    pruned: int
    bounded: int


def replay(record: Record, ctx_of: Callable[[LayoutChoice, Split], Context], micro_fixed: int | None):
    """(the per-layout results, the pool) of `record`'s search under the contexts' limits, or None
    when a placed pair's candidates differ (then the walk must run). The results are
    (layout, context, chosen, placements, candidates), as the walk builds them."""
    placed: dict = {}
    moved: dict[int, Placement] = {}
    for p in record.placed:
        cctx = ctx_of(p.layout, p.split)
        pl = place_on(cctx, p.gpus, micro_fixed=micro_fixed)
        new = candidates(cctx, [p.gpus], micro_fixed)
        if len(new) != len(p.candidates):
            return None
        for a, b in zip(new, p.candidates):
            if a.config is not b.config and a.config != b.config:
                return None
            moved[id(b)] = a
        pls, cands = placed.setdefault(p.layout, (cctx, [], []))[1:]
        pls.append(pl)
        cands.extend(new)
    # each layout's pick is a function of its candidates' configurations: the same one, moved (a
    # layout with none has the closest of its placements, which reads their new intervals)
    results = [(layout, cctx, moved.get(id(chosen)) or closest(pls), pls, cands)
               for (layout, (cctx, pls, cands)), chosen in zip(placed.items(), record.chosen)]
    return results, record.pool.remapped(lambda item: moved[id(item)])
