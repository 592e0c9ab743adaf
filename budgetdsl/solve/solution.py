"""The solver's result: one immutable, structured object (cvxpy's manners, STYLE.md).

A closed status vocabulary (`Status`, a StrEnum that serialises as its value) with groups callers
test membership in (`FEASIBLE`); labelled, inspectable constraints (`Constraint`: limit, value,
slack, binding); infeasibility as a status with relaxations, never an exception. JSON is
`solution.model_dump_json()`; the keys listed in issue 3 are stable, more may be added.

Units: tokens, sequences, seconds, FLOP, bytes, GPU-hours, US dollars; ratios are plain numbers.
"""

# No `from __future__ import annotations`: see plan_model.py (cold start, issue 13).
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_serializer


class Status(StrEnum):
    optimal = "optimal"  # the objective's best launchable configuration; every limit holds
    pinned = "pinned"  # the plan's `run:` configuration, evaluated; every limit holds
    infeasible = "infeasible"  # no launchable configuration (or the pinned one) meets every limit


FEASIBLE = frozenset({Status.optimal, Status.pinned})


class Origin(StrEnum):
    declared = "declared"  # written in the plan (or a base plan it extends)
    derived = "derived"  # computed by a formula of the cost model
    preset = "preset"  # taken from a GPU preset (vendor datasheet)
    default = "default"  # the tool's default, not in the plan


def _empty() -> list:
    """A new empty list, the default of the list fields. (`default_factory=list` has pydantic read the
    signature of the builtin `list`: the first such read compiles tokenize's regular expressions,
    ~3 ms of a cold `budgetdsl plan`.)"""
    return []


def recompute_label(recompute: str | None, layers: int | None = None, virtual_stages: int | None = None) -> str:
    """How reports name a recomputation: `full (block, 4 layers per stage)` for block recomputation
    (`hardware.recompute_layers`), per chunk with interleaving."""
    if recompute != "full" or layers is None:
        return str(recompute)
    where = "chunk" if (virtual_stages or 1) > 1 else "stage"
    return f"full (block, {layers} layer{'s' if layers != 1 else ''} per {where})"


class _Frozen(BaseModel):
    # allow_inf_nan=False: every float of an answer is checked finite where it is built, in
    # pydantic's own validation (issue 14: no renderer or export ever meets Infinity or NaN)
    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)


def _without_absent(out: Any, keys: tuple[str, ...]) -> Any:
    """A serialized model without those of `keys` that are None: fields shown only where they apply."""
    if isinstance(out, dict):
        for key in keys:
            if out.get(key) is None:
                out.pop(key, None)
    return out


class Coefficient(_Frozen):
    value: float
    unit: str
    origin: Origin
    detail: str = Field(description="The plan key, formula or datasheet it came from.")


class Batch(_Frozen):
    """The launched configuration: global batch = micro_batch × grad_accum × data_parallel."""

    tokens: float | None = None
    sequences: int | None = None
    micro_batch: int | None = None
    grad_accum: int | None = None
    data_parallel: int | None = None
    tensor_parallel: int = 1
    pipeline_parallel: int = 1
    zero: int | None = Field(None, description="ZeRO stage of the launched layout (searched or the plan's).")
    recompute: str | None = Field(None, description="Recomputation of the launched layout: none, selective, full.")
    context_parallel: int | None = Field(None, description="Context-parallel degree the search chose "
                                         "(hardware.context_parallel: auto); absent when the plan pins it.")
    expert_parallel: int | None = Field(None, description="Expert-parallel degree the search chose "
                                        "(hardware.expert_parallel: auto); absent when the plan pins it.")
    sequence_parallel: bool | None = Field(None, description="Sequence parallelism the search chose "
                                           "(hardware.sequence_parallel: auto); absent when the plan pins it.")
    virtual_pipeline_stages: int | None = Field(None, description="Interleaved stages per GPU the search chose "
                                                "(hardware.virtual_pipeline_stages: auto); absent when the plan "
                                                "pins it.")
    recompute_layers: int | None = Field(None, description="Block recomputation: layers of each pipeline stage "
                                         "(interleaved chunk) recomputed in full; absent when every layer is.")
    pipeline_split_slots: list[str] | None = Field(
        None, description="What the pipeline split counts as a layer beside the transformer layers: embedding "
        "and/or loss (hardware.embedding_in_pipeline_split, loss_in_pipeline_split; Megatron-Core's "
        "--account-for-embedding/loss-in-pipeline-split); absent when nothing is.")

    @model_serializer(mode="wrap")
    def _searched_only(self, handler: Any) -> Any:
        """The searched context/expert-parallel degrees, sequence parallelism and interleaving appear
        only where the search chose them; the accounted split only where the plan asks for it."""
        out = handler(self)
        if isinstance(out, dict):
            for key in ("context_parallel", "expert_parallel", "sequence_parallel", "virtual_pipeline_stages",
                        "recompute_layers", "pipeline_split_slots"):
                if out.get(key) is None:
                    out.pop(key, None)
        return out


class FrontierPoint(_Frozen):
    b_crit_tokens: float
    b_crit_source: str
    b_crit_uncertainty: float | None = Field(None, description="Relative, e.g. 0.3 for ±30 %.")
    s_min: float = Field(description="Minimal steps (infinite batch).")
    e_min_tokens: float = Field(description="Minimal tokens (small-batch limit).")
    x: float | None = Field(None, description="B / B_crit at the launched batch.")
    s_over_smin: float | None = Field(None, description="1 + 1/x, on the frontier.")
    e_over_emin: float | None = Field(None, description="1 + x, on the frontier.")


class Constraint(_Frozen):
    """One limit of the plan at the reported configuration."""

    name: str  # deadline | flops | gpu_hours | usd | memory | min_batch
    sense: str = Field(description="'<=': value must not exceed limit; '>=': value must reach it.")
    limit: float
    value: float | None = Field(None, description="At the reported configuration (None when there is none).")
    slack: float | None = Field(None, description="How far from the limit, in its unit; negative when violated.")
    binding: bool = Field(description="This limit decided the configuration (or is violated).")
    satisfied: bool | None = None
    unit: str
    allowed_batch: tuple[float, float | None] | None = Field(
        None, description="Global batches (tokens) this limit alone allows, [low, high] (high None: "
        "unbounded); None when no batch meets it, or it does not bound B (memory).")
    detail: str = ""


class Relaxation(_Frozen):
    """The smallest change of one limit that makes the plan feasible on its own."""

    name: str  # deadline | flops | gpu_hours | usd | gpus | memory
    current: float | None
    required: float | None = Field(None, description="The new value; None when no value helps.")
    unit: str
    message: str


class MemoryRemedy(_Frozen):
    change: str = Field(description="The plan change, e.g. 'hardware.zero: 3'.")
    memory_per_device: float = Field(description="Bytes per device at micro-batch 1, reserve included.")
    micro_batch_max: int
    fits: bool
    relative_step_time: float | None = Field(None, description="Predicted step time with the change "
                                             "over without it (its price: recomputation, bubble, gathers).")


class Span(_Frozen):
    low: float
    high: float


class Uncertainty(_Frozen):
    """The launched configuration re-evaluated at B_crit·(1 ± relative)."""

    relative: float
    b_crit_tokens: Span
    steps: Span
    tokens: Span
    flops: Span
    wall_clock_s: Span
    gpu_hours: Span
    limits_hold: dict[str, bool] = Field(description="Each limit, at both ends of the range.")
    all_hold: bool


class PinnedComparison(_Frozen):
    """The pinned `run:` configuration against the objective's own choice."""

    objective_batch_tokens: float | None
    objective_feasible: bool
    batch_ratio: float | None = Field(None, description="pinned batch / objective's batch")
    steps_ratio: float | None = None
    tokens_ratio: float | None = None
    wall_clock_ratio: float | None = None
    flops_ratio: float | None = None
    objective_ratio: float | None = Field(None, description="The objective's measure, pinned / optimal.")
    summary: str


class GpuChoice(_Frozen):
    min: int
    max: int
    step: int
    considered: int = Field(description="Launchable counts in the range (whole nodes, t·p groups).")
    feasible: int = Field(description="Counts with a feasible configuration.")
    chosen: int | None
    reason: str


class RampStage(_Frozen):
    """One stage of a batch-size ramp, launchable on the solution's micro-batch and replicas."""

    until: float = Field(description="End of the stage as a fraction of the ramp's tokens.")
    progress_start: float = Field(description="Training progress (fraction of S_min) at the start.")
    progress_end: float
    batch_tokens: float
    sequences: int
    grad_accum: int
    b_noise_tokens: float = Field(description="Mean B_noise over the stage (the model's trajectory).")
    x: float = Field(description="batch / b_noise_tokens.")
    steps: int
    tokens: float
    wall_clock_s: float


class Ramp(_Frozen):
    """A batch-size schedule (`run.batch_schedule`) beside the fixed-batch solution, both priced by
    one model (budgetdsl.solve.batch_ramp): what the ramp saves (negative: what it costs)."""

    schedule: str = Field(description="auto (planned from the B_noise trajectory) or stages (the plan's).")
    x: float | None = Field(None, description="auto: the batch tracks x × B_noise.")
    micro_batch: int = Field(description="Sequences per device per micro-step in every stage.")
    trajectory: str = Field(description="Where the B_noise trajectory came from.")
    assumption: str
    stages: list[RampStage]
    steps: int
    tokens: float
    flops: float
    wall_clock_s: float
    fixed_steps: int
    fixed_tokens: float
    fixed_wall_clock_s: float
    saves_steps: int
    saves_tokens: float
    saves_wall_clock_s: float
    closed_form_steps: float | None = Field(None, description="auto: S_min (1 + 1/x), unsnapped.")
    closed_form_tokens: float | None = Field(None, description="auto: E_min (1 + x), unsnapped.")
    notes: list[str] = Field(default_factory=_empty)


class PlanWarning(_Frozen):
    """A located warning: the plan solves, but part of what it rests on is doubtful (e.g. a B_crit
    transferred from a proxy's corpus). The same shape as a diagnostic (budgetdsl.plan.diagnostics)."""

    file: str
    line: int
    col: int
    code: str
    message: str
    hint: str | None = None

    def format(self) -> str:
        where = self.file if self.line <= 0 else f"{self.file}:{self.line}:{self.col}"
        head = f"{where}: warning[{self.code}]: {self.message}"
        return head if not self.hint else f"{head}\n  hint: {self.hint}"


class Throughput(_Frozen):
    """Utilization at the launched configuration and where a step's time goes (budgetdsl.cost.throughput).

    `source`: declared (hardware.mfu, a measured end-to-end MFU: the breakdown shows the modelled
    shares inside it) or predicted (from the layout). hfu and hardware TFLOP/s count recomputation."""

    source: str  # declared | predicted
    mfu: float | None
    hfu: float | None = None
    model_tflops_per_gpu: float
    hardware_tflops_per_gpu: float | None = None
    step_time_s: float
    breakdown: dict[str, float] = Field(description="Seconds per step: compute, recompute, tp_comm, "
                                        "pp_comm, bubble, dp_comm, optimizer, overhead.")
    stage_layers: list[int] = Field(default_factory=_empty, description="Transformer layers per "
                                    "pipeline stage (the slowest sets the pace).")
    predicted_mfu: float | None = Field(None, description="Declared mode: the MFU the layout alone "
                                        "would predict, for comparison.")


class LayoutOption(_Frozen):
    """One layout's own best configuration under the objective (issue 13)."""

    tensor_parallel: int
    pipeline_parallel: int
    zero: int
    recompute: str
    gpus: int
    micro_batch: int
    batch_tokens: float
    wall_clock_s: float
    gpu_hours: float
    flops: float
    step_time_s: float
    objective_ratio: float | None = Field(None, description="This layout's objective measure over the "
                                          "winner's (1 = as good).")
    dominated: bool = Field(False, description="The winner is no worse on wall clock, cost and FLOPs, "
                            "and better on one.")
    sequence_parallel: bool | None = Field(None, description="Sequence parallelism (where searched).")
    virtual_pipeline_stages: int | None = Field(None, description="Interleaved stages per GPU (where searched).")
    recompute_layers: int | None = Field(None, description="Block recomputation: layers per stage (chunk) "
                                         "recomputed in full; absent when every layer is.")

    @model_serializer(mode="wrap")
    def _searched_only(self, handler: Any) -> Any:
        """Sequence parallelism, interleaving and block recomputation appear only where chosen."""
        return _without_absent(handler(self), ("sequence_parallel", "virtual_pipeline_stages", "recompute_layers"))


class LayoutSearch(_Frozen):
    """The layout search, when the plan leaves layout keys to the solver (`auto`)."""

    searched: list[str] = Field(description="The plan keys set to auto.")
    considered: int = Field(description="Layout × GPU-count pairs that launch.")
    pruned: int = Field(description="Pairs skipped: a simpler layout (less ZeRO or recomputation) fits "
                        "as large a micro-batch, and is never slower.")
    bounded: int = Field(0, description="Pairs never placed: a lower bound of their wall clock, cost and "
                         "FLOPs shows that none of their configurations can be the objective's pick or "
                         "dominate it (exact; the front shown is that of the pairs placed).")
    feasible: int = Field(description="Layouts with a feasible configuration.")
    chosen: LayoutOption | None = None
    runners_up: list[LayoutOption] = Field(default_factory=_empty)
    reason: str


class FrontPoint(_Frozen):
    """A point of the Pareto front over (wall clock, cost, FLOPs) of the evaluated configurations."""

    gpus: int
    batch_tokens: float
    x: float
    micro_batch: int
    tensor_parallel: int
    pipeline_parallel: int
    zero: int
    recompute: str
    wall_clock_s: float
    gpu_hours: float
    usd: float | None = None
    flops: float
    objectives: list[str] = Field(default_factory=_empty, description="The objectives whose pick this is.")
    chosen: bool = False
    recompute_layers: int | None = Field(None, description="Block recomputation: layers per stage (chunk) "
                                         "recomputed in full; absent when every layer is.")
    virtual_pipeline_stages: int | None = Field(None, description="Interleaved stages per GPU, shown with block "
                                                "recomputation (its layers count per chunk).")

    @model_serializer(mode="wrap")
    def _block_only(self, handler: Any) -> Any:
        """Block recomputation's fields appear only on a point that has it."""
        return _without_absent(handler(self), ("recompute_layers", "virtual_pipeline_stages"))


class Solution(_Frozen):
    """Where the run sits on the frontier, what to launch, and why."""

    status: Status
    feasible: bool
    plan: str
    objective: str
    gpus: int | None
    batch: Batch
    steps: int | None = None
    tokens: float | None = None
    flops: float | None = None
    wall_clock_s: float | None = None
    gpu_hours: float | None = None
    usd: float | None = None
    frontier: FrontierPoint
    constraints: list[Constraint]
    conflicts: list[str] = Field(default_factory=_empty, description="Which limits conflict, when infeasible.")
    relaxations: list[Relaxation] = Field(default_factory=_empty)
    memory_remedies: list[MemoryRemedy] = Field(default_factory=_empty)
    uncertainty: Uncertainty | None = None
    pinned: PinnedComparison | None = None
    gpu_choice: GpuChoice | None = None
    ramp: Ramp | None = Field(None, description="The batch-size ramp, when the plan asks for one.")
    assumptions: dict[str, Coefficient]
    throughput: Throughput | None = Field(None, description="Utilization and step-time breakdown at "
                                          "the launched configuration.")
    layout: LayoutSearch | None = Field(None, description="The layout search, when the plan sets layout "
                                        "keys to auto.")
    front: list[FrontPoint] = Field(default_factory=_empty, description="A few points of the Pareto front "
                                    "(wall clock, cost, FLOPs) and where each objective lands.")
    notes: list[str] = Field(default_factory=_empty)
    warnings: list[PlanWarning] = Field(default_factory=_empty, description="Located warnings: doubtful "
                                        "input the plan still solves with (printed on stderr too).")

    def constraint(self, name: str) -> Constraint | None:
        return next((c for c in self.constraints if c.name == name), None)
