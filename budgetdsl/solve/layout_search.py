"""The layouts the solver searches when the plan says `auto` (issue 13): which values of
tensor_parallel, pipeline_parallel, zero and recompute are candidates, and the plan with one
candidate written in.

The space (each key the plan fixes stays fixed):
- tensor_parallel t: powers of two up to one node (t·dp ranks keep tensor groups on NVLink,
  Narayanan et al. 2021 §3.3), dividing the attention heads (Megatron splits heads over t);
- pipeline_parallel p: powers of two with p·v ≤ layers; uneven stages are allowed
  (`budgetdsl.hardware.layout.stage_layers`);
- zero: 0–3, and 0–1 with a pipeline (`budgetdsl.hardware.layout.zero_problem`: frameworks do not run
  ZeRO-2/3 under one); recompute: none, selective, full;
- block recomputation (recompute full with `recompute_layers: auto`): on each GPU count, the fewest
  layers per stage (chunk) N that fit one sequence, where no recomputation does not fit and full
  recomputation does (memory falls and step time rises with N, so fewer never loses time; a larger
  N only buys a larger micro-batch, which full recomputation already offers). `BLOCK_AUTO` marks
  the candidate; `search_space` finds N per count (`budgetdsl.solve.search_space._block_layers`);
- sequence_parallel (where the plan writes auto): on exactly when t > 1 (Megatron-Core refuses it at
  t = 1), since it only divides activations and their memory-bound passes by t at the same TP
  traffic (Korthikanti et al. 2022, section 4.2.2): never slower, never more memory;
- virtual_pipeline_stages v (where the plan writes auto), with p > 1: 1, and powers of two up to 8
  whose stages hold whole v-layer chunks (the pinned split's entries, or the balanced split in
  chunks, `layout.balanced_split`). Of the v > 1 that give the same split only the largest is
  kept: the same stages with a bubble (p − 1)/v that shrinks and activations in flight
  1 + (p − 1)/(p·v) that shrink, so never slower and never more memory. Where the plan counts the
  embedding and/or the loss as layers (`hardware.embedding_in_pipeline_split`, `loss_in_pipeline_split`:
  Megatron-Core's accounted split, `layout.accounted_split`), p is searched only where the slots
  L + e + l divide into p stages, and every power of two up to 8 dividing a stage's slots is kept:
  the stages are the same for every v, but block recomputation's N layers per chunk recompute N·v of
  a stage, so a larger v coarsens it and can lose (Llama 3 405B: v 4 recomputing one layer of each
  two-layer chunk beats v 8 recomputing all);
and on each GPU count only the layouts that launch there (`budgetdsl.hardware.layout.launchable`).

Pruning, exact under the throughput model, of the steps that only add time and only help by letting
a larger micro-batch fit (`LayoutChoice.simpler`): more recomputation at the same ZeRO stage (a
recomputed forward; the longer backward hides at most its own share of the one step's reduction,
never more than the compute it adds), and ZeRO-2 over ZeRO-1 (the same sharded optimizer, gather
and reduction, plus the other micro-batches' reductions). A layout whose largest micro-batch is no
larger than such a simpler one's on the same GPU count is never better on any axis, and is skipped.
Not pruned: ZeRO-1 against ZeRO-0 (its Adam step runs on a 1/dp shard and its traffic is a
reduce-scatter and a bf16 gather where ZeRO-0 all-reduces fp32 gradients) and ZeRO-3 against
ZeRO-2 (its gathers hide behind every micro-batch's compute, ZeRO-2's weight gather behind none):
either can be the faster. The brute-force oracle (tests/budgetdsl/test_solver_oracle.py) enumerates
the space without any pruning.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from budgetdsl.cost.cost_model import Split
from budgetdsl.hardware.layout import (
    accounted_problem,
    accounted_slots,
    balanced_split,
    interleavings,
    launchable,
    zero_problem,
)
from budgetdsl.solve.solution import recompute_label

if TYPE_CHECKING:
    from budgetdsl.plan.model import Plan

RECOMPUTE_ORDER = ("none", "selective", "full")
BLOCK_AUTO = -1  # LayoutChoice.recompute_layers of the block candidate whose N the search finds per GPU count
# The largest searched context- and expert-parallel degrees: published runs use cp ≤ 16 (Llama 3
# 405B's long-context stage: 16) and ep ≤ 64 (DeepSeek-V3: 64).
MAX_SEARCHED_CP = 16
MAX_SEARCHED_EP = 64
ZERO_STAGES = (0, 1, 2, 3)


@dataclass(frozen=True, slots=True, order=True)
class LayoutChoice:
    """One candidate layout (the simplest sort first: fewest model-parallel ranks, lowest ZeRO
    stage, least recomputation)."""

    tensor_parallel: int
    pipeline_parallel: int
    zero: int
    recompute: str
    context_parallel: int | None = None  # None: the plan's own (not searched)
    expert_parallel: int | None = None
    sequence_parallel: bool | None = None  # None: the plan's own (not searched)
    virtual_stages: int | None = None
    recompute_layers: int | None = None  # with full: block recomputation of N layers per stage (chunk)

    def sort_key(self) -> tuple[int, ...]:
        key = (self.tensor_parallel * self.pipeline_parallel * (self.context_parallel or 1), self.pipeline_parallel,
               self.zero, RECOMPUTE_ORDER.index(self.recompute), self.virtual_stages or 1)
        if self.recompute_layers is None:
            return key
        return (*key[:3], RECOMPUTE_ORDER.index("selective"), key[4], 1, self.recompute_layers)  # after selective

    def simpler(self) -> list[LayoutChoice]:
        """The same t, p, cp and ep one step simpler where the step only adds time (module
        docstring): ZeRO-2 -> ZeRO-1, or one step less recomputation (none for block
        recomputation, which is kept only where no recomputation fits no sequence)."""
        out = []
        if self.zero == 2:
            out.append(replace(self, zero=1))
        r = RECOMPUTE_ORDER.index(self.recompute)
        if r > 0 and self.recompute_layers is None:
            out.append(replace(self, recompute=RECOMPUTE_ORDER[r - 1]))
        return out

    def split(self, flash_attention: bool) -> Split:
        """The same layout as a `cost_model.Split`."""
        return Split(self.zero, self.tensor_parallel, self.pipeline_parallel, self.recompute, flash_attention,
                     self.context_parallel, self.expert_parallel, self.sequence_parallel, self.virtual_stages,
                     self.recompute_layers)

    def describe(self) -> str:
        return (f"TP {self.tensor_parallel} · PP {self.pipeline_parallel}"
                + (f" · CP {self.context_parallel}" if self.context_parallel is not None else "")
                + (f" · EP {self.expert_parallel}" if self.expert_parallel is not None else "")
                + (f" · SP {'on' if self.sequence_parallel else 'off'}" if self.sequence_parallel is not None else "")
                + (f" · v {self.virtual_stages}" if self.virtual_stages is not None else "")
                + f" · ZeRO {self.zero} · recompute "
                + recompute_label(self.recompute, self.recompute_layers, self.virtual_stages))


def _powers_of_two(limit: int) -> list[int]:
    out, v = [], 1
    while v <= limit:
        out.append(v)
        v *= 2
    return out


def searched(plan: Plan) -> tuple[str, ...]:
    """The layout keys the plan leaves to the solver."""
    return plan.hardware.searched()


def candidates(plan: Plan) -> list[LayoutChoice]:
    """Every layout of the search space, simplest first (launchability is per GPU count)."""
    hw, m = plan.hardware, plan.model
    if hw.tensor_parallel == "auto":
        tps = [t for t in _powers_of_two(hw.gpus_per_node) if m.splits_over(t)]
    else:
        tps = [int(hw.tensor_parallel)]
    if hw.pipeline_parallel == "auto":
        v = 1 if hw.virtual_pipeline_stages == "auto" else hw.virtual_pipeline_stages
        slots = hw.split_slots()
        depth = (accounted_slots(m.layers, *slots) // v) if m.layers is not None else 1
        pps = _powers_of_two(max(1, depth))
        if any(slots) and m.layers is not None:  # the depths Megatron-Core splits the accounted slots into
            pps = [p for p in pps if accounted_problem(m.layers, p, v, *slots) is None]
    else:
        pps = [int(hw.pipeline_parallel)]
    zeros = list(ZERO_STAGES) if hw.zero == "auto" else [int(hw.zero)]
    recomputes: list[tuple[str, int | None]] = [
        (r, hw.recompute_layers if r == "full" and isinstance(hw.recompute_layers, int) else None)
        for r in (RECOMPUTE_ORDER if str(hw.recompute) == "auto" else (str(hw.recompute),))]
    if hw.recompute_layers == "auto" and m.layers is not None and ("full", None) in recomputes:
        recomputes.append(("full", BLOCK_AUTO))
    sps = {t: [t > 1] if hw.sequence_parallel == "auto" else [None] for t in tps}
    vs = {p: virtual_degrees(plan, p) for p in pps}
    out = [LayoutChoice(t, p, z, r, cp, ep, sp, v, n) for t in tps for p in pps for z in zeros for r, n in recomputes
           for cp in context_degrees(plan) for ep in expert_degrees(plan) for sp in sps[t] for v in vs[p]
           if zero_problem(z, p) is None or (hw.zero != "auto" and hw.pipeline_parallel != "auto")]
    return sorted(out, key=LayoutChoice.sort_key)


MAX_SEARCHED_V = 8  # interleaved stages per GPU: Megatron-LM's published runs use 2-8 (Narayanan et al. 2021)


def virtual_degrees(plan: Plan, pipeline_parallel: int) -> list[int | None]:
    """v candidates where the plan writes `virtual_pipeline_stages: auto` (module docstring): 1, and
    of the powers of two up to MAX_SEARCHED_V whose stages hold whole v-layer chunks, the largest
    of each distinct split; [1] without a pipeline; [None] (the plan's) otherwise."""
    from budgetdsl.cost.cost_model import head_layers, pinned_split

    hw, m = plan.hardware, plan.model
    if hw.virtual_pipeline_stages != "auto":
        return [None]
    if pipeline_parallel <= 1 or m.layers is None:
        return [1]
    if any(hw.split_slots()):  # Megatron-Core's accounted split: the same stages for every v, each kept
        # (block recomputation's N layers per chunk steps by v layers a stage, so a larger v is not always better)
        return list(interleavings((accounted_slots(m.layers, *hw.split_slots()) // pipeline_parallel,),
                                  MAX_SEARCHED_V))
    pinned = pinned_split(plan, pipeline_parallel)
    if pinned is not None:
        largest = interleavings(pinned, MAX_SEARCHED_V)[-1]  # one split: the largest v is never worse
        return [1] if largest == 1 else [1, largest]
    head, seen = head_layers(plan), set()
    out: list[int | None] = [1]
    v = MAX_SEARCHED_V
    while v > 1:  # largest first: a smaller v with a split already seen is its slower, fuller twin
        if m.layers % v == 0 and m.layers // v >= pipeline_parallel:
            split = balanced_split(m.layers, pipeline_parallel, v, head)
            if split not in seen:
                seen.add(split)
                out.append(v)
        v //= 2
    return out[:1] + out[:0:-1]  # 1, then ascending


def context_degrees(plan: Plan) -> list[int | None]:
    """cp candidates where the plan writes `context_parallel: auto`: powers of two up to MAX_SEARCHED_CP that
    split seq_len into 2·cp chunks (1 alone without fused attention); [None] (the plan's) otherwise."""
    hw, m = plan.hardware, plan.model
    if hw.context_parallel != "auto":
        return [None]
    if not hw.flash_attention:
        return [1]
    return [c for c in _powers_of_two(MAX_SEARCHED_CP) if c == 1 or m.seq_len % (2 * c) == 0]


def expert_degrees(plan: Plan) -> list[int | None]:
    """ep candidates where the plan writes `expert_parallel: auto`: the powers of two that divide
    model.experts (1 for a dense model); [None] (the plan's) otherwise."""
    hw, m = plan.hardware, plan.model
    if hw.expert_parallel != "auto":
        return [None]
    if not m.experts:
        return [1]
    return [e for e in _powers_of_two(min(m.experts, MAX_SEARCHED_EP)) if m.experts % e == 0]


def launches(choice: LayoutChoice, gpus: int, gpus_per_node: int, plan: Plan | None = None) -> bool:
    """Whether `choice` launches on `gpus`, with its (or the plan's) context and expert parallelism."""
    if plan is None:
        return launchable(gpus, choice.tensor_parallel, choice.pipeline_parallel, gpus_per_node)
    split = choice.split(plan.hardware.flash_attention)
    return launchable(gpus, choice.tensor_parallel, choice.pipeline_parallel, gpus_per_node,
                      split.parallel(plan)[0], split.expert_group(plan))


def concrete(plan: Plan, choice: LayoutChoice | None) -> Plan:
    """`plan` with the layout written in (and `run.micro_batch: auto` as omitted): the plan every
    other part of the solver reads. Private attributes (the loaded source) are kept."""
    update: dict[str, object] = {}
    if choice is not None:
        written: dict[str, object] = dict(tensor_parallel=choice.tensor_parallel,
                                          pipeline_parallel=choice.pipeline_parallel, zero=choice.zero,
                                          recompute=choice.recompute)
        if choice.context_parallel is not None:
            written["context_parallel"] = choice.context_parallel
        if choice.expert_parallel is not None:
            written["expert_parallel"] = choice.expert_parallel
        if choice.sequence_parallel is not None:
            written["sequence_parallel"] = choice.sequence_parallel
        if choice.virtual_stages is not None:
            written["virtual_pipeline_stages"] = choice.virtual_stages
        if choice.recompute_layers is not None or plan.hardware.recompute_layers is not None:
            written["recompute_layers"] = choice.recompute_layers  # block recomputation's N, or every layer
        update["hardware"] = plan.hardware.model_copy(update=written)
    if plan.run is not None and plan.run.micro_batch == "auto":
        update["run"] = plan.run.model_copy(update=dict(micro_batch=None))
    return plan.model_copy(update=update) if update else plan
