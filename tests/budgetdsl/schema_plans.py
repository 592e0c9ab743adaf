"""Plans generated from the project's own JSON Schema (hypothesis-jsonschema), mostly valid.

An outside mutation fuzzer gets few mutants past the loader (issue 23); these plans reach the
solver, the reports and the exports. The schema is adapted before `from_schema`: each quantity's
number keeps the schema's form but draws in a plausible range, and its string is a value with a
unit of the plan language (docs/plan-language.md) drawn log-uniformly in the same range. Rules the
schema cannot state (d_model divisible by heads, kv_heads dividing heads and split by t, vocab × d_model
< params, params given or a shape that counts it, fp8 on an FP8 part, GPUs that split into t × p
groups and fill nodes, target's and noise's one-of, usd with its price, ordered ramp stages with
b_noise on all or none) are then made to hold. Files (extends, calibration) are left out: the plan's text is given.
Objects are walked here (fixed_dictionaries over the schema's properties, optional keys left out at
random) and every other node goes to `from_schema`: hypothesis-jsonschema 0.23.1's own object
strategy calls a Hypothesis internal (`many.more`) that Hypothesis 6.170 no longer has.
Used by tests/budgetdsl/test_schema_fuzz.py and bench/bench_schema_fuzz.py.
"""

from __future__ import annotations

import copy
import json
import math
import pathlib

import yaml
from fuzz_mutations import NonFinite, run_pipeline
from hypothesis import strategies as st
from hypothesis_jsonschema import from_schema
from test_solver_properties import _check_feasible_answer, check_limits

from budgetdsl.plan.loader import load_plan
from budgetdsl.solve.solver import solve

REPO = pathlib.Path(__file__).resolve().parents[2]
SCHEMA = json.loads((REPO / "budgetdsl.schema.json").read_text())
PRESETS = ["A100-SXM4-40GB", "A100-SXM4-80GB", "H100-SXM5-80GB", "H200-SXM-141GB", "B200-SXM-180GB",
           "H800-SXM5-80GB", "MI300X", "L40S", "V100-SXM2-32GB", "TPU-v5p"]
FP8_PRESETS = {"H100-SXM5-80GB", "H200-SXM-141GB", "B200-SXM-180GB", "H800-SXM5-80GB"}  # hardware.precision: fp8
DAY = 86400.0

# section.key -> (low, high, kind): the plausible magnitudes of a quantity, in its base unit.
RANGES: dict[str, tuple[float, float, str]] = {
    "ModelShape.params": (1e7, 1e12, "count"),
    "ModelShape.layers": (1, 128, "int"),
    "ModelShape.d_model": (64, 16384, "int"),
    "ModelShape.heads": (1, 128, "int"),
    "ModelShape.kv_heads": (1, 128, "int"),
    "ModelShape.ffn_hidden": (64, 65536, "int"),
    "ModelShape.seq_len": (128, 32768, "int"),
    "ModelShape.vocab": (256, 256000, "int"),
    "ModelShape.flops_per_token": (1e8, 1e13, "flop"),
    "ModelShape.activation_bytes_per_token": (1e4, 1e8, "bytes"),
    "ModelShape.experts": (1, 64, "int"),
    "ModelShape.experts_per_token": (1, 8, "int"),
    "ModelShape.expert_ffn_hidden": (64, 16384, "int"),
    "ModelShape.shared_experts": (0, 2, "int"),
    "ModelShape.dense_layers": (0, 4, "int"),
    "ModelShape.capacity_factor": (1, 2, "count"),
    "ModelShape.expert_groups": (1, 16, "int"),
    "ModelShape.expert_groups_per_token": (1, 8, "int"),
    "ModelShape.q_lora_rank": (16, 2048, "int"),
    "ModelShape.kv_lora_rank": (16, 1024, "int"),
    "ModelShape.qk_nope_head_dim": (16, 256, "int"),
    "ModelShape.qk_rope_head_dim": (8, 128, "int"),
    "ModelShape.v_head_dim": (16, 256, "int"),
    "ModelShape.dropout": (0, 0.5, "fraction"),
    "Hardware.gpus_per_node": (1, 16, "int"),
    "Hardware.memory_per_device": (8 * 2**30, 192 * 2**30, "bytes"),
    "Hardware.peak_flops": (1e13, 5e15, "flop/s"),
    "Hardware.memory_reserve": (0, 8 * 2**30, "bytes"),
    "Hardware.mfu": (0.05, 0.8, "fraction"),
    "Hardware.network": (1e9, 1e12, "bytes/s"),
    "Hardware.intra_node_network": (1e10, 2e12, "bytes/s"),
    "Hardware.hbm_bandwidth": (1e11, 1e13, "bytes/s"),
    "Hardware.overlap": (0, 1, "fraction"),
    "Hardware.step_overhead": (0, 1, "s"),
    "Hardware.virtual_pipeline_stages": (1, 4, "int"),
    "Hardware.recompute_layers": (1, 8, "int"),
    "Hardware.kernel_efficiency": (0.1, 1, "fraction"),
    "Budget.deadline": (3600, 365 * DAY, "s"),
    "Budget.flops": (1e18, 1e26, "flop"),
    "Budget.gpu_hours": (10, 1e8, "count"),
    "Budget.usd": (100, 1e9, "count"),
    "Budget.usd_per_gpu_hour": (0.5, 10, "count"),
    "Target.tokens": (1e8, 1e13, "count"),
    "Target.at_batch": (1e4, 1e8, "count"),
    "Target.min_tokens": (1e8, 1e13, "count"),
    "Noise.b_crit": (1e4, 1e8, "count"),
    "Noise.kaplan_loss": (1.5, 4.0, "count"),
    "Noise.uncertainty": (0.01, 0.9, "fraction"),
    "Run.batch": (1e4, 1e8, "count"),
    "Run.micro_batch": (1, 64, "int"),
    "Run.ramp_stages": (1, 8, "int"),
    "Run.ramp_x": (0.1, 10, "count"),
    "Stage.until": (0.05, 1, "fraction"),
    "Stage.batch": (1e4, 1e8, "count"),
    "Stage.b_noise": (1e4, 1e8, "count"),
    "Optimizer.lr": (1e-5, 1e-2, "count"),
    "Optimizer.at_batch": (1e4, 1e8, "count"),
    "Optimizer.warmup_steps": (0, 10000, "int"),
}
# The layout and GPU count: integers (or auto) whose products the fix-ups below need to read.
DEGREES = {"type": "integer", "enum": [1, 1, 2, 4, 8]}
NUMBER_ONLY = {"Hardware.tensor_parallel": {"anyOf": [DEGREES, {"const": "auto"}]},
               "Hardware.context_parallel": {"type": "integer", "enum": [1, 1, 1, 2, 4]},
               "Hardware.expert_parallel": {"type": "integer", "enum": [1, 1, 2, 4, 8]},
               "Hardware.expert_tensor_parallel": {"anyOf": [{"type": "integer", "enum": [1, 2]}, {"type": "null"}]},
               "Hardware.pipeline_parallel": {"anyOf": [DEGREES, {"const": "auto"}]},
               "Hardware.gpus_per_node": {"type": "integer", "enum": [1, 2, 4, 8, 8, 8, 16]},
               "Hardware.gpus": {"anyOf": [{"type": "integer", "minimum": 1, "maximum": 4096},
                                           {"$ref": "#/$defs/GpuRange"}]},
               "GpuRange.min": {"type": "integer", "minimum": 1, "maximum": 512},
               "GpuRange.max": {"type": "integer", "minimum": 1, "maximum": 1024},
               "GpuRange.step": {"type": "integer", "minimum": 1, "maximum": 64},
               "Hardware.gpu": {"enum": PRESETS + PRESETS + [None]},
               # a pinned split must match the layout drawn (test_stage_layers checks the rules)
               "Hardware.stage_layers": {"type": "null"},
               "Launch.image": {"type": "string",
                                "pattern": r"^[a-z][a-z0-9]{0,9}(/[a-z0-9]{1,9})?(:[a-z0-9.]{1,6})?$"},
               "Launch.partition": {"type": "string", "pattern": r"^[a-z][a-z0-9-]{0,14}[a-z0-9]$"},
               "Launch.account": {"type": "string", "pattern": r"^[a-z][a-z0-9_]{0,15}$"},
               "Launch.namespace": {"type": "string", "pattern": r"^[a-z][a-z0-9-]{0,14}[a-z0-9]$"},
               "Launch.runtime": {"type": "string", "pattern": r"^[a-z][a-z0-9-]{0,14}[a-z0-9]$"},
               "Launch.accelerator": {"type": "string", "pattern": r"^[a-z][a-z0-9-]{0,14}[a-z0-9]$"},
               "Launch.gpu_resource": {"type": "string", "pattern": r"^[a-z]{1,8}\.com/[a-z]{1,8}$"},
               "Launch.output_dir": {"type": "string", "pattern": r"^/[a-z0-9_]{1,12}(/[a-z0-9_]{1,12}){0,2}$"},
               "Launch.command": {"type": "array", "minItems": 1, "maxItems": 4,
                                  "items": {"type": "string", "pattern": r"^[a-z][a-z0-9_.=-]{0,15}$"}},
               "Launch.env": {"type": "object", "propertyNames": {"pattern": r"^[A-Z][A-Z0-9_]{0,10}$"},
                              "additionalProperties": {"type": "string", "maxLength": 40}},
               "Run.batch_schedule": {"anyOf": [{"type": "array", "items": {"$ref": "#/$defs/Stage"},
                                                 "minItems": 1, "maxItems": 4}, {"type": "null"}]}}


def _count(x: float) -> st.SearchStrategy[str]:
    forms = [f"{x:.4g}", f"{x / 1e3:.4g}k", f"{x / 1e6:.4g}M", f"{x / 1e9:.4g}B", f"{x / 2**20:.4g}Mi"]
    return st.sampled_from(forms)


UNIT_FORMS = {
    "count": _count,
    "int": lambda x: st.sampled_from([str(round(x)), f"{round(x)} * 1"]),
    "flop": lambda x: st.sampled_from([f"{x:.4g}", f"{x / 1e21:.4g} ZFLOP", f"{x / 1e12:.4g} TFLOP"]),
    "flop/s": lambda x: st.sampled_from([f"{x:.4g}", f"{x / 1e12:.4g} TFLOP/s", f"{x / 1e12:.4g} TFLOPS"]),
    "bytes": lambda x: st.sampled_from([f"{x:.4g}", f"{x / 2**30:.4g} GiB", f"{x / 1e9:.4g} GB"]),
    "bytes/s": lambda x: st.sampled_from([f"{x * 8 / 1e9:.4g} Gb/s", f"{x / 1e9:.4g} GB/s",
                                          f"{x * 8 / 1e9:.4g} Gbps"]),
    "s": lambda x: st.sampled_from([f"{x:.4g} s", f"{x / 3600:.4g}h", f"{x / DAY:.4g} days",
                                    f"{x / 60:.4g} min"]),
    "fraction": lambda x: st.sampled_from([f"{x:.4g}", f"{x * 100:.4g}%"]),
}


def _magnitude(low: float, high: float, kind: str) -> st.SearchStrategy[float]:
    if kind in ("fraction",) or low <= 0:
        return st.floats(low, high)
    return st.floats(math.log(low), math.log(high)).map(lambda e: min(max(math.exp(e), low), high))


def quantity_formats() -> dict[str, st.SearchStrategy[str]]:
    """custom_formats for from_schema: one string form per quantity, a value with a unit."""
    return {f"q:{key}": _magnitude(lo, hi, kind).flatmap(UNIT_FORMS[kind])
            for key, (lo, hi, kind) in RANGES.items()}


def _adapt_property(section: str, key: str, prop: dict) -> dict:
    name = f"{section}.{key}"
    if name in NUMBER_ONLY:
        return {**NUMBER_ONLY[name]}
    if name not in RANGES:
        return prop
    lo, hi, kind = RANGES[name]
    number = {"type": "integer" if kind == "int" else "number", "minimum": lo, "maximum": hi}
    if kind == "int":
        number = {"type": "integer", "minimum": math.ceil(lo), "maximum": math.floor(hi)}
    return {"anyOf": [number, {"type": "string", "format": f"q:{name}"}]}


def plan_schema() -> dict:
    """The plan's schema with quantities in plausible ranges, no files and whole plans only."""
    schema = copy.deepcopy(SCHEMA)
    defs = schema["$defs"]
    for section, body in defs.items():
        for key, prop in list(body.get("properties", {}).items()):
            body["properties"][key] = _adapt_property(section.removeprefix("Partial"), key, prop)
    noise = defs["Noise"]["properties"]
    for key in ("calibration", "at_loss", "extrapolate", "source"):  # a calibration is a file
        del noise[key]
    root = schema["properties"]
    del root["extends"], root["fragment"]
    root["model"] = {"$ref": "#/$defs/ModelShape"}
    root["hardware"] = {"$ref": "#/$defs/Hardware"}
    root["optimizer"] = {"anyOf": [{"$ref": "#/$defs/Optimizer"}, {"type": "null"}]}
    root["name"] = {"type": "string", "pattern": r"^[a-z][a-z0-9-]{0,30}[a-z0-9]$"}
    defs["ModelShape"]["required"] = ["seq_len", "layers", "heads", "d_model"]  # params: given, or counted
    defs["Hardware"]["required"] = ["gpus", "gpu"]  # the throughput model needs a preset or an mfu
    schema.pop("if"), schema.pop("else")
    schema["required"] = ["name", "model", "hardware", "target", "noise"]
    return schema


def _number(value) -> float | None:
    """The value of a quantity this module wrote (a number or one of UNIT_FORMS' count forms)."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int | float):
        return float(value)
    text = value.replace(" * 1", "")
    for suffix, scale in ((" ZFLOP", 1e21), (" TFLOP", 1e12), ("Mi", 2**20), ("k", 1e3), ("M", 1e6), ("B", 1e9)):
        if text.endswith(suffix):
            return float(text[: -len(suffix)]) * scale
    return float(text)


def _fix_shape(model: dict, tp: int) -> None:
    params, layers = _number(model.get("params")), _number(model.get("layers"))
    if params is not None and layers is not None and model.get("d_model") is not None:
        model["d_model"] = max(64, round(math.sqrt(params / (12 * layers))))  # N ≈ 12·L·d² (Kaplan 2020)
    heads = model.get("heads")
    if heads is not None:
        heads = _number(heads)
        model["heads"] = heads = max(tp, math.ceil(heads / tp) * tp)
        d_model = _number(model.get("d_model")) or heads * 64
        model["d_model"] = d_model = max(1, math.ceil(d_model / heads)) * heads
        if model.get("kv_heads") is not None:  # a divisor of heads that tensor parallelism splits
            kv = math.gcd(int(_number(model["kv_heads"])), int(heads))
            model["kv_heads"] = kv if kv % tp == 0 else int(heads)
    else:
        model.pop("kv_heads", None)
    if params is None and model.get("vocab") is None and model.get("layers") is not None \
            and int(_number(model["layers"])) % 2 == 0:
        model["vocab"] = 32000  # half of these count params from the shape, the others declare it
    if params is None and (model.get("vocab") is None or model.get("layers") is None):
        model["params"] = params = 1e9  # the shape cannot count it
    d_model, vocab = _number(model.get("d_model")), _number(model.get("vocab"))
    matrices = 1 if model.get("tied_embeddings", True) else 2
    if params is not None and d_model is not None and vocab is not None and matrices * vocab * d_model >= params:
        del model["vocab"]
        vocab = None
    fpt = _number(model.get("flops_per_token"))
    if fpt is not None and d_model is not None and vocab is not None and 6 * vocab * d_model >= fpt:
        del model["flops_per_token"]


MLA_KEYS = ("q_lora_rank", "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim")


def _fix_latent_attention(model: dict) -> None:
    """Multi-latent attention's keys: only with attention: mla, which needs the four dimensions and
    no kv_heads; the latents' ranks at most d_model, the RoPE width even."""
    if model.get("attention") is None and any(model.get(key) is not None for key in MLA_KEYS):
        model["attention"] = "mla"  # a drawn dimension asks for the attention it describes
    if model.get("attention") != "mla":
        for key in MLA_KEYS:
            model.pop(key, None)
        return
    model.pop("kv_heads", None)
    d_model = int(_number(model["d_model"]))
    for key, default in (("kv_lora_rank", 512), ("qk_nope_head_dim", 128), ("qk_rope_head_dim", 64),
                         ("v_head_dim", 128)):
        model.setdefault(key, default)
    for key in ("q_lora_rank", "kv_lora_rank"):
        if model.get(key) is not None:
            model[key] = min(int(_number(model[key])), d_model)
    rope = int(_number(model["qk_rope_head_dim"]))
    model["qk_rope_head_dim"] = rope + rope % 2


def _fix_experts(model: dict, hw: dict) -> None:
    """The mixture-of-experts keys: all need experts; top-k ≤ E; ep divides E; dense layers fewer
    than layers; the routed experts fewer than a declared params; group-limited routing's groups
    dividing E and holding k experts."""
    keys = ("experts_per_token", "expert_ffn_hidden", "shared_experts", "dense_layers", "capacity_factor",
            "expert_groups", "expert_groups_per_token")
    experts = model.get("experts")
    if experts is None:
        for key in keys:
            model.pop(key, None)
        for key in ("expert_parallel", "expert_tensor_parallel", "expert_dispatch", "expert_overlap"):
            hw.pop(key, None)
        return
    # ep divides E: E rounds up to a multiple of the drawn ep (shrinking ep to gcd(ep, E) instead
    # made ep > 1 rare — odd E drawn half the time — and the fuzzer's reach of it a matter of luck)
    ep = hw.get("expert_parallel", 1)
    experts = -(-int(_number(experts)) // ep) * ep
    model["experts"] = experts
    model["experts_per_token"] = k = min(experts, int(_number(model.get("experts_per_token", 2))))
    if model.get("expert_groups") is None and model.get("expert_groups_per_token") is None:
        pass
    else:  # G a divisor of E, g ≤ G, the g groups holding at least k experts
        groups = math.gcd(int(_number(model.get("expert_groups") or 4)), experts)
        per = experts // groups
        g = min(groups, max(int(_number(model.get("expert_groups_per_token") or 1)), -(-k // per)))
        model["expert_groups"], model["expert_groups_per_token"] = groups, g
    layers = int(_number(model["layers"]))
    if model.get("dense_layers") is not None:
        model["dense_layers"] = min(int(_number(model["dense_layers"])), layers - 1)
    params = _number(model.get("params"))
    if params is not None:  # the routed experts alone must be fewer than params
        d = _number(model["d_model"])
        width = _number(model.get("expert_ffn_hidden") or model.get("ffn_hidden")) or 4 * d
        routed = layers * experts * 3 * d * width
        if routed >= params:
            model["params"] = params = 2 * routed + 2 * d * (_number(model.get("vocab")) or 0)


def _fix_gpus(hw: dict, split: int) -> None:
    per_node = hw.get("gpus_per_node", 8)
    unit = split * per_node // math.gcd(split, per_node)
    gpus = hw["gpus"]
    if isinstance(gpus, dict):
        low = max(1, gpus.get("min", 1) // split) * split
        step = max(1, gpus.get("step", 1) // split) * split
        hw["gpus"] = {"min": low, "max": low + step * min(16, gpus["max"] // step), "step": step}
    elif gpus > per_node:
        hw["gpus"] = max(1, gpus // unit) * unit
    else:
        hw["gpus"] = max(1, gpus // split) * split
        if hw["gpus"] > per_node and hw["gpus"] % per_node:
            hw["gpus"] = unit


def make_valid(doc: dict) -> dict:
    """The cross-field rules of budgetdsl/plan/model.py made to hold on a schema-valid plan."""
    hw, model = doc["hardware"], doc["model"]
    tp = hw.get("tensor_parallel", 1)
    pp = hw.get("pipeline_parallel", 1)
    tp, pp = (1 if tp == "auto" else tp), (1 if pp == "auto" else pp)
    _fix_shape(model, tp)
    _fix_latent_attention(model)
    _fix_experts(model, hw)
    cp = hw.get("context_parallel", 1)
    if cp > 1 and hw.get("flash_attention", True) is False:
        hw["context_parallel"] = cp = 1
    if cp > 1:  # 2·cp chunks of a sequence (load-balanced ring attention)
        model["seq_len"] = int(math.ceil(_number(model["seq_len"]) / (2 * cp)) * 2 * cp)
    ep, etp = hw.get("expert_parallel", 1), hw.get("expert_tensor_parallel")
    group = (etp or tp) * ep if (etp is not None or ep > 1) else 1
    _fix_gpus(hw, math.lcm(tp * pp * cp, pp * group))
    chunks = pp * _number(hw.get("virtual_pipeline_stages", 1))
    for key in ("embedding_in_pipeline_split", "loss_in_pipeline_split"):  # an uneven split, as below
        hw.pop(key, None)  # (tests/budgetdsl/test_pipeline_split_accounting.py checks its rules)
    if model.get("layers") is not None:  # whole layers per stage: the exports refuse uneven stages
        model["layers"] = int(math.ceil(_number(model["layers"]) / chunks) * chunks)
    if hw.get("precision") == "fp8" and hw.get("gpu") not in FP8_PRESETS:
        if hw.get("gpu") is None or hw["gpu"].startswith("TPU"):
            hw["precision"] = "bf16"
        else:  # keep the FP8 plan: its GPU becomes an FP8 part
            hw["gpu"] = "H100-SXM5-80GB"
    if hw.get("gpu") is None:
        hw.setdefault("peak_flops", "312 TFLOP/s")
        hw.setdefault("memory_per_device", "80 GiB")
        hw.setdefault("mfu", 0.4)
    if not doc["name"].strip():
        doc["name"] = "p" + doc["name"]
    budget = doc.get("budget") or {}
    if budget.get("usd") is not None and budget.get("usd_per_gpu_hour") is None:
        budget["usd_per_gpu_hour"] = 2.0
    target = doc["target"]
    if target.get("min_tokens") is not None:
        target.pop("tokens", None), target.pop("at_batch", None)
    elif target.get("tokens") is None or target.get("at_batch") is None:
        target.update(tokens=target.get("tokens") or "20 * model.params", at_batch=target.get("at_batch") or "4M")
    noise = doc["noise"]
    if noise.get("b_crit") is not None:
        noise.pop("kaplan_loss", None)
    elif noise.get("kaplan_loss") is None:
        noise["b_crit"] = "2M"
    run = doc.get("run") or {}
    if run.get("batch") is not None:  # whole sequences
        run["batch"] = f"{max(1, round(_number(run['batch']) / _number(model['seq_len'])))} * model.seq_len"
    if isinstance(run.get("batch_schedule"), list):
        stages = run["batch_schedule"]
        for i, stage in enumerate(stages):
            stage["until"] = f"{100 * (i + 1) / len(stages):.6g}%"
        if not all("b_noise" in stage for stage in stages):  # on every stage or on none
            for stage in stages:
                stage.pop("b_noise", None)
    return doc


def _strategy(node: dict, defs: dict, formats: dict) -> st.SearchStrategy:
    """Values of one schema node: objects and their unions walked here, leaves by from_schema."""
    if "$ref" in node:
        return st.deferred(lambda: _strategy(defs[node["$ref"].rsplit("/", 1)[-1]], defs, formats))
    if "anyOf" in node or "oneOf" in node:
        return st.one_of([_strategy(n, defs, formats) for n in node.get("anyOf") or node["oneOf"]])
    if node.get("type") == "array" and "$ref" in node.get("items", {}):
        return st.lists(_strategy(node["items"], defs, formats), min_size=node.get("minItems", 0),
                        max_size=node.get("maxItems", 4))
    if node.get("type") == "object" and "properties" in node:
        props = node["properties"]
        required = set(node.get("required", ()))
        return st.fixed_dictionaries(
            {k: _strategy(v, defs, formats) for k, v in props.items() if k in required},
            optional={k: _strategy(v, defs, formats) for k, v in props.items() if k not in required})
    if node.get("type") == "object" and isinstance(node.get("additionalProperties"), dict):
        keys = from_schema({"type": "string", **node.get("propertyNames", {})})
        return st.dictionaries(keys, from_schema(node["additionalProperties"]), max_size=4)
    return from_schema(node, custom_formats=formats)


def plans() -> st.SearchStrategy[dict]:
    """Schema-valid plan documents made to pass the cross-field rules."""
    schema = plan_schema()
    return _strategy(schema, schema["$defs"], quantity_formats()).map(make_valid)


# -- one plan through the front door ----------------------------------------------------------------

def _no_constant(name: str):
    raise ValueError(f"non-finite JSON constant {name}")


def cli(argv: list[str]) -> tuple[int, str]:
    """budgetdsl.cli.main(argv): exit code and stdout."""
    import contextlib
    import io

    from budgetdsl.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    assert code != 3, f"internal error: {err.getvalue()[-2000:]}"
    return code, out.getvalue()


def check_plan(doc: dict, path: pathlib.Path, export_format: str | None = None) -> str:
    """The plan, written as YAML to `path`, through the loader, solver, text/JSON/Markdown and every
    export (fuzz_mutations.run_pipeline), then `budgetdsl plan --format json` and one `budgetdsl
    export` through the CLI entry. Returns run_pipeline's outcome; raises on any finding: an
    exception other than PlanError/ExportError, exit code 3, non-finite JSON, a limit broken."""
    text = yaml.safe_dump(doc, sort_keys=False, allow_unicode=True)
    path.write_text(text, encoding="utf-8")
    outcome = run_pipeline(text, path)
    code, out = cli(["plan", str(path), "--format", "json"])
    assert code == {"invalid": 2, "unsolvable": 2, "infeasible": 1}.get(outcome, 0), (outcome, code)
    if code != 2:
        try:
            json.loads(out, parse_constant=_no_constant)
        except ValueError as exc:
            raise NonFinite(f"plan --format json: {exc}") from None
    if outcome in ("exported", "not-exportable"):
        plan = load_plan(path, text=text)
        sol = solve(plan)
        pinned = not plan.hardware.searched()  # else searched (LAYOUT_KEYS and the parallel keys)
        (_check_feasible_answer if pinned and plan.run is None else check_limits)(plan, sol)
    if export_format is not None:
        code, _ = cli(["export", str(path), "--to", export_format])
        assert code in (0, 1, 2), code
    return outcome
