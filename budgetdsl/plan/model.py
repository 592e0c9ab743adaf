"""The plan language: strict pydantic models of a plan file, every field described with its unit.

Values arrive evaluated (budgetdsl.plan.values): numbers in base units (s, bytes, FLOP, bytes/s,
FLOP/s) and plain counts. The YAML may hold units and expressions (`21 days`, `20 * model.params`),
so the JSON Schema accepts a number or a string for every quantity. Rules that span fields raise
`PlanRuleError` naming the path, so the loader can point at the key in the file.
"""

# No `from __future__ import annotations`: pydantic would then evaluate each annotation from its
# text at every start; written as objects, they are evaluated once, as the class body runs.
import math
from dataclasses import dataclass
from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    GetCoreSchemaHandler,
    Strict,
    Tag,
    WithJsonSchema,
    field_validator,
    model_validator,
)
from pydantic.fields import FieldInfo
from pydantic_core import CoreSchema, PydanticCustomError, core_schema

from budgetdsl.hardware.gpus import PRESETS, find_preset
from budgetdsl.hardware.layout import (
    SPLIT_SLOTS,
    accounted_hint,
    accounted_problem,
    accounted_slots,
    gpu_unit,
    launch_problem,
    split_hint,
    split_problem,
)
from budgetdsl.plan.diagnostics import did_you_mean
from budgetdsl.plan.launch import Launch
from budgetdsl.quantities.units import (
    BANDWIDTH,
    BASE_UNIT,
    DATA,
    DIMENSIONLESS,
    EXAMPLES,
    FLOP,
    FLOP_RATE,
    TIME,
    Dim,
)
from budgetdsl.theory.lr_scaling import LrScaling


# The point of the feasible frontier a plan asks for; what each measures is budgetdsl.solve.objectives'.
# (No docstring: the JSON Schema would show it.)
class Objective(StrEnum):
    balanced = "balanced"
    min_time = "min_time"
    min_cost = "min_cost"
    min_flops = "min_flops"


OBJECTIVES = tuple(o.value for o in Objective)

# The physical range of every number a plan may hold. No real run comes near these bounds (the
# largest published runs: ~2·10^12 parameters, ~10^5 GPUs, ~10^26 FLOP, 10^6-token contexts); they
# exist so that every intermediate of the cost model, the solver and the exports is a finite
# float — with them, f ≤ 6·10^15 + 12·L·d·s ≤ 10^21 FLOP/token, tokens·f ≤ 10^51, and steps ×
# step time ≤ 10^70 s: far inside a double's 1.8·10^308. Lower bounds keep divisions away from
# zero and from denormals (`b_crit: 1e-320` would make x = B/B_crit infinite). The JSON Schema
# states them too (`minimum`/`maximum`), so an editor flags a value as it is typed.
MAX_PARAMS = 1e15
MAX_LAYERS = 100_000
MAX_WIDTH = 10_000_000  # d_model and heads
MAX_SEQ_LEN = 100_000_000
MAX_VOCAB = 1_000_000_000
MAX_FLOPS_PER_TOKEN = 1e21
MAX_GPUS = 1_000_000  # GPU counts, per node, and parallel degrees
MAX_GPU_COUNTS = 10_000  # candidate counts of one GPU range (each is a placement to solve)
MAX_BYTES = 1e15  # a petabyte: memory per device, activation bytes per token
MIN_MEMORY = 1e6  # a megabyte of device memory
MIN_RATE = 1e3  # FLOP/s and bytes/s
MAX_FLOP_RATE = 1e21
MAX_BANDWIDTH = 1e15
MIN_MFU = 1e-4
MAX_SECONDS = 1e10  # ~317 years: deadlines, per-step overheads
MAX_FLOPS = 1e40
MIN_MONEY, MAX_MONEY, MAX_PRICE = 1e-6, 1e15, 1e6  # GPU-hours and US dollars
MAX_TOKENS = 1e18
MAX_BATCH = 1e15  # tokens of a global batch or of B_crit
MAX_MICRO_BATCH = 1_000_000
MIN_LOSS, MAX_LOSS = 0.01, 100.0  # nats per token
MIN_LR, MAX_LR = 1e-12, 1e3
MAX_STEPS = 1_000_000_000_000


@dataclass(frozen=True, slots=True)
class QuantitySpec:
    """Marks a field whose YAML value is evaluated as a quantity of this dimension."""

    dim: Dim
    integer: bool = False
    auto: bool = False  # `auto` is a value too: the solver searches it


def PlanRuleError(path: str, message: str, hint: str | None = None) -> PydanticCustomError:
    """A rule broken at `path` (dotted, relative to the model that checks it), with a hint."""
    return PydanticCustomError("plan_rule", message, {"path": path, "hint": hint or ""})


def _auto_tag(value: Any) -> str:
    return "auto" if value == "auto" else "n"


@dataclass(frozen=True, slots=True)
class _IntegerOrAuto:
    """Validates a bounded integer or the word `auto` as a union tagged by the value, so that the
    bounds hold the number only; the field's annotation (`int | Literal["auto"]`) is its type."""

    bounds: FieldInfo  # Field(gt=..., le=...)
    optional: bool

    def __get_pydantic_core_schema__(self, source: Any, handler: GetCoreSchemaHandler) -> CoreSchema:
        union = handler.generate_schema(Annotated[
            Annotated[int, self.bounds, Tag("n")] | Annotated[Literal["auto"], Tag("auto")], Discriminator(_auto_tag)])
        return core_schema.nullable_schema(union) if self.optional else union


def _quantity(dim: Dim, description: str, *, integer: bool = False, unit: str | None = None,
              optional: bool = False, default: Any = ..., auto: bool = False, **bounds: Any) -> Any:
    """The field (a default value: `x: float = _quantity(...)`) of a number or an expression of
    dimension `dim`, in base units; with `auto`, the word `auto` too (the solver searches the
    value). `integer`, `optional` and `auto` must agree with the field's annotation."""
    unit = unit if unit is not None else BASE_UNIT[dim]
    number: dict[str, Any] = {"type": "integer" if integer else "number"}
    for key, schema_key in (("gt", "exclusiveMinimum"), ("ge", "minimum"), ("le", "maximum"),
                            ("lt", "exclusiveMaximum")):
        if key in bounds:
            number[schema_key] = bounds[key]
    example = "2^5" if integer else EXAMPLES[dim]
    branches: list[dict[str, Any]] = [number, {"type": "string", "description": f"an expression, e.g. {example!r}"}]
    if auto:
        branches.append({"const": "auto", "description": "the solver searches it"})
    if optional:
        branches.append({"type": "null"})
        default = None if default is ... else default
    if unit:
        description = f"{description} A plain number is in {unit}."
    metadata: list[Any] = [QuantitySpec(dim, integer, auto), WithJsonSchema({"anyOf": branches, "x-unit": unit or "1"})]
    if auto:  # the bounds hold the number; the word passes
        if not integer:
            raise TypeError("auto is offered for integer fields only")
        metadata.insert(0, _IntegerOrAuto(Field(**bounds), optional))
        bounds = {}
    field: FieldInfo = Field(default, description=description, **bounds)
    field.metadata[:0] = metadata
    return field


def Count(description: str, **kw: Any) -> Any:
    return _quantity(DIMENSIONLESS, description, **kw)


def Integer(description: str, **kw: Any) -> Any:
    return _quantity(DIMENSIONLESS, description, integer=True, **kw)


def Fraction(description: str, **kw: Any) -> Any:
    return _quantity(DIMENSIONLESS, description, gt=0, le=1, **kw)


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


# A plan's `params` may differ from the count its detailed shape gives (biases, a head_dim other
# than d/heads, extra norms the shape does not state) by this much before a warning says so.
PARAMS_MISMATCH = 0.05
# the keys that describe the shape in detail
SHAPE_KEYS = ("kv_heads", "ffn_hidden", "mlp", "tied_embeddings", "experts", "attention")
# The mixture-of-experts keys: each but `experts` needs `experts` (ModelShape._experts).
MOE_KEYS = ("experts", "experts_per_token", "expert_ffn_hidden", "shared_experts", "dense_layers", "capacity_factor",
            "expert_groups", "expert_groups_per_token")
MAX_EXPERTS = 65_536  # routed experts per layer (DeepSeek-V3: 256; no published model has 10^4)
# Multi-latent attention's dimensions, named as DeepSeek's Hugging Face config.json names them
# (DeepseekV2Config / DeepseekV3Config); each needs `attention: mla` (ModelShape._latent_attention).
MLA_KEYS = ("q_lora_rank", "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim")
MAX_HEAD_DIM = 65_536  # one attention head's width (DeepSeek-V3: 128 + 64; no published model has 10^3)


@dataclass(frozen=True, slots=True)
class LatentAttention:
    """Multi-latent attention (MLA; DeepSeek-AI 2024, DeepSeek-V2 §2.1.2–2.1.3, DeepSeek-V3 §2.1.1):
    keys and values come from one compressed latent c_kv of `kv_lora_rank` d_c per token, queries
    from a latent c_q of `q_lora_rank` d_c' (none: a full query projection, as DeepSeek-V2-Lite); each
    of the H heads has a `qk_nope_head_dim` d_n part decompressed from the latent and a decoupled
    RoPE part of `qk_rope_head_dim` d_r (the key's shared by all heads), and values of
    `v_head_dim` d_v. Training runs it decompressed, as standard attention of H heads with query/key
    width d_n + d_r and value width d_v (Megatron-Core's MLA; the latent cache is an inference
    saving), so its FLOPs are 6 per weight plus the scores (`budgetdsl.cost.flops`)."""

    kv_lora_rank: int
    qk_nope_head_dim: int
    qk_rope_head_dim: int
    v_head_dim: int
    q_lora_rank: int | None = None

    def params(self, d_model: float, heads: float) -> float:
        """One layer's attention weights (DeepSeek-V2 §2.1.2–2.1.3: W^DQ, W^UQ, W^QR, W^DKV, W^KR,
        W^UK, W^UV, W^O; Hugging Face modeling_deepseek's DeepseekV2Attention): the query
        down-projection d·d_c', its RMSNorm d_c' and up-projection d_c'·H·(d_n + d_r) (or W_Q,
        d·H·(d_n + d_r), without a query latent); the joint key/value down-projection with the shared
        RoPE key d·(d_c + d_r), its RMSNorm d_c, the key and value up-projections d_c·H·(d_n + d_v);
        the output projection H·d_v·d."""
        d, h = float(d_model), float(heads)
        qk = h * (self.qk_nope_head_dim + self.qk_rope_head_dim)
        rq = self.q_lora_rank
        query = d * qk if rq is None else d * rq + rq + rq * qk
        rkv = float(self.kv_lora_rank)
        key_value = d * (rkv + self.qk_rope_head_dim) + rkv + rkv * h * (self.qk_nope_head_dim + self.v_head_dim)
        return query + key_value + h * self.v_head_dim * d

    def qk_width(self, heads: float) -> float:
        """H·(d_n + d_r): the width of all heads' queries (and of the decompressed keys)."""
        return float(heads) * (self.qk_nope_head_dim + self.qk_rope_head_dim)

    def v_width(self, heads: float) -> float:
        """H·d_v: the width of all heads' values (and of the output projection's input)."""
        return float(heads) * self.v_head_dim

    @property
    def latent_width(self) -> float:
        """d_c' + d_c: the latents a token keeps (the down-projections' outputs)."""
        return float(self.q_lora_rank or 0) + float(self.kv_lora_rank)


def mlp_params(d_model: float, ffn_hidden: float, mlp: str) -> float:
    """One MLP's (or one expert's) weights: 2·d·F (GeLU: up and down) or 3·d·F (SwiGLU's gate, up
    and down matrices, Shazeer 2020)."""
    return (3.0 if mlp == "swiglu" else 2.0) * float(d_model) * float(ffn_hidden)


def transformer_params(layers: float, d_model: float, vocab: float, *, heads: float | None = None,
                       kv_heads: float | None = None, ffn_hidden: float | None = None, mlp: str = "gelu",
                       tied_embeddings: bool = True, experts: int | None = None, experts_per_token: int | None = None,
                       expert_ffn_hidden: float | None = None, shared_experts: int = 0, dense_layers: int = 0,
                       active: bool = False, mla: LatentAttention | None = None) -> float:
    """Parameters of a decoder-only transformer from its shape, biases not counted (Llama-style):
    per layer the query and output projections 2·d², the key and value projections 2·d·d_kv with
    d_kv = kv_heads·d/heads (grouped-query attention, Ainslie et al. 2023; d_kv = d without GQA),
    the MLP 2·d·F (GeLU) or 3·d·F (SwiGLU's gate, up and down matrices, Shazeer 2020), and two
    norms 2·d; plus the input embedding V·d, an untied LM head V·d, and the final norm d. On Llama
    2 7B's and Llama 3 8B/70B's shapes this is their published count to the parameter.

    Mixture-of-experts (`experts` E routed experts of width F_e per layer, top-k routing, S shared
    experts; Shazeer et al. 2017, Fedus et al. 2022, DeepSeek-V3 §2.1.2): after `dense_layers`
    dense layers, each MoE layer replaces the MLP by the router d·E and E + S experts of
    `mlp_params(d, F_e)` each; `active`: the parameters one token multiplies, k + S experts per
    MoE layer (the count FLOPs follow). On Mixtral 8x7B's shape: 46,702,792,704 total and
    12,879,925,248 active, its published 46.7B / 12.9B.

    Multi-latent attention (`mla`, DeepSeek-V2/V3; `LatentAttention.params`) replaces the query,
    key, value and output projections by its low-rank ones. On DeepSeek-V3's released shape:
    671,026,404,352 total (published 671B, multi-token-prediction module excluded), and on
    DeepSeek-V2's 235,741,434,880 (published 236B): tests/budgetdsl/test_latent_attention.py."""
    d = float(d_model)
    d_kv = d * float(kv_heads) / float(heads) if kv_heads is not None and heads else d
    ffn = float(ffn_hidden) if ffn_hidden is not None else 4.0 * d
    if mla is not None and heads:
        attention = mla.params(d, float(heads))
    else:
        attention = 2.0 * d * d + 2.0 * d * d_kv
    per_layer = attention + (3.0 if mlp == "swiglu" else 2.0) * d * ffn + 2.0 * d
    embeddings = float(vocab) * d * (1.0 if tied_embeddings else 2.0)
    if not experts:
        return float(layers) * per_layer + embeddings + d
    f_e = float(expert_ffn_hidden) if expert_ffn_hidden is not None else ffn
    used = (experts_per_token or experts) if active else experts
    moe_layer = attention + d * experts + (used + shared_experts) * mlp_params(d, f_e, mlp) + 2.0 * d
    return float(dense_layers) * per_layer + float(layers - dense_layers) * moe_layer + embeddings + d


class ModelShape(_Section):
    """The model being trained: its size and shape drive FLOPs and memory."""

    params: float | None = Count("Number of parameters N, e.g. 6.74e9 or 7B; omitted: counted from the shape "
                          "(layers, d_model, vocab, and heads, kv_heads, ffn_hidden, mlp, tied_embeddings).",
                          ge=1, le=MAX_PARAMS, default=None)
    layers: int | None = Integer("Transformer layers L.", gt=0, le=MAX_LAYERS, optional=True)
    d_model: int | None = Integer("Model width d.", gt=0, le=MAX_WIDTH, optional=True)
    heads: int | None = Integer("Attention heads a.", gt=0, le=MAX_WIDTH, optional=True)
    kv_heads: int | None = Integer("Key/value heads of grouped-query attention (1: multi-query); must divide "
                                   "heads; default heads (multi-head attention).", gt=0, le=MAX_WIDTH, optional=True)
    attention: Literal["mha", "mla"] = Field(
        "mha", description="The attention: mha (multi-head, with kv_heads grouped-query or multi-query) or mla "
        "(multi-latent attention, DeepSeek-V2/V3: low-rank query and key/value latents; needs kv_lora_rank, "
        "qk_nope_head_dim, qk_rope_head_dim and v_head_dim, and q_lora_rank where queries are compressed too).")
    q_lora_rank: int | None = Integer("MLA: rank d_c' of the query latent (DeepSeek-V3: 1536); at most d_model; "
                                      "omitted: a full query projection (DeepSeek-V2-Lite). Needs attention: mla.",
                                      gt=0, le=MAX_WIDTH, optional=True)
    kv_lora_rank: int | None = Integer("MLA: rank d_c of the joint key/value latent (DeepSeek-V2/V3: 512); at most "
                                       "d_model. Needs attention: mla.", gt=0, le=MAX_WIDTH, optional=True)
    qk_nope_head_dim: int | None = Integer("MLA: per-head query/key width decompressed from the latents, without "
                                           "RoPE (DeepSeek-V3: 128). Needs attention: mla.",
                                           gt=0, le=MAX_HEAD_DIM, optional=True)
    qk_rope_head_dim: int | None = Integer("MLA: per-head width of the decoupled RoPE query and shared RoPE key "
                                           "(DeepSeek-V3: 64); even. Needs attention: mla.",
                                           gt=0, le=MAX_HEAD_DIM, optional=True)
    v_head_dim: int | None = Integer("MLA: per-head value width (DeepSeek-V3: 128). Needs attention: mla.",
                                     gt=0, le=MAX_HEAD_DIM, optional=True)
    ffn_hidden: int | None = Integer("Hidden width F of the MLP; default 4·d_model (write it for a gated MLP, "
                                     "e.g. Llama 2 7B's 11008).", gt=0, le=MAX_WIDTH, optional=True)
    mlp: Literal["gelu", "swiglu"] = Field("gelu", description="The MLP: gelu (two matrices, d×F and F×d) or "
                                           "swiglu (gated, Shazeer 2020: three matrices, as Llama and Mistral).")
    tied_embeddings: bool = Field(True, description="The LM head shares the input embedding's V×d matrix "
                                  "(GPT-2/3, Megatron's default); false for Llama-style untied heads, whose "
                                  "params count V·d twice.")
    dropout: float = Count("Dropout probability p of the transformer layers (hidden and attention dropout) in "
                           "[0, 1); default 0.1, Megatron-LM's --hidden-dropout and --attention-dropout. Only zero "
                           "against nonzero changes the estimate: with dropout p > 0 each layer stores two 1-byte "
                           "dropout masks (2·s·d) and, where the attention scores are kept, a mask and the dropout "
                           "output beside the softmax output (5·a·s² bytes); at 0 (Llama, Mistral, Qwen, "
                           "DeepSeek) none of these (8·s·d of the part tensor parallelism keeps whole instead of "
                           "10, and 2·a·s² of scores).", ge=0, lt=1, default=0.1)
    experts: int | None = Integer("Routed experts E per mixture-of-experts layer (Mixtral: 8, DeepSeek-V3: 256); "
                                  "omitted: a dense model.", gt=0, le=MAX_EXPERTS, optional=True)
    experts_per_token: int | None = Integer("Routed experts k each token is sent to (top-k routing); at most "
                                            "experts; needs experts.", gt=0, le=MAX_EXPERTS, optional=True)
    expert_ffn_hidden: int | None = Integer("Hidden width F_e of one expert's MLP (DeepSeek-V3: 2048); default "
                                            "ffn_hidden.", gt=0, le=MAX_WIDTH, optional=True)
    shared_experts: int = Integer("Experts every token passes through beside its routed ones (DeepSeek-V3: 1; "
                                  "Qwen-MoE: 4 of its expert width).", ge=0, le=MAX_EXPERTS, default=0)
    dense_layers: int = Integer("Leading layers with a dense MLP of ffn_hidden before the mixture-of-experts "
                                "layers (DeepSeek-V3: 3).", ge=0, le=MAX_LAYERS, default=0)
    capacity_factor: float | None = _quantity(
        DIMENSIONLESS, "Expert capacity factor c (GShard, Lepikhin et al. 2021; Megatron's "
        "--moe-expert-capacity-factor): each expert's buffer holds c × its mean load, tokens beyond it "
        "are dropped, and the dispatch and the expert GEMMs run padded to it; omitted: dropless. At least 1: "
        "below it every expert drops tokens even at a perfectly balanced load.",
        ge=1, le=64, optional=True)
    expert_groups: int | None = Integer(
        "Group-limited routing: the routed experts form G equal groups and each token's experts come from "
        "expert_groups_per_token of them (DeepSeek-V3's node-limited routing, §2.1.2: 8 groups, one per node "
        "of the expert-parallel group; the Hugging Face config's n_group, Megatron-Core's "
        "--moe-router-num-groups). Must divide experts; needs expert_groups_per_token.",
        gt=0, le=MAX_EXPERTS, optional=True)
    expert_groups_per_token: int | None = Integer(
        "Groups g a token's experts are chosen from (DeepSeek-V3: 4; n_group's topk_group, Megatron-Core's "
        "--moe-router-group-topk); at most expert_groups. With hardware.expert_dispatch: deepep it bounds the "
        "nodes a token is sent to.", gt=0, le=MAX_EXPERTS, optional=True)
    seq_len: int = Integer("Sequence length s, tokens per sequence.", gt=0, le=MAX_SEQ_LEN)
    vocab: int | None = Integer("Vocabulary size V.", gt=0, le=MAX_VOCAB, optional=True)
    flops_per_token: float | None = _quantity(
        FLOP, "Training FLOPs per token (forward + backward), overriding 6N + 12·L·d·s.", ge=1, le=MAX_FLOPS_PER_TOKEN,
        optional=True)
    activation_bytes_per_token: float | None = _quantity(
        DATA, "Activation memory per token for the whole model (all layers, before tensor and "
        "pipeline parallelism divide it), overriding the Korthikanti et al. (2022) estimate.",
        ge=1, le=MAX_BYTES, optional=True)

    @property
    def param_count(self) -> float:
        """N: `params` as given, or counted from the shape when omitted (validation sets it, so a
        validated plan always has it)."""
        assert self.params is not None, "a validated model has params (given or counted)"
        return self.params

    def shape_params(self, active: bool = False) -> float | None:
        """`transformer_params` of this shape (`active`: those one token uses); None where layers,
        d_model or vocab is unknown."""
        if self.layers is None or self.d_model is None or self.vocab is None:
            return None
        return transformer_params(self.layers, self.d_model, self.vocab, heads=self.heads, kv_heads=self.kv_heads,
                                  ffn_hidden=self.ffn_hidden, mlp=self.mlp, tied_embeddings=self.tied_embeddings,
                                  experts=self.experts, experts_per_token=self.experts_per_token,
                                  expert_ffn_hidden=self.expert_ffn_hidden, shared_experts=self.shared_experts,
                                  dense_layers=self.dense_layers, active=active, mla=self.latent_attention)

    @property
    def latent_attention(self) -> LatentAttention | None:
        """The multi-latent attention's dimensions (`attention: mla`), else None."""
        if self.attention != "mla" or self.kv_lora_rank is None or self.qk_nope_head_dim is None \
                or self.qk_rope_head_dim is None or self.v_head_dim is None:
            return None
        return LatentAttention(self.kv_lora_rank, self.qk_nope_head_dim, self.qk_rope_head_dim, self.v_head_dim,
                               self.q_lora_rank)

    @property
    def dropout_masks(self) -> bool:
        """Dropout runs (p > 0), so its masks are stored (budgetdsl.cost.memory): only zero against
        nonzero changes the estimate."""
        return self.dropout > 0

    @property
    def moe_layers(self) -> int:
        """Layers whose MLP is a mixture of experts: layers − dense_layers; 0 for a dense model."""
        return (self.layers or 0) - self.dense_layers if self.experts else 0

    @property
    def expert_width(self) -> int:
        """F_e: expert_ffn_hidden, else ffn_hidden, else 4·d_model."""
        return int(self.expert_ffn_hidden or self.ffn_hidden or 4 * (self.d_model or 0))

    def routed_params(self, experts: int | None = None) -> float:
        """Weights of `experts` routed experts (all E by default) in every MoE layer: what expert
        parallelism shards (0 for a dense model)."""
        if not self.experts or self.d_model is None:
            return 0.0
        n = self.experts if experts is None else experts
        return float(self.moe_layers) * n * mlp_params(self.d_model, self.expert_width, self.mlp)

    @property
    def active_param_count(self) -> float:
        """Parameters one token multiplies: N less the routed experts it is not sent to, E − k per
        MoE layer (N itself for a dense model); the FLOPs per token follow it."""
        if not self.experts:
            return self.param_count
        return self.param_count - self.routed_params(self.experts - (self.experts_per_token or self.experts))

    def splits_over(self, tensor_parallel: int) -> bool:
        """Whether tensor parallelism of degree t splits the attention: heads and kv_heads each a
        multiple of t (Megatron-Core divides both, num_query_groups, over the TP ranks)."""
        return all(h is None or h % tensor_parallel == 0 for h in (self.heads, self.kv_heads))

    def detailed(self) -> tuple[str, ...]:
        """The detailed-shape keys (SHAPE_KEYS) the plan writes."""
        return tuple(k for k in SHAPE_KEYS if k in self.model_fields_set)

    def params_mismatch(self) -> tuple[float, float] | None:
        """(declared params, the shape's count) when the plan writes params and a detailed shape
        (SHAPE_KEYS) whose count differs by more than PARAMS_MISMATCH; else None. Without a
        detailed key the shape is a sketch (GPT-style defaults) and params is the authority."""
        counted = self.shape_params()
        if "params" not in self.model_fields_set or counted is None or not self.detailed():
            return None
        n = self.param_count
        return (n, counted) if abs(n / counted - 1.0) > PARAMS_MISMATCH else None

    @model_validator(mode="after")
    def _shape(self) -> "ModelShape":
        self._latent_attention()
        if self.d_model is not None and self.heads is not None and self.d_model % self.heads:
            raise PlanRuleError("heads", f"d_model ({self.d_model}) must be divisible by heads ({self.heads})")
        kv, heads = self.kv_heads, self.heads
        if kv is not None:
            if heads is None:
                raise PlanRuleError("kv_heads", "kv_heads needs heads: the query heads it groups",
                                    f"e.g. heads: {8 * kv}")
            if heads % kv:
                divisors = [k for k in range(1, min(heads, 4096) + 1) if heads % k == 0]
                near = min(divisors, key=lambda k: (abs(k - kv), k))
                raise PlanRuleError("kv_heads", f"kv_heads ({kv}) must divide heads ({heads}): "
                                    "each key/value head serves a whole group of query heads",
                                    f"e.g. kv_heads: {near}")
        self._experts()
        if self.params is None:
            self._derive_params()
        if self.experts and self.routed_params() >= self.param_count:
            raise PlanRuleError("params", f"the routed experts alone (moe layers × experts × expert MLP = "
                                f"{self.routed_params():.3g} parameters) are not fewer than params "
                                f"({self.param_count:.3g}), which counts them",
                                "check params, experts and expert_ffn_hidden, or omit params to count it")
        if self.vocab is not None and self.d_model is not None:
            # N counts the embedding, f the LM head (cost_model.flops_per_token): each layer keeps
            # (N − V·d)/L parameters (N − 2·V·d untied) and (f − 6·d·V)/L FLOPs, which must be positive.
            embedding = float(self.vocab) * self.d_model
            matrices = 1.0 if self.tied_embeddings else 2.0
            if matrices * embedding >= self.param_count:
                what = ("vocab × d_model" if self.tied_embeddings
                        else "the untied embedding and LM head, 2 × vocab × d_model")
                raise PlanRuleError("vocab", f"{'the embedding alone, ' if self.tied_embeddings else ''}{what} = "
                                    f"{matrices * embedding:.3g} parameters, is not less than params "
                                    f"({self.params:.3g}), which counts it; check vocab, d_model and params"
                                    + ("" if self.tied_embeddings else " (or tied_embeddings)"))
            if self.flops_per_token is not None and 6.0 * embedding >= self.flops_per_token:
                raise PlanRuleError("flops_per_token", f"the LM head alone, 6 × d_model × vocab = "
                                    f"{6.0 * embedding:.3g} FLOP per token, is not less than "
                                    f"flops_per_token ({self.flops_per_token:.3g}), which counts it "
                                    "(and params must count the embedding)")
        return self

    def _latent_attention(self) -> None:
        """The multi-latent attention keys (MLA_KEYS): each needs `attention: mla`; mla needs the
        heads and the four dimensions DeepSeek's configs always give, has no key/value head groups,
        compresses below d_model, and rotates pairs of the RoPE dimensions."""
        if self.attention != "mla":
            for key in MLA_KEYS:
                if getattr(self, key) is not None:
                    raise PlanRuleError(key, f"{key} is a dimension of multi-latent attention; it needs "
                                        "attention: mla", "write attention: mla (DeepSeek-V2/V3), or remove " + key)
            return
        missing = [k for k in ("heads", "d_model") if getattr(self, k) is None]
        missing += [k for k in MLA_KEYS[1:] if getattr(self, k) is None]
        if missing:
            raise PlanRuleError("attention", f"attention: mla needs {', '.join(missing)}: the low-rank "
                                "dimensions count its parameters, FLOPs and activations",
                                "e.g. DeepSeek-V3's kv_lora_rank: 512, qk_nope_head_dim: 128, qk_rope_head_dim: 64, "
                                "v_head_dim: 128 (and q_lora_rank: 1536), heads: 128")
        if self.kv_heads is not None:
            raise PlanRuleError("kv_heads", "kv_heads groups the key/value heads of multi-head attention; "
                                "multi-latent attention decompresses a key and a value for every head from "
                                "its latent (Megatron-Core: MLA and grouped-query attention are exclusive)",
                                "remove kv_heads, or write attention: mha")
        assert self.d_model is not None
        for key in ("q_lora_rank", "kv_lora_rank"):
            rank = getattr(self, key)
            if rank is not None and rank > self.d_model:
                raise PlanRuleError(key, f"{key} ({rank}) is above d_model ({self.d_model}): a low-rank latent "
                                    "compresses the d_model-wide token, so its rank is at most d_model",
                                    f"e.g. {key}: {min(rank, max(1, self.d_model // 4))}")
        assert self.qk_rope_head_dim is not None
        if self.qk_rope_head_dim % 2:
            raise PlanRuleError("qk_rope_head_dim", f"qk_rope_head_dim ({self.qk_rope_head_dim}) must be even: "
                                "rotary embeddings rotate pairs of dimensions (Su et al. 2021)",
                                f"e.g. qk_rope_head_dim: {self.qk_rope_head_dim + 1}")

    def _experts(self) -> None:
        """The mixture-of-experts keys: each needs `experts`; top-k within E; the shape that counts
        the routed experts (layers, d_model); dense layers fewer than layers."""
        if not self.experts:  # a value other than the default (a dumped plan writes every key)
            for key in MOE_KEYS[1:]:
                if getattr(self, key) not in (None, 0):
                    raise PlanRuleError(key, f"{key} describes a mixture-of-experts layer; it needs experts",
                                        "e.g. experts: 8 and experts_per_token: 2 (Mixtral 8x7B)")
            return
        k, e = self.experts_per_token, self.experts
        if k is None:
            raise PlanRuleError("experts", "experts needs experts_per_token: the k routed experts each token "
                                "is sent to", f"e.g. experts_per_token: {min(2, e)}")
        if k > e:
            raise PlanRuleError("experts_per_token", f"experts_per_token ({k}) must be at most experts ({e}): "
                                "a token is routed to k distinct experts", f"e.g. experts_per_token: {min(2, e)}")
        missing = [key for key in ("layers", "d_model") if getattr(self, key) is None]
        if missing:
            raise PlanRuleError("experts", f"a mixture-of-experts model needs {' and '.join(missing)}: the "
                                "routed experts' parameters (active and total) follow the shape",
                                "e.g. layers: 32, d_model: 4096")
        assert self.layers is not None
        if self.dense_layers >= self.layers:
            raise PlanRuleError("dense_layers", f"dense_layers ({self.dense_layers}) must be fewer than layers "
                                f"({self.layers}): the rest are the mixture-of-experts layers",
                                f"e.g. dense_layers: {min(3, self.layers - 1)}, or omit experts for a dense model")
        self._routing_groups()

    def _routing_groups(self) -> None:
        """Group-limited routing (Megatron-Core's TransformerConfig: experts divided into
        moe_router_num_groups equal groups, moe_router_group_topk of them per token): both keys or
        neither, G dividing E, g ≤ G, and the g groups holding at least k experts."""
        groups, g, e, k = self.expert_groups, self.expert_groups_per_token, self.experts, self.experts_per_token
        if groups is None and g is None:
            return
        if groups is None or g is None:
            missing = "expert_groups" if groups is None else "expert_groups_per_token"
            given = "expert_groups_per_token" if groups is None else "expert_groups"
            raise PlanRuleError(given, f"{given} needs {missing}: group-limited routing picks a token's "
                                "expert_groups_per_token groups out of expert_groups",
                                "e.g. expert_groups: 8, expert_groups_per_token: 4 (DeepSeek-V3)")
        assert e is not None and k is not None
        if e % groups:
            near = min((c for c in range(1, min(e, MAX_EXPERTS) + 1) if e % c == 0), key=lambda c: (abs(c - groups), c))
            raise PlanRuleError("expert_groups", f"expert_groups ({groups}) must divide experts ({e}): the "
                                "groups are equal", f"e.g. expert_groups: {near}")
        if g > groups:
            raise PlanRuleError("expert_groups_per_token", f"expert_groups_per_token ({g}) must be at most "
                                f"expert_groups ({groups})", f"e.g. expert_groups_per_token: {max(1, groups // 2)}")
        if g * (e // groups) < k:
            raise PlanRuleError("expert_groups_per_token", f"{g} groups of {e // groups} experts hold fewer than "
                                f"the {k} experts a token is routed to (experts_per_token)",
                                f"e.g. expert_groups_per_token: {min(groups, -(-k // (e // groups)))}")

    def _derive_params(self) -> None:
        """params omitted: counted from the shape (`transformer_params`), within the physical range."""
        counted = self.shape_params()
        if counted is None:
            missing = [k for k in ("layers", "d_model", "vocab") if getattr(self, k) is None]
            raise PlanRuleError("params", "missing key 'params' in 'model', and the shape does not count it: "
                                f"{', '.join(missing)} {'is' if len(missing) == 1 else 'are'} not given",
                                "give params (e.g. params: 7B), or the shape: layers, d_model, vocab "
                                "(and heads, kv_heads, ffn_hidden, mlp, tied_embeddings)")
        if counted > MAX_PARAMS:
            raise PlanRuleError("", f"the shape counts {counted:.3g} parameters, above the physical range "
                                f"({MAX_PARAMS:.0e})", "check layers, d_model, ffn_hidden and vocab")
        object.__setattr__(self, "params", counted)


class GpuRange(_Section):
    """A range of GPU counts: the solver chooses the count too."""

    min: int = Integer("Fewest GPUs to consider; default 1, so {max: 256} reads 'at most 256'.", gt=0,
                       le=MAX_GPUS, default=1)
    max: int = Integer("Most GPUs to consider.", gt=0, le=MAX_GPUS)
    step: int = Integer("Step between candidate counts.", gt=0, le=MAX_GPUS, default=1)

    @model_validator(mode="after")
    def _order(self) -> "GpuRange":
        if self.max < self.min:
            raise PlanRuleError("max", f"max ({self.max}) is below min ({self.min})")
        if (self.max - self.min) // self.step > MAX_GPU_COUNTS:
            raise PlanRuleError("step", f"the range holds more than {MAX_GPU_COUNTS:,} GPU counts; "
                                "use a larger step")
        return self

    def counts(self) -> range:
        return range(self.min, self.max + 1, self.step)


def _gpus_kind(value: Any) -> str:
    return "range" if isinstance(value, (dict, GpuRange)) else "count"


GpuCount = Annotated[
    Annotated[int, Integer("Number of GPUs.", gt=0, le=MAX_GPUS), Tag("count")] | Annotated[GpuRange, Tag("range")],
    Discriminator(_gpus_kind),
    Field(description="GPUs: a count, or {min, max, step} to let the solver choose."),
]


class Recompute(StrEnum):
    none = "none"
    selective = "selective"
    full = "full"
    auto = "auto"


class Hardware(_Section):
    """What the run has: accelerators, their memory and network, and how the model is split."""

    gpu: str | None = Field(None, description="A preset name; see `budgetdsl plan --list-gpus`. "
                            "Presets: " + ", ".join(PRESETS) + ".")
    gpus: GpuCount
    gpus_per_node: int = Integer("GPUs per node.", gt=0, le=MAX_GPUS, default=8)
    memory_per_device: float | None = _quantity(
        DATA, "Memory per GPU, overriding the preset.", ge=MIN_MEMORY, le=MAX_BYTES, optional=True)
    peak_flops: float | None = _quantity(
        FLOP_RATE, "Peak dense bf16 FLOP/s per GPU, overriding the preset.", ge=MIN_RATE, le=MAX_FLOP_RATE,
        optional=True)
    memory_reserve: float | None = _quantity(
        DATA, "Memory per GPU kept free for the CUDA context, communication buffers and fragmentation; "
        "default: the layout's CUDA context, cuBLAS workspaces and NCCL buffers plus 5% of the counted bytes "
        "(budgetdsl.cost.reserve).", ge=0, le=MAX_BYTES, optional=True)
    mfu: float | None = _quantity(
        DIMENSIONLESS, "Measured end-to-end model FLOPs utilization u (PaLM appendix B: model FLOPs per "
        "second over the whole run ÷ peak). Given: it holds at the plan's layout, micro-batch and "
        "run.batch (else with the per-step costs amortized); the modelled step, scaled to pass through "
        "it there, gives the step elsewhere. "
        "Omitted: utilization is predicted from the layout (budgetdsl.cost.throughput).",
        ge=MIN_MFU, le=1, optional=True)
    network: float | None = _quantity(
        BANDWIDTH, "Per-GPU inter-node bandwidth for the gradient all-reduce, overriding the preset's "
        "reference system.", ge=MIN_RATE, le=MAX_BANDWIDTH, optional=True)
    intra_node_network: float | None = _quantity(
        BANDWIDTH, "Per-GPU bandwidth between GPUs of one node (NVLink), used when every replica sits in "
        "one node; overrides the preset.", ge=MIN_RATE, le=MAX_BANDWIDTH, optional=True)
    hbm_bandwidth: float | None = _quantity(
        BANDWIDTH, "Per-GPU memory (HBM) bandwidth, which prices the memory-bound kernels (norms, activations, "
        "the optimizer step); overrides the preset (a power-capped or non-standard part).", ge=MIN_RATE,
        le=MAX_BANDWIDTH, optional=True)
    overlap: float | None = _quantity(
        DIMENSIONLESS, "Fraction of the data-parallel gradient reduction hidden behind the backward pass "
        "(0 = none, 1 = all); default: the framework's own (bucketed into the last micro-batch's "
        "backward, DDP/Megatron; prefetched, FSDP/ZeRO-3).", ge=0, le=1, optional=True)
    step_overhead: float = _quantity(
        TIME, "Fixed time per optimizer step (optimizer, data loading, logging).", ge=0, le=MAX_SECONDS,
        default=0.0)
    # Silence means search: a layout key the plan does not give is `auto`; a value pins it.
    zero: Literal[0, 1, 2, 3, "auto"] = Field("auto", description="ZeRO stage: 1 shards optimizer state, 2 "
                                              "also gradients, 3 also weights (FSDP full sharding); auto "
                                              "(the default): the solver searches it.")
    tensor_parallel: int | Literal["auto"] = Integer(
        "Tensor-parallel degree t; auto (the default): the solver searches it.", gt=0, le=MAX_GPUS,
        default="auto", auto=True)
    pipeline_parallel: int | Literal["auto"] = Integer(
        "Pipeline-parallel degree p; auto (the default): the solver searches it.", gt=0, le=MAX_GPUS,
        default="auto", auto=True)
    recompute: Recompute = Field(Recompute.auto, strict=False, description="Activation recomputation: none, "
                                 "selective (attention), full (each layer), or auto (the default: searched).")
    recompute_layers: int | Literal["auto"] | None = Integer(
        "Block recomputation with recompute: full (Megatron-LM --recompute-method block "
        "--recompute-num-layers N): in each pipeline stage (each interleaved chunk) the first N transformer "
        "layers are recomputed in full and the rest keep their activations; at most the layers of a chunk. "
        "auto: the solver takes the fewest that fit one sequence. Omitted: every layer is recomputed.",
        ge=0, le=MAX_LAYERS, optional=True, auto=True)
    flash_attention: bool = Field(True, description="Fused attention that keeps no s×s scores.")
    sequence_parallel: bool | Literal["auto"] = Field(
        False, description="Megatron sequence parallelism (Korthikanti et al. 2022): layer norms and dropout "
        "split over the tensor-parallel ranks too (activations ÷ t); off by default, as in Megatron-LM; "
        "auto: the solver searches it (on wherever tensor_parallel > 1: never slower, never more memory).")
    virtual_pipeline_stages: int | Literal["auto"] = Integer(
        "Interleaved 1F1B: model chunks per GPU v (Megatron's virtual pipeline); the bubble shrinks to "
        "(p − 1)/(v·m). Default 1; auto: the solver searches powers of two up to 8 that divide every "
        "stage's layers (its slots, with embedding_in_pipeline_split or loss_in_pipeline_split).",
        gt=0, le=1024, default=1, auto=True)
    # a tuple (a plan is hashed: LoadedPlan.__hash__), read from a YAML list; each entry a strict integer
    stage_layers: tuple[Annotated[int, Strict()], ...] | None = Field(
        None, strict=False, description="Transformer layers per pipeline stage, first to last, pinning the split "
        "(Megatron-Core's uneven pipeline: --decoder-first/last-pipeline-num-layers): one entry per stage "
        "of a pinned pipeline_parallel, summing to model.layers, each at least 1 and a multiple of "
        "virtual_pipeline_stages. Default: the tool balances the stages, the LM head on the last.")
    embedding_in_pipeline_split: bool = Field(
        False, description="Count the input embedding as one transformer layer in the pipeline split "
        "(Megatron-Core --account-for-embedding-in-pipeline-split): the first stage holds one layer fewer, its "
        "first interleaved chunk the embedding in that layer's place, so interleaving runs where the layers "
        "plus the accounted parts divide into pipeline_parallel × virtual_pipeline_stages (Llama 3 405B: 126 "
        "layers + 2 on 16 stages of 8 chunks). Not with stage_layers. Default false.")
    loss_in_pipeline_split: bool = Field(
        False, description="Count the output head and the loss as one transformer layer in the pipeline split "
        "(Megatron-Core --account-for-loss-in-pipeline-split): the last stage holds one layer fewer, its last "
        "interleaved chunk the head and loss in that layer's place. Not with stage_layers. Default false.")
    context_parallel: int | Literal["auto"] = Integer(
        "Context-parallel degree cp (Megatron-Core --context-parallel-size; ring attention, Liu et al. 2023): "
        "each sequence is split over cp GPUs, which exchange keys and values; GPUs = tensor × pipeline × "
        "context × data parallel. seq_len must split into 2·cp chunks (load-balanced causal attention). "
        "Default 1; auto: the solver searches it.", gt=0, le=MAX_GPUS, default=1, auto=True)
    expert_parallel: int | Literal["auto"] = Integer(
        "Expert-parallel degree ep (Megatron-Core --expert-model-parallel-size): the routed experts are "
        "spread over ep GPUs of the data- and context-parallel ranks, which exchange tokens by all-to-all; "
        "must divide model.experts. Default 1; auto: the solver searches it.", gt=0, le=MAX_GPUS, default=1,
        auto=True)
    expert_tensor_parallel: int | None = Integer(
        "Tensor-parallel degree of each routed expert (Megatron-Core --expert-tensor-parallel-size); default "
        "tensor_parallel. Expert tensor × expert parallel ranks fold into tensor × context × data parallel.",
        gt=0, le=MAX_GPUS, optional=True)
    grad_dtype: Literal["fp32", "bf16"] = Field("fp32", description="Gradient accumulation and "
                                                "reduction dtype: fp32 (Megatron-LM's main_grad and "
                                                "DeepSpeed's default for bf16 runs) or bf16.")
    kernel_efficiency: float | None = Fraction("Fraction of peak FLOP/s the step's matmuls reach, for predicted "
                                               "utilization; overrides the GPU preset's fitted value.", optional=True)
    precision: Literal["bf16", "fp8"] = Field("bf16", description="The transformer layers' GEMMs: bf16, or fp8 "
                                              "(Transformer Engine style: FP8 GEMMs at the preset's dense FP8 peak, "
                                              "Hopper and Blackwell; attention, softmax, LM head, master weights "
                                              "and optimizer stay BF16/FP32). MFU stays against peak_flops (BF16).")
    expert_dispatch: Literal["alltoall", "deepep"] = Field(
        "alltoall", description="How routed tokens reach their experts' GPUs: alltoall (Megatron-Core's all-to-all "
        "dispatcher: every copy of a token to its expert's GPU) or deepep (DeepEP, Megatron-Core's flex "
        "dispatcher: a token crosses the inter-node network once per destination node and is forwarded over "
        "NVLink, its dispatch in FP8 with precision: fp8; DeepSeek-V3 §3.2.2). Needs model.experts.")
    expert_overlap: bool = Field(
        False, description="The expert-parallel all-to-alls run under another micro-batch's compute (DeepSeek-V3's "
        "DualPipe, §3.2.1; Megatron-Core's --overlap-moe-expert-parallel-comm): only what outlasts the compute "
        "is exposed. Needs model.experts.")
    stack: Literal["default", "megatron-core", "fsdp2", "fsdp2-compile", "deepspeed"] = Field(
        "default", description="The training framework, for what its communication overlaps "
        "(budgetdsl/cost/stacks.py): megatron-core (TP comm overlap, overlapped param gather and "
        "gradient reduce in max(40M, 1M·dp)-parameter buckets, pipeline sends hidden with interleaving), "
        "fsdp2 (per-block collectives, parameter gathers prefetched; torchtitan's op-level selective "
        "recomputation and eager elementwise kernels), fsdp2-compile (the same with torch.compile), "
        "deepspeed (5e8-element buckets), "
        "or default (one gradient collective per step, hidden behind the last backward; TP, PP and "
        "ZeRO-1/2's parameter gather exposed). Every collective pays NCCL's latency.")

    @field_validator("gpu")
    @classmethod
    def _known_preset(cls, name: str | None) -> str | None:
        if name is not None and find_preset(name) is None:
            raise PlanRuleError("", f"unknown GPU preset {name!r}", did_you_mean(name, PRESETS) or
                                "presets: " + ", ".join(PRESETS) + "; or give peak_flops and "
                                "memory_per_device instead")
        return name

    def searched(self) -> tuple[str, ...]:
        """The layout keys set to `auto` (the solver searches them)."""
        return tuple(k for k in LAYOUT_KEYS + PARALLEL_KEYS if getattr(self, k) == "auto")

    def split_slots(self) -> tuple[bool, bool]:
        """(embedding, loss): which of the two the pipeline split counts as a layer (Megatron-Core's
        --account-for-embedding/loss-in-pipeline-split; `budgetdsl.hardware.layout.accounted_split`)."""
        return bool(self.embedding_in_pipeline_split), bool(self.loss_in_pipeline_split)

    def model_parallel(self) -> tuple[int, int]:
        """(tensor, pipeline) degrees of a pinned layout; a ValueError where either is `auto`."""
        t, p = self.tensor_parallel, self.pipeline_parallel
        if isinstance(t, str) or isinstance(p, str):
            raise ValueError("the layout is searched (auto): the solution names its degrees")
        return t, p

    @model_validator(mode="after")
    def _declared_layout(self) -> "Hardware":
        """With a declared `mfu` a silent layout key takes the framework's default (t = p = 1, no
        ZeRO, no recomputation) instead of `auto`: the MFU was measured on one layout, and a
        search at one MFU for every layout would reward the most model-parallel one (the
        smallest batch) on paper. `auto` written in the plan still searches."""
        if self.mfu is not None:
            for key, value in DECLARED_LAYOUT_DEFAULTS.items():
                if key not in self.model_fields_set:
                    object.__setattr__(self, key, value)
        return self

    @model_validator(mode="after")
    def _preset(self) -> "Hardware":
        if self.gpu is None:
            missing = [k for k in ("peak_flops", "memory_per_device") if getattr(self, k) is None]
            if missing:
                raise PlanRuleError("gpu", "name a GPU preset, or give " + " and ".join(missing),
                                    "e.g. gpu: H100-SXM5-80GB")
        if self.precision == "fp8":
            preset = find_preset(self.gpu) if self.gpu is not None else None
            if preset is None or preset.fp8_peak_flops <= 0:
                fp8 = ", ".join(p.name for p in PRESETS.values() if p.fp8_peak_flops > 0)
                what = f"the {preset.name} preset has no FP8 tensor-core peak" if preset else \
                    "FP8 GEMMs need a GPU preset with an FP8 tensor-core peak"
                raise PlanRuleError("precision", f"precision: fp8 runs the GEMMs at the FP8 dense peak; {what}",
                                    f"write precision: bf16, or name an FP8 part: {fp8}")
        t, p, cp = _degree(self.tensor_parallel), _degree(self.pipeline_parallel), _degree(self.context_parallel)
        if isinstance(self.gpus, GpuRange):
            _range_split(self.gpus, gpu_unit(t, p, cp), self.tensor_parallel, self.pipeline_parallel, cp)
        else:
            problem = launch_problem(self.gpus, t, p, self.gpus_per_node, cp)
            if problem:
                raise PlanRuleError("gpus", problem)
        return self

    def _expert_groups(self, at: str = "") -> None:
        """The routed experts' etp·ep groups fold into every stage's GPUs (`layout.gpu_unit`):
        checked once the experts are known (Plan._split), located at expert_parallel."""
        group = self.expert_group()
        if group == 1:
            return
        t, p, cp = _degree(self.tensor_parallel), _degree(self.pipeline_parallel), _degree(self.context_parallel)
        if isinstance(self.gpus, GpuRange):
            _range_split(self.gpus, self.gpu_unit(), self.tensor_parallel, self.pipeline_parallel, cp, group, at)
            return
        problem = launch_problem(self.gpus, t, p, self.gpus_per_node, cp, group)
        if problem:
            ep = _degree(self.expert_parallel)
            etp = group // ep
            fits = [e for e in range(ep, 0, -1) if (self.gpus // p) % (etp * e) == 0]
            raise PlanRuleError(at + "expert_parallel", problem, f"e.g. expert_parallel: {fits[0] if fits else 1}")

    def expert_group(self) -> int:
        """etp·ep: the GPUs one copy of the routed experts spans (expert_tensor_parallel defaults to
        tensor_parallel, as Megatron-Core's; `auto` counted as 1)."""
        ep = _degree(self.expert_parallel)
        if self.expert_tensor_parallel is None and ep == 1:
            return 1  # t·1 divides every stage's t·cp·dp GPUs: no constraint
        etp = self.expert_tensor_parallel if self.expert_tensor_parallel is not None else _degree(self.tensor_parallel)
        return etp * ep

    def gpu_unit(self) -> int:
        """What every launchable GPU count of the layout is a multiple of (`layout.gpu_unit`; `auto`
        degrees counted as 1)."""
        return gpu_unit(_degree(self.tensor_parallel), _degree(self.pipeline_parallel),
                        _degree(self.context_parallel), self.expert_group())


def _range_split(gpus: GpuRange, split: int, tp: int | str, pp: int | str, cp: int = 1, expert_group: int = 1,
                 at: str = "") -> None:
    """A range's counts are min, min + step, …: each must split into t·p groups, so min and step
    are multiples of t·p (of `layout.gpu_unit` with context or expert parallelism). An unwritten
    min (1) or step (1) is named as the default it is, and the error is located at a key the user wrote."""
    written = gpus.model_fields_set
    what = f"tensor_parallel × pipeline_parallel ({_degree(tp)} × {_degree(pp)} = {split})"
    if cp > 1 or expert_group > 1:
        what = (f"the layout's unit ({split}: tensor × pipeline × context parallel {_degree(tp)} × {_degree(pp)} × "
                f"{cp}, and pipeline × expert groups {_degree(pp)} × {expert_group})")
    shown = "{" + ", ".join(f"{k}: {getattr(gpus, k)}" for k in ("min", "max", "step") if k in written) + "}"
    where = "gpus.max" if "max" in written else "gpus"
    for key in ("min", "step"):
        value = getattr(gpus, key)
        if value % split and key in written:
            raise PlanRuleError(f"{at}gpus.{key}", f"gpus.{key} ({value}) must be a multiple of {what}",
                                f"e.g. gpus.{key}: {max(split, value // split * split)}")
    if gpus.min % split and gpus.max < split:
        raise PlanRuleError(at + where, f"no GPU count in gpus {shown} splits into {what}: it needs at least "
                            f"{split} GPUs", f"raise gpus.max to {split} or more, or lower the parallel degrees")
    unwritten = [k for k in ("min", "step") if getattr(gpus, k) % split]
    if not unwritten:
        return
    told = " and ".join(f"{'starts at' if k == 'min' else 'steps by'} {getattr(gpus, k)}" for k in unwritten)
    first = -(-gpus.min // split) * split
    last = gpus.max // split * split
    fix = {"min": first, "max": gpus.max, "step": split if "step" in unwritten else gpus.step}
    hint = f"write gpus: {{min: {fix['min']}, max: {fix['max']}, step: {fix['step']}}}"
    if first == last:
        hint = f"write gpus: {first} (the one count in the range that splits), or " + hint.removeprefix("write ")
    raise PlanRuleError(at + where, f"gpus {shown} {told} (the default{'s' if len(unwritten) > 1 else ''} "
                        f"{' and '.join(unwritten)}), and a range's counts (min, min + step, …) must be "
                        f"multiples of {what}", hint)


def _degree(value: int | str) -> int:
    """A parallel degree, `auto` counted as 1 (the solver searches it; 1 always launches)."""
    return 1 if value == "auto" else int(value)


LAYOUT_KEYS = ("tensor_parallel", "pipeline_parallel", "zero", "recompute")
# searched only where the plan writes auto
PARALLEL_KEYS = ("context_parallel", "expert_parallel", "sequence_parallel", "virtual_pipeline_stages",
                 "recompute_layers")
# What a silent layout key means beside a declared hardware.mfu (Hardware._declared_layout).
DECLARED_LAYOUT_DEFAULTS = {"tensor_parallel": 1, "pipeline_parallel": 1, "zero": 0, "recompute": Recompute.none}


class Budget(_Section):
    """The limits the run must respect. Each is optional; the solver reports the slack of each."""

    deadline: float | None = _quantity(
        TIME, "Wall-clock limit of the run, e.g. '21 days'.", ge=1, le=MAX_SECONDS, optional=True)
    flops: float | None = _quantity(
        FLOP, "Compute budget, e.g. '1.2e23' or '120 ZFLOP'.", ge=1, le=MAX_FLOPS, optional=True)
    gpu_hours: float | None = Count("GPU-hour budget, e.g. '250k'.", ge=MIN_MONEY, le=MAX_MONEY, optional=True)
    usd: float | None = Count(
        "Money budget in US dollars; needs usd_per_gpu_hour.", ge=MIN_MONEY, le=MAX_MONEY, optional=True)
    usd_per_gpu_hour: float | None = Count(
        "Price of one GPU-hour in US dollars.", ge=MIN_MONEY, le=MAX_PRICE, optional=True)

    @model_validator(mode="after")
    def _price(self) -> "Budget":
        if self.usd is not None and self.usd_per_gpu_hour is None:
            raise PlanRuleError("usd", "a budget in usd needs usd_per_gpu_hour")
        return self


class Target(_Section):
    """How much training reaches the quality target: tokens at a batch, or E_min directly."""

    tokens: float | None = Count(
        "Tokens that reach the target when trained at `at_batch`.", ge=1, le=MAX_TOKENS, optional=True)
    at_batch: float | None = Count(
        "Global batch (tokens) at which `tokens` reach the target.", ge=1, le=MAX_BATCH, optional=True)
    min_tokens: float | None = Count(
        "E_min: tokens to the target in the small-batch limit.", ge=1, le=MAX_TOKENS, optional=True)

    @model_validator(mode="after")
    def _one_of(self) -> "Target":
        if self.min_tokens is not None:
            for key in ("tokens", "at_batch"):
                if getattr(self, key) is not None:
                    raise PlanRuleError(key, "give either min_tokens or tokens with at_batch, not both")
        elif self.tokens is None and self.at_batch is None:
            raise PlanRuleError("", "give tokens with at_batch, or min_tokens")
        elif self.tokens is None:
            raise PlanRuleError("at_batch", "at_batch needs tokens: the tokens that reach the target at it")
        elif self.at_batch is None:
            raise PlanRuleError("tokens", "tokens needs at_batch: the global batch they were counted at")
        return self


class NoiseSource(StrEnum):
    b_simple = "b_simple"
    sweep = "sweep"


class Noise(_Section):
    """Where the critical batch B_crit comes from, and how uncertain it is."""

    b_crit: float | None = Count("B_crit in tokens.", ge=1, le=MAX_BATCH, optional=True)
    kaplan_loss: float | None = _quantity(DIMENSIONLESS, "Loss (nats/token) at which to evaluate Kaplan et al. "
                                          "(2020) B_crit(L) = 2e8 / L^(1/0.21) tokens.", unit="nats", ge=MIN_LOSS,
                                          le=MAX_LOSS, optional=True)
    calibration: str | None = Field(None, description="A calibration file written by `budgetdsl "
                                    "calibrate`, relative to this plan.")
    at_loss: float | None = _quantity(DIMENSIONLESS, "Held-out loss at which to read the calibration's B_crit(L).",
                                      unit="nats", ge=MIN_LOSS, le=MAX_LOSS, optional=True)
    extrapolate: bool = Field(False, description="Allow at_loss outside the calibrated range.")
    source: NoiseSource = Field(NoiseSource.b_simple, strict=False, description="Which calibration measurement to "
                                "use: b_simple (gradient noise scale) or sweep (direct frontier fit).")
    uncertainty: float | None = Fraction("Relative uncertainty of B_crit, e.g. '30%'.", optional=True)

    @model_validator(mode="after")
    def _one_of(self) -> "Noise":
        given = [k for k in ("b_crit", "kaplan_loss", "calibration") if getattr(self, k) is not None]
        if len(given) != 1:
            where = given[1] if len(given) > 1 else ""
            said = f"; this plan gives {' and '.join(given)}" if given else ""
            raise PlanRuleError(where, "give exactly one of b_crit, kaplan_loss or calibration" + said)
        if self.calibration is not None and self.at_loss is None:
            raise PlanRuleError("calibration", "a calibration needs at_loss: the loss at which to read B_crit")
        if self.calibration is None:
            for key in ("at_loss",):
                if getattr(self, key) is not None:
                    raise PlanRuleError(key, f"{key} applies only with calibration")
        return self


# Stages of a batch-size ramp, given or 'auto': each is priced by bisections over the run's tokens
# (batch_ramp.stages_from_token_fractions), so their number is capped.
MAX_RAMP_STAGES = 64


class Stage(_Section):
    """One stage of a batch-size schedule: this global batch until this fraction of the run."""

    until: float = Fraction("End of the stage as a fraction of the run's tokens, e.g. '25%'; the last "
                            "stage ends at 100%.")
    batch: float = Count("Global batch in tokens during the stage.", ge=1, le=MAX_BATCH)
    b_noise: float | None = Count("Mean B_noise (tokens) over the stage, as `budgetdsl track --replan` "
                                  "extrapolates it: the stages are priced against it (all stages or none).",
                                  ge=1, le=MAX_BATCH, optional=True)


class Run(_Section):
    """A pinned configuration to evaluate instead of optimizing, or a batch-size schedule."""

    batch: float | None = Count("Global batch in tokens.", ge=1, le=MAX_BATCH, optional=True)
    micro_batch: int | Literal["auto"] | None = Integer(
        "Sequences per device per micro-step; auto (or omitted): the solver chooses.",
        gt=0, le=MAX_MICRO_BATCH, optional=True, auto=True)
    batch_schedule: Annotated[
        Annotated[Literal["auto"], Tag("auto")] | Annotated[list[Stage], Tag("stages")],
        Discriminator(lambda v: "stages" if isinstance(v, list) else "auto"),
    ] | None = Field(
        None, description="A batch-size ramp: 'auto' plans it from the calibration's "
        "B_noise trajectory (needs noise.calibration), or a list of stages {until, batch}.")
    ramp_stages: int = Integer("Stages of an 'auto' batch schedule.", gt=0, le=MAX_RAMP_STAGES, default=4)
    ramp_x: float = _quantity(DIMENSIONLESS, "The batch of an 'auto' schedule tracks ramp_x × B_noise.",
                              ge=1e-3, le=1e3, default=1.0)

    @model_validator(mode="after")
    def _stages(self) -> "Run":
        if isinstance(self.batch_schedule, list):
            if not self.batch_schedule:
                raise PlanRuleError("batch_schedule", "a batch schedule needs at least one stage")
            if len(self.batch_schedule) > MAX_RAMP_STAGES:  # each is placed by nested bisections
                raise PlanRuleError(f"batch_schedule.{MAX_RAMP_STAGES}",
                                    f"a batch schedule has at most {MAX_RAMP_STAGES} stages, this one "
                                    f"{len(self.batch_schedule)}; merge neighbouring stages")
            ends = [s.until for s in self.batch_schedule]
            for i in range(1, len(ends)):
                if ends[i] <= ends[i - 1]:
                    raise PlanRuleError(f"batch_schedule.{i}.until", "stages must end in increasing order")
            if abs(ends[-1] - 1.0) > 1e-12:
                raise PlanRuleError(f"batch_schedule.{len(ends) - 1}.until",
                                    "the last stage must end at 100% of the run")
            given = [s.b_noise is not None for s in self.batch_schedule]
            if any(given) and not all(given):
                i = given.index(not given[0])
                where = f"batch_schedule.{i}" + (".b_noise" if given[i] else "")
                raise PlanRuleError(where, "give b_noise on every stage or on none: the stages' B_noise is "
                                    "one trajectory over the run", "write each stage's mean B_noise "
                                    "(budgetdsl track --replan does), or remove b_noise from every stage")
        return self

    @property
    def stage_b_noise(self) -> bool:
        """The stages carry their B_noise (a trajectory the plan writes: budgetdsl track --replan)."""
        return isinstance(self.batch_schedule, list) and self.batch_schedule[0].b_noise is not None


class Optimizer(_Section):
    """The learning rate as tuned at one batch, rescaled by the exports to the chosen batch."""

    lr: float = _quantity(DIMENSIONLESS, "Peak learning rate tuned at `at_batch`.", ge=MIN_LR, le=MAX_LR)
    at_batch: float = Count("Global batch (tokens) at which lr was tuned.", ge=1, le=MAX_BATCH)
    scaling: LrScaling = Field(LrScaling.sqrt, strict=False, description="How lr follows the batch: linear "
                               "(Goyal et al. 2017), sqrt (usual for Adam), or none.")
    warmup_steps: int = Integer("Learning-rate warmup steps.", ge=0, le=MAX_STEPS, default=0)


class Plan(_Section):
    """A training-run plan: what the team has and what it must reach."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, title="budgetdsl plan")

    name: str = Field(description="Name of the run.", min_length=1, max_length=200)
    description: str | None = Field(None, description="Free text for reviewers.")
    extends: str | None = Field(None, description="A base plan this one inherits from (path "
                                "relative to this file); this file's keys win.")
    fragment: bool = Field(False, description="true marks a base fragment: a file that plans "
                           "extend, never planned alone. It needs none of the whole-plan keys, and "
                           "plans that extend it do not inherit the mark.")
    model: ModelShape = Field(description=ModelShape.__doc__)
    hardware: Hardware = Field(description=Hardware.__doc__)
    budget: Budget = Field(default_factory=Budget, description=Budget.__doc__)
    target: Target = Field(description=Target.__doc__)
    noise: Noise = Field(description=Noise.__doc__)
    run: Run | None = Field(None, description=Run.__doc__)
    objective: Objective = Field(Objective.balanced, strict=False, description="Which point of the feasible "
                                 "frontier to choose: balanced (B ≈ B_crit), min_time, min_flops, "
                                 "or min_cost.")
    optimizer: Optimizer | None = Field(None, description=Optimizer.__doc__)
    launch: Launch | None = Field(None, description="What exports need that the plan cannot "
                                  "infer: image, command, partition, account, env.")

    @field_validator("name")
    @classmethod
    def _visible_name(cls, name: str) -> str:
        # the name titles every report and names the exported jobs (Slurm, Kubernetes, SkyPilot)
        if not name.strip():
            raise PlanRuleError("", "the name is blank", "write a name a reviewer and a scheduler can show, "
                                "e.g. name: llama-7b-pretrain")
        return name

    @model_validator(mode="after")
    def _split(self) -> "Plan":
        if (self.run is not None and self.run.batch_schedule == "auto"
                and self.noise.calibration is None):
            raise PlanRuleError("run.batch_schedule", "batch_schedule: auto plans the ramp from a "
                                "calibration's B_noise trajectory; set noise.calibration",
                                "or give the stages: [{until: 25%, batch: 1M}, {until: 100%, batch: 4M}]")
        if self.run is not None and self.run.stage_b_noise and self.noise.calibration is not None:
            raise PlanRuleError("run.batch_schedule.0.b_noise", "the stages' b_noise and noise.calibration "
                                "each give a B_noise trajectory; a plan follows one",
                                "remove b_noise from the stages, or replace noise.calibration by noise.b_crit")
        hw, m = self.hardware, self.model
        if m.heads is not None and m.heads % _degree(hw.tensor_parallel):
            raise PlanRuleError("hardware.tensor_parallel", f"heads ({m.heads}) must be divisible by "
                                f"tensor_parallel ({hw.tensor_parallel})")
        if m.kv_heads is not None and m.kv_heads % _degree(hw.tensor_parallel):
            raise PlanRuleError("hardware.tensor_parallel", f"kv_heads ({m.kv_heads}) must be divisible by "
                                f"tensor_parallel ({hw.tensor_parallel}): Megatron splits the key/value "
                                "heads over the tensor-parallel ranks too",
                                f"e.g. tensor_parallel: {math.gcd(m.kv_heads, _degree(hw.tensor_parallel))}, "
                                "or auto")
        _expert_rules(m, hw)
        _context_rules(m, hw)
        # Uneven stages are allowed (BLOOM: 70 layers on 12 stages; Llama 3 405B: 126 on 16): the
        # cost model balances them with the LM head on the last (budgetdsl.hardware.layout.stage_layers).
        chunks = _degree(hw.pipeline_parallel) * _degree(hw.virtual_pipeline_stages)
        if m.layers is not None and accounted_slots(m.layers, *hw.split_slots()) < chunks:
            raise PlanRuleError("hardware.pipeline_parallel", f"layers ({m.layers}"
                                + (" + the accounted embedding/loss" if any(hw.split_slots()) else "")
                                + f") cannot fill pipeline_parallel × virtual_pipeline_stages = {chunks} stages")
        _split_rules(m, hw)
        _recompute_rules(m, hw)
        return self


def chunk_layers(layers: int, hw: Hardware) -> int:
    """The most transformer layers one interleaved chunk of a stage holds: what block recomputation's
    `recompute_layers` may reach (a searched pipeline counted as 1 stage, searched v as 1)."""
    p, v = _degree(hw.pipeline_parallel), _degree(hw.virtual_pipeline_stages)
    if hw.stage_layers is not None and len(hw.stage_layers) == p:
        return max(hw.stage_layers) // v
    return -(-accounted_slots(layers, *hw.split_slots()) // (p * v))


def _recompute_rules(m: ModelShape, hw: Hardware) -> None:
    """`recompute_layers` picks how many layers of each stage (chunk) full recomputation recomputes
    (Megatron-LM's block method): it needs recompute full (or auto), and at most a chunk's layers."""
    n = hw.recompute_layers
    if n is None:
        return
    if hw.recompute in (Recompute.none, Recompute.selective):
        raise PlanRuleError("hardware.recompute_layers", f"recompute_layers ({n}) counts the layers of each "
                            f"pipeline stage that full recomputation recomputes (Megatron-LM's block method), "
                            f"and this plan sets recompute: {hw.recompute}",
                            "write recompute: full (or auto) beside it, or remove recompute_layers")
    if n == "auto" or m.layers is None:
        return
    most = chunk_layers(m.layers, hw)
    if n > most:
        where = (f"{m.layers} layers over pipeline_parallel × virtual_pipeline_stages = "
                 f"{_degree(hw.pipeline_parallel) * _degree(hw.virtual_pipeline_stages)} chunks"
                 if hw.stage_layers is None else f"stage_layers {list(hw.stage_layers)}")
        raise PlanRuleError("hardware.recompute_layers", f"recompute_layers ({n}) is above the {most} layers of "
                            f"a pipeline stage's chunk ({where}): Megatron recomputes the first N layers of "
                            "each chunk", f"at most recompute_layers: {most}; leave it out to recompute every layer")


def _split_rules(m: ModelShape, hw: Hardware) -> None:
    """A pinned split (`hardware.stage_layers`) needs a pinned pipeline and follows Megatron-Core's
    uneven-pipeline rules (`budgetdsl.hardware.layout.split_problem`), each error at its entry."""
    split, v = hw.stage_layers, hw.virtual_pipeline_stages
    if any(hw.split_slots()):
        _accounted_rules(m, hw)
        return
    if split is None:
        if v != "auto" and v > 1 and m.layers is not None and m.layers % v:
            fits = [k for k in range(v - 1, 0, -1) if m.layers % k == 0]
            raise PlanRuleError("hardware.virtual_pipeline_stages", f"virtual_pipeline_stages ({v}) does not "
                                f"divide the {m.layers} layers: each of a GPU's {v} interleaved chunks holds the same "
                                "layers, so every stage's layers are a multiple of it (Megatron-Core)",
                                f"e.g. virtual_pipeline_stages: {fits[0]}, or auto")
        return
    if hw.pipeline_parallel == "auto":
        raise PlanRuleError("hardware.stage_layers", "stage_layers pins the split of a pinned pipeline, and "
                            "pipeline_parallel is searched (auto)", f"write pipeline_parallel: {len(split)}, "
                            "or leave stage_layers out")
    p, v = int(hw.pipeline_parallel), _degree(hw.virtual_pipeline_stages)  # auto: the search picks v dividing it
    problem = split_problem(split, m.layers, p, v)
    if problem is not None:
        index, why = problem
        at = "hardware.stage_layers" + ("" if index is None else f".{index}")
        layers = m.layers if m.layers is not None else sum(split)
        raise PlanRuleError(at, f"stage_layers {list(split)}: {why}", split_hint(layers, p, v))


def _accounted_rules(m: ModelShape, hw: Hardware) -> None:
    """The embedding and/or the loss counted as layers in the pipeline split (Megatron-Core's
    --account-for-embedding/loss-in-pipeline-split): the split is then Megatron-Core's own, so no
    stage_layers beside it (TransformerConfig refuses both), and the slots L + e + l divide into the
    pinned stages and the slots per stage into the pinned chunks (`layout.accounted_problem`)."""
    embedding, loss = hw.split_slots()
    key = "hardware." + SPLIT_SLOTS[0 if embedding else 1][0]
    if hw.stage_layers is not None:
        raise PlanRuleError("hardware.stage_layers", f"stage_layers pins the split, and {key.split('.')[1]} "
                            "asks Megatron-Core to make it (it refuses --decoder-first/last-pipeline-num-layers "
                            "beside --account-for-embedding/loss-in-pipeline-split)",
                            "leave stage_layers out: the first and the last stage then hold one layer fewer")
    if m.layers is None:
        return
    v = hw.virtual_pipeline_stages
    slots = accounted_slots(m.layers, embedding, loss)
    if hw.pipeline_parallel == "auto":
        if v != "auto" and v > 1 and slots % v:
            fits = [k for k in range(v - 1, 0, -1) if slots % k == 0]
            raise PlanRuleError("hardware.virtual_pipeline_stages", f"virtual_pipeline_stages ({v}) does not "
                                f"divide the {slots} slots of the split ({m.layers} layers + the accounted "
                                "embedding/loss): every chunk holds the same slots (Megatron-Core)",
                                f"e.g. virtual_pipeline_stages: {fits[0]}, or auto")
        return
    p = int(hw.pipeline_parallel)
    problem = accounted_problem(m.layers, p, _degree(v), embedding, loss)
    if problem is None:
        return
    at = "hardware.virtual_pipeline_stages" if slots % p == 0 and (slots // p) % _degree(v) else key
    raise PlanRuleError(at, problem, accounted_hint(m.layers, p, _degree(v), embedding, loss))


def _expert_rules(m: ModelShape, hw: Hardware) -> None:
    """Expert parallelism needs routed experts, and ep must divide them: each EP rank holds E/ep
    whole experts (Megatron-Core asserts num_experts % expert_model_parallel_size == 0)."""
    ep = hw.expert_parallel
    if not m.experts:
        for key, plain in (("expert_dispatch", "alltoall"), ("expert_overlap", False)):
            value = getattr(hw, key)
            if value != plain:
                shown = str(value).lower() if isinstance(value, bool) else value  # as the plan wrote it
                raise PlanRuleError(f"hardware.{key}", f"{key} ({shown}) moves the routed tokens of a "
                                    "mixture-of-experts model, and this model has none",
                                    "set model.experts and model.experts_per_token, or remove " + key)
        for key in ("expert_parallel", "expert_tensor_parallel"):
            value = getattr(hw, key)
            if value not in (None, 1, "auto"):  # auto on a dense model searches ep = 1 only
                raise PlanRuleError(f"hardware.{key}", f"{key} ({value}) splits the routed experts of a "
                                    "mixture-of-experts model, and this model has none",
                                    "set model.experts and model.experts_per_token, or remove " + key)
        return
    if ep != "auto" and m.experts % ep:
        divisors = [k for k in range(1, min(m.experts, MAX_EXPERTS) + 1) if m.experts % k == 0]
        near = min(divisors, key=lambda k: (abs(k - ep), k))
        raise PlanRuleError("hardware.expert_parallel", f"expert_parallel ({ep}) must divide model.experts "
                            f"({m.experts}): each expert-parallel rank holds experts / ep whole experts",
                            f"e.g. expert_parallel: {near}")
    hw._expert_groups("hardware.")


def _context_rules(m: ModelShape, hw: Hardware) -> None:
    """Context parallelism splits each sequence into 2·cp chunks, rank i taking chunks i and
    2·cp − 1 − i so that every rank does the same causal-attention work (Megatron-Core's
    load-balanced ring attention, get_batch_on_this_cp_rank): seq_len must be a multiple of 2·cp."""
    cp = hw.context_parallel
    if cp == "auto":  # the search tries the degrees that split seq_len (budgetdsl.solve.layout_search)
        return
    if cp > 1 and not hw.flash_attention:
        raise PlanRuleError("hardware.context_parallel", f"context_parallel ({cp}) runs ring attention in fused "
                            "attention kernels (Megatron-Core's CP goes through Transformer Engine's flash/fused "
                            "attention), and this plan sets flash_attention: false",
                            "set flash_attention: true, or context_parallel: 1")
    if cp > 1 and m.seq_len % (2 * cp):
        fits = [c for c in range(cp, 0, -1) if m.seq_len % (2 * c) == 0]
        hint = f"e.g. context_parallel: {fits[0]}" if fits else "context parallelism needs an even seq_len"
        raise PlanRuleError("hardware.context_parallel", f"context_parallel ({cp}) must split seq_len "
                            f"({m.seq_len}) into 2 × cp = {2 * cp} equal chunks (load-balanced causal ring "
                            "attention, as Megatron-Core splits it)", hint)
