"""The model's shape (issue 24, item 1), FP8 GEMMs (item 3) and the newer presets: parameters counted
from the shape against published counts, FLOPs per token against Megatron's closed form,
activation memory against Korthikanti et al. (2022)'s itemisation generalised to GQA and SwiGLU,
FP8's share of the step and its memory, and each new key's located error."""

import json
import pathlib

import pytest
from plan_rules import assert_refused_located, write
from solver_plans import make_plan

from budgetdsl.cost.cost_model import Split, build_cost_model
from budgetdsl.cost.gemm_shape import gemm_time, sharded_matmuls
from budgetdsl.cost.memory import FP8_WEIGHT_BYTES, activation_bytes_per_layer, stage_memory
from budgetdsl.hardware.gpus import GB, PRESETS
from budgetdsl.plan.loader import load_plan
from budgetdsl.plan.model import transformer_params
from budgetdsl.solve.solver import solve

REPO = pathlib.Path(__file__).resolve().parents[2]

# (layers, d_model, heads, kv_heads, ffn_hidden, vocab) of each model's released config.json, and
# the parameter count its weights hold (the sum of the tensors' sizes, as the model cards state).
LLAMA = {
    "Llama-2-7b": ((32, 4096, 32, 32, 11008, 32000), 6_738_415_616),
    "Llama-2-70b": ((80, 8192, 64, 8, 28672, 32000), 68_976_648_192),
    "Llama-3-8B": ((32, 4096, 32, 8, 14336, 128256), 8_030_261_248),
    "Llama-3-70B": ((80, 8192, 64, 8, 28672, 128256), 70_553_706_496),
}


@pytest.mark.parametrize("name", sorted(LLAMA))
def test_the_shape_counts_the_published_llama_parameters(name):
    (layers, d, heads, kv, ffn, vocab), published = LLAMA[name]
    counted = transformer_params(layers, d, vocab, heads=heads, kv_heads=kv, ffn_hidden=ffn, mlp="swiglu",
                                 tied_embeddings=False)
    assert counted == published



LLAMA3_8B = """\
    name: llama3-8b
    model: {layers: 32, d_model: 4096, heads: 32, kv_heads: 8, ffn_hidden: 14336, mlp: swiglu,
            tied_embeddings: false, vocab: 128256, seq_len: 8192}
    hardware: {gpu: H100-SXM5-80GB, gpus: 64}
    target: {tokens: 20 * model.params, at_batch: 4M}
    noise: {b_crit: 4M}
    """


def test_params_omitted_is_counted_from_the_shape_and_expressions_see_it(tmp_path):
    plan = load_plan(write(tmp_path, LLAMA3_8B))
    assert plan.model.params == 8_030_261_248
    assert plan.target.tokens == 20 * 8_030_261_248
    coef = build_cost_model(plan, 64, Split(1, 1, 1, "full", True)).coefficients["params"]
    assert (coef.value, coef.origin) == (8_030_261_248, "derived")


def test_flops_per_token_is_megatrons_closed_form_on_a_gpt_shape():
    """Tied embeddings, 4·d GeLU MLP, params counted from the shape: f = 72·L·d²·(1 + s/(6d) +
    V/(12·L·d)) (Korthikanti et al. 2022 appendix A eq. 7) plus 6 per norm parameter (the only
    parameters the closed form leaves out)."""
    L, d, a, s, V = 24, 2048, 16, 2048, 50257
    plan = make_plan(model={"params": None, "layers": L, "d_model": d, "heads": a, "seq_len": s, "vocab": V})
    closed = 72.0 * L * d * d * (1 + s / (6 * d) + V / (12 * L * d)) + 6.0 * (2 * L * d + d)
    assert build_cost_model(plan, 8).flops_per_token == pytest.approx(closed, rel=1e-12)


def test_an_untied_input_embedding_is_a_lookup_not_a_matmul():
    (layers, d, heads, kv, ffn, vocab), n = LLAMA["Llama-3-8B"]
    s = 8192
    shape = {"params": None, "layers": layers, "d_model": d, "heads": heads, "kv_heads": kv, "ffn_hidden": ffn,
             "mlp": "swiglu", "vocab": vocab, "seq_len": s}
    untied = build_cost_model(make_plan(model={**shape, "tied_embeddings": False}), 1024)
    matmuls = layers * (2 * d * d + 2 * d * kv * d / heads + 3 * d * ffn) + vocab * d  # layers' GEMMs + LM head
    norms = 2 * layers * d + d  # 6 FLOPs per norm parameter too: the one convention, 6N
    assert untied.flops_per_token == pytest.approx(6 * (matmuls + norms) + 12 * layers * d * s, rel=1e-12)
    assert untied.flops_per_token == 6 * (n - vocab * d) + 12 * layers * d * s
    assert "lookup" in untied.coefficients["flops_per_token"].detail


def _itemised(s, d, heads, kv, ffn, mlp, t=1, sequence_parallel=True):
    """Korthikanti et al. 2022 section 4.1's stored activations of one layer, item by item, for a
    GQA/SwiGLU layer (bytes, 16-bit): what tensor parallelism keeps whole and what it splits."""
    d_kv = d * kv / heads
    whole = 2 * s * d * 2 + 2 * s * d + 2 * s * d + s * d + s * d  # norm inputs, QKV and MLP inputs, masks
    attention = 2 * s * d + 2 * s * d_kv + 2 * s * d_kv + 2 * s * d  # Q, K, V, output projection's input
    mlp_bytes = (2 * s * ffn * 2 + 2 * s * ffn) if mlp == "swiglu" else (2 * s * ffn + 2 * s * ffn)
    if sequence_parallel or t == 1:
        return (whole + attention + mlp_bytes) / t
    return whole + (attention + mlp_bytes) / t


@pytest.mark.parametrize("kv, ffn, mlp", [(8, 14336, "swiglu"), (1, 11008, "swiglu"), (32, 16384, "gelu"),
                                          (4, 8192, "gelu")])
@pytest.mark.parametrize("t, sp", [(1, False), (4, True), (8, False)])
def test_activations_follow_the_shape(kv, ffn, mlp, t, sp):
    s, d, heads = 4096, 4096, 32
    got = activation_bytes_per_layer(s, d, heads, "none", True, t, sp, kv_heads=kv, ffn_hidden=ffn, mlp=mlp)
    assert got == pytest.approx(_itemised(s, d, heads, kv, ffn, mlp, t, sp), rel=1e-12)
    # the defaults are Korthikanti's standard layer, 34·s·d (10 + 24/t without sequence parallelism)
    standard = activation_bytes_per_layer(s, d, heads, "none", True, t, sp)
    assert standard == pytest.approx(_itemised(s, d, heads, heads, 4 * d, "gelu", t, sp), rel=1e-12)
    # recomputation keeps its meaning: full stores the layer input only
    assert activation_bytes_per_layer(s, d, heads, "full", True, t, sp, kv_heads=kv, ffn_hidden=ffn,
                                      mlp=mlp) == 2 * s * d / (t if sp or t == 1 else 1)


def test_gqa_and_swiglu_change_the_memory_a_plan_needs():
    """A 7B-class layer with 8 KV heads and a 3·d·F SwiGLU of F = 11008 keeps less than the
    standard layer's 34·s·d; a plan's micro-batch room follows."""
    base = {"params": None, "layers": 32, "d_model": 4096, "heads": 32, "seq_len": 4096, "vocab": 32000}
    std = build_cost_model(make_plan(model=base, hardware={"gpus": 8}), 8, Split(1, 1, 1, "none", True))
    gqa = build_cost_model(make_plan(model={**base, "kv_heads": 8, "ffn_hidden": 11008, "mlp": "swiglu"},
                                     hardware={"gpus": 8}), 8, Split(1, 1, 1, "none", True))
    per_layer = gqa.heaviest_stage.activations_per_sequence / 32
    assert per_layer == pytest.approx(_itemised(4096, 4096, 32, 8, 11008, "swiglu"), rel=1e-12)
    assert gqa.activation_bytes_per_sequence < std.activation_bytes_per_sequence
    assert "the shape's" in gqa.coefficients["activation_bytes_per_sequence"].detail


@pytest.mark.parametrize("p", [1, 2, 4])
def test_every_parameter_sits_on_a_stage_once_untied_and_the_head_copied_tied(p):
    (layers, d, heads, kv, ffn, vocab), n = LLAMA["Llama-3-8B"]
    common = dict(seq_len=4096, layers=layers, d_model=d, heads=heads, vocab=vocab, tensor_parallel=1,
                  pipeline_parallel=p, data_parallel=1, zero=0, recompute="full", flash_attention=True,
                  sequence_parallel=False, kv_heads=kv, ffn_hidden=ffn, mlp="swiglu")
    untied = stage_memory(params=float(n), tied_embeddings=False, **common)
    assert sum(st.weights for st in untied) == pytest.approx(2.0 * n, rel=1e-12)
    tied_n = n - vocab * d
    tied = stage_memory(params=float(tied_n), tied_embeddings=True, **common)
    copy = vocab * d if p > 1 else 0  # Megatron keeps the tied head's copy on the last stage
    assert sum(st.weights for st in tied) == pytest.approx(2.0 * (tied_n + copy), rel=1e-12)


# -- FP8 ---------------------------------------------------------------------------------------

FP8_MODEL = {"params": None, "layers": 32, "d_model": 4096, "heads": 32, "kv_heads": 8, "ffn_hidden": 14336,
             "mlp": "swiglu", "tied_embeddings": False, "vocab": 128256, "seq_len": 4096}
PREDICTED = {"gpu": "H100-SXM5-80GB", "gpus": 64, "mfu": None, "overlap": None, "network": None, "zero": 1,
             "tensor_parallel": 2, "pipeline_parallel": 1, "recompute": "selective"}


def _fp8_pair(**hw):
    split = Split(1, 2, 1, "selective", True)
    bf16 = build_cost_model(make_plan(model=FP8_MODEL, hardware={**PREDICTED, **hw}), 64, split)
    fp8 = build_cost_model(make_plan(model=FP8_MODEL, hardware={**PREDICTED, **hw, "precision": "fp8"}), 64, split)
    return bf16, fp8


def test_fp8_runs_the_layers_gemms_at_the_fp8_peak_and_nothing_else():
    """The compute share drops by exactly the layers' GEMM time (6 FLOPs per layer parameter: f
    less the LM head and the attention scores, each GEMM at its shape's share of the large-GEMM
    rate, budgetdsl.cost.gemm_shape) priced at the FP8 instead of the BF16 dense peak; MFU stays
    against the BF16 peak."""
    bf16, fp8 = _fp8_pair()
    h100 = PRESETS["H100-SXM5-80GB"]
    batch = 64 * 4096.0 * 8
    a, b = bf16.breakdown(batch, 8), fp8.breakdown(batch, 8)
    m = fp8.shape
    gemm = m.layer_flops - 12.0 * m.d_model * m.seq_len
    tokens = batch / 32  # per data-parallel replica of t = 2: 32 replicas
    eff = h100.kernel_efficiency
    shapes = gemm_time(h100.gemm, sharded_matmuls(4096, 32, 8, 14336, "swiglu", 2, True))
    per_flop = 1 / (h100.peak_flops * eff) - 1 / (h100.fp8_peak_flops * eff)
    saved = m.layers * (gemm * tokens / 2 * shapes.per_row + b.micro_batches * shapes.fixed) * per_flop
    assert a.compute - b.compute == pytest.approx(saved, rel=1e-9)
    assert (a.recompute, a.tp_comm, a.optimizer) == pytest.approx((b.recompute, b.tp_comm, b.optimizer), rel=1e-12)
    assert b.mfu > a.mfu and b.peak_flops == h100.peak_flops
    coef = fp8.coefficients["fp8_peak_flops"]
    assert (coef.value, coef.origin) == (h100.fp8_peak_flops, "preset") and "stay BF16" in coef.detail
    assert "fp8_peak_flops" not in bf16.coefficients and "fp8_flop_share" not in bf16.coefficients
    share = fp8.coefficients["fp8_flop_share"].value
    assert share == pytest.approx(m.layers * gemm / fp8.flops_per_token, rel=1e-12) and 0.5 < share < 1


def test_fp8_caches_a_weight_copy_and_its_transpose_per_layer_parameter():
    bf16, fp8 = _fp8_pair()
    layer_params = fp8.shape.layer_params * fp8.shape.layers
    assert fp8.weights_bytes - bf16.weights_bytes == pytest.approx(FP8_WEIGHT_BYTES * layer_params / 2, rel=1e-12)
    assert "FP8 weight" in fp8.coefficients["weights_bytes"].detail
    assert (fp8.grads_bytes, fp8.optimizer_bytes) == (bf16.grads_bytes, bf16.optimizer_bytes)


def test_the_fp8_parts_are_hopper_and_blackwell():
    fp8 = {name for name, p in PRESETS.items() if p.fp8_peak_flops > 0}
    assert fp8 == {"H100-SXM5-80GB", "H100-PCIE-80GB", "H800-SXM5-80GB", "H200-SXM-141GB", "B200-SXM-180GB"}
    for name in fp8:  # the datasheets' dense FP8 is twice the dense BF16 (PCIe: 1513 of 756)
        assert PRESETS[name].fp8_peak_flops == pytest.approx(2 * PRESETS[name].peak_flops, rel=1e-3)


def test_the_h800_is_an_h100_with_a_narrower_nvlink():
    h800, h100 = PRESETS["H800-SXM5-80GB"], PRESETS["H100-SXM5-80GB"]
    assert h800.intra_node == 200 * GB  # 400 GB/s bidirectional
    assert (h800.peak_flops, h800.fp8_peak_flops, h800.memory, h800.hbm_bandwidth) == (
        h100.peak_flops, h100.fp8_peak_flops, h100.memory, h100.hbm_bandwidth)
    h200 = PRESETS["H200-SXM-141GB"]
    assert h200.memory == 141 * GB and h200.hbm_bandwidth == 4800 * GB


# -- located errors ----------------------------------------------------------------------------

BAD = {
    "kv_heads that do not divide heads": (
        "model: {params: 7B, layers: 32, d_model: 4096, heads: 32, kv_heads: 6, seq_len: 4096}",
        "hardware: {gpu: H100-SXM5-80GB, gpus: 64}",
        "plan.yaml:2:59: error[plan-rule]: kv_heads (6) must divide heads (32)", "e.g. kv_heads: 4"),
    "kv_heads without heads": (
        "model: {params: 7B, layers: 32, d_model: 4096, kv_heads: 8, seq_len: 4096}",
        "hardware: {gpu: H100-SXM5-80GB, gpus: 64}",
        "plan.yaml:2:48: error[plan-rule]: kv_heads needs heads", "e.g. heads: 64"),
    "kv_heads that tensor parallelism cannot split": (
        "model: {params: 7B, layers: 32, d_model: 4096, heads: 32, kv_heads: 2, seq_len: 4096}",
        "hardware: {gpu: H100-SXM5-80GB, gpus: 64, tensor_parallel: 8}",
        "plan.yaml:3:43: error[plan-rule]: kv_heads (2) must be divisible by tensor_parallel (8)",
        "e.g. tensor_parallel: 2"),
    "params omitted without a vocabulary": (
        "model: {layers: 32, d_model: 4096, heads: 32, seq_len: 4096}",
        "hardware: {gpu: H100-SXM5-80GB, gpus: 64}",
        "plan.yaml:2:1: error[plan-rule]: missing key 'params' in 'model', and the shape does not count it: "
        "vocab is not given", "give params"),
    "a shape beyond the physical range": (
        "model: {layers: 100000, d_model: 1000000, vocab: 1000, seq_len: 4096}",
        "hardware: {gpu: H100-SXM5-80GB, gpus: 64}",
        "plan.yaml:2:8: error[plan-rule]: the shape counts 1.2e+18 parameters, above the physical range",
        "check layers"),
    "an untied head that params cannot hold": (
        "model: {params: 300M, layers: 2, d_model: 4096, vocab: 50000, tied_embeddings: false, seq_len: 4096}",
        "hardware: {gpu: H100-SXM5-80GB, gpus: 64}",
        "error[plan-rule]: the untied embedding and LM head, 2 × vocab × d_model = 4.1e+08 parameters",
        "or tied_embeddings"),
    "an unknown MLP": (
        "model: {params: 7B, layers: 32, d_model: 4096, mlp: geglu, seq_len: 4096}",
        "hardware: {gpu: H100-SXM5-80GB, gpus: 64}",
        "plan.yaml:2:53: error[invalid-choice]: 'geglu' is not one of", "did you mean 'gelu'"),
    "FP8 on a part without an FP8 peak": (
        "model: {params: 7B, layers: 32, d_model: 4096, heads: 32, seq_len: 4096}",
        "hardware: {gpu: A100-SXM4-80GB, gpus: 64, precision: fp8}",
        "plan.yaml:3:43: error[plan-rule]: precision: fp8 runs the GEMMs at the FP8 dense peak; the "
        "A100-SXM4-80GB preset has no FP8 tensor-core peak", "H800-SXM5-80GB"),
    "FP8 without a preset": (
        "model: {params: 7B, layers: 32, d_model: 4096, heads: 32, seq_len: 4096}",
        "hardware: {peak_flops: 1 PFLOP/s, memory_per_device: 80 GiB, gpus: 64, mfu: 0.4, precision: fp8}",
        "error[plan-rule]: precision: fp8 runs the GEMMs at the FP8 dense peak; FP8 GEMMs need a GPU preset",
        "write precision: bf16"),
}


@pytest.mark.parametrize("name", sorted(BAD))
def test_each_new_key_fails_located_with_a_hint(tmp_path, name, capsys):
    assert_refused_located(tmp_path, capsys, *BAD[name])


def test_a_params_far_from_its_detailed_shape_is_a_located_warning(tmp_path):
    text = LLAMA3_8B.replace("model: {layers", "model: {params: 7B, layers")
    sol = solve(load_plan(write(tmp_path, text)))
    [warning] = [w for w in sol.warnings if w.code == "params-vs-shape"]
    assert (warning.line, warning.col) == (2, 17) and "-12.8%" in warning.message
    close = solve(load_plan(write(tmp_path, text.replace("params: 7B", "params: 8B"))))
    assert not [w for w in close.warnings if w.code == "params-vs-shape"]


def test_a_sketched_shape_leaves_params_the_authority():
    """Without kv_heads, ffn_hidden, mlp or tied_embeddings the shape is the GPT-style default and
    no warning compares it (the Llama 2 example writes only layers, d_model, heads and vocab)."""
    plan = load_plan(REPO / "plans" / "llama2-7b.yaml")
    assert plan.model.params_mismatch() is None
    assert not [w for w in solve(plan).warnings if w.code == "params-vs-shape"]


def test_the_schema_states_every_new_key_with_its_range():
    schema = json.loads((REPO / "budgetdsl.schema.json").read_text())
    model, hardware = schema["$defs"]["ModelShape"]["properties"], schema["$defs"]["Hardware"]["properties"]
    for key in ("kv_heads", "ffn_hidden"):
        number = model[key]["anyOf"][0]
        assert number["type"] == "integer" and number["exclusiveMinimum"] == 0 and number["maximum"] > 0
    assert set(model["mlp"]["enum"]) == {"gelu", "swiglu"} and model["tied_embeddings"]["type"] == "boolean"
    assert set(hardware["precision"]["enum"]) == {"bf16", "fp8"}
    assert "params" not in schema["$defs"]["ModelShape"].get("required", [])
    assert "H800-SXM5-80GB" in hardware["gpu"]["description"]


def test_the_schema_fuzzer_reaches_every_new_key():
    """tests/budgetdsl/schema_plans.py draws plans from the committed schema: the new keys, with
    their non-default values, and plans that omit params, are among what it draws and makes valid."""
    from hypothesis import HealthCheck, given, settings
    from schema_plans import plans

    seen: set[str] = set()

    @settings(max_examples=300, derandomize=True, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(plans())
    def draw(doc):
        model, hw = doc["model"], doc["hardware"]
        seen.update(f"model.{k}" for k in ("kv_heads", "ffn_hidden") if model.get(k) is not None)
        seen.update(f"model.{k}={model[k]}" for k in ("mlp", "tied_embeddings") if k in model)
        if "precision" in hw:
            seen.add(f"hardware.precision={hw['precision']}")
        if "params" not in model:
            seen.add("params counted")
        if hw.get("gpu") == "H800-SXM5-80GB":
            seen.add("H800")

    draw()
    assert {"model.kv_heads", "model.ffn_hidden", "model.mlp=swiglu", "model.tied_embeddings=False",
            "hardware.precision=fp8", "params counted", "H800"} <= seen, seen


def test_the_layout_search_splits_only_what_tensor_parallelism_can_split(tmp_path):
    """Two KV heads: Megatron divides the key/value heads over the TP ranks, so the search offers
    t = 1 and 2 only, though 32 query heads would take 8."""
    from budgetdsl.solve.layout_search import candidates

    text = LLAMA3_8B.replace("kv_heads: 8", "kv_heads: 2")
    plan = load_plan(write(tmp_path, text))
    assert {c.tensor_parallel for c in candidates(plan)} == {1, 2}
    wide = load_plan(write(tmp_path, LLAMA3_8B))
    assert {c.tensor_parallel for c in candidates(wide)} == {1, 2, 4, 8}


def test_the_megatron_export_launches_the_layer_the_plan_priced(tmp_path):
    """The example plan's GQA/SwiGLU/untied/FP8 layer reaches Megatron-LM's flags; a plan that
    describes no layer keeps Megatron's defaults (and the comment that says so)."""
    from budgetdsl.cli import main

    out = tmp_path / "run.megatron.sh"
    assert main(["export", str(REPO / "plans" / "llama3-8b-h100-fp8.yaml"), "--to", "megatron", "-q",
                 "-o", str(out)]) == 0
    text = out.read_text()
    for flag in ("--group-query-attention", "--num-query-groups 8", "--ffn-hidden-size 14336", "--swiglu",
                 "--untie-embeddings-and-output-weights", "--fp8-format hybrid", "--bf16"):
        assert f"    {flag}\n" in text, flag
    plain = tmp_path / "plain.megatron.sh"
    assert main(["export", str(REPO / "plans" / "llama2-7b.yaml"), "--to", "megatron", "-q", "-o", str(plain)]) == 0
    flags = [line.split()[0] for line in plain.read_text().splitlines() if line.startswith("    --")]
    assert "--num-layers" in flags and not {"--swiglu", "--num-query-groups", "--fp8-format"} & set(flags)
    assert "know (--ffn-hidden-size, --swiglu, --group-query-attention" in plain.read_text()


def test_fp8_linear_layers_keep_their_inputs_in_one_byte():
    """Transformer Engine saves an FP8 linear layer's quantized input for the weight gradient
    (transformer_engine/pytorch/module/linear.py): on a Llama-3-8B-shaped layer (d_kv = d/4,
    F = 3.5·d, SwiGLU) the 36·s·d bytes of 16-bit activations lose 1 byte per value of the QKV and
    MLP inputs (2·d) and of the projection and down-projection inputs (d + F): 29.5·s·d. Tensor
    parallelism without sequence parallelism splits only the second part."""
    s, d = 8192, 4096
    shape = dict(kv_heads=8, ffn_hidden=14336, mlp="swiglu")
    bf16 = activation_bytes_per_layer(s, d, 32, "none", True, 1, True, **shape)
    fp8 = activation_bytes_per_layer(s, d, 32, "none", True, 1, True, **shape, fp8=True)
    assert bf16 == pytest.approx(36 * s * d) and fp8 == pytest.approx(29.5 * s * d)
    tp = activation_bytes_per_layer(s, d, 32, "none", True, 4, False, **shape, fp8=True)
    assert tp == pytest.approx(s * d * (8 + 21.5 / 4))
    # full recomputation keeps the layer's 16-bit input, FP8 or not
    assert activation_bytes_per_layer(s, d, 32, "full", True, 1, True, **shape, fp8=True) == 2 * s * d
