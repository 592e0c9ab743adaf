"""Published training runs against budgetdsl (and llm-analysis): `python bench/published_runs.py`.

Plans each run of tests/budgetdsl/published_runs.yaml (published global batch pinned, micro-batch
left to the tool) and prints the comparison, as tests/budgetdsl/test_published_runs.py checks it.
--markdown writes docs/published-runs.md (with llm-analysis's memory when installed); --plans DIR
writes each row as a plan file; --fit prints the A100 kernel efficiency that makes Narayanan et al.
2021 Table 1's geometric-mean ratio 1 (how gpus.A100_EFFICIENCY was obtained).
"""

from __future__ import annotations

import math
import pathlib
import sys
from dataclasses import dataclass
from typing import Any

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
TABLE = REPO / "tests" / "budgetdsl" / "published_runs.yaml"


def _numbers(node: Any) -> Any:
    """PyYAML reads `6.74e9` (YAML 1.1 wants `6.74e+9`) as a string: make such strings floats."""
    if isinstance(node, dict):
        return {k: _numbers(v) for k, v in node.items()}
    if isinstance(node, list):
        return [_numbers(v) for v in node]
    if isinstance(node, str):
        try:
            return float(node)
        except ValueError:
            return node
    return node


def load_rows() -> dict[str, Any]:
    import yaml

    return _numbers(yaml.safe_load(TABLE.read_text()))


def convention_flops_per_token(row: dict[str, Any]) -> float:
    """FLOPs per token in the source's own convention (see the table's header)."""
    m = row["model"]
    conv = row["convention"]
    if conv == "palm_active":  # the tool's own f of the shape: 6 per activated matmul weight + the scores
        from budgetdsl.cost.cost_model import flops_per_token

        return flops_per_token(make_plan(row)).value
    n, lay, d, s, v = m["params"], m["layers"], m["d_model"], m["seq_len"], m.get("vocab") or 0
    if conv == "palm":
        return 6.0 * n + 12.0 * lay * d * s
    if conv == "megatron_hw":  # Narayanan et al. 2021 eq. 3, per token
        return 96.0 * lay * d * d * (1.0 + s / (6.0 * d) + v / (16.0 * lay * d))
    if conv == "megatron_model":  # Korthikanti et al. 2022 appendix A eq. 7, per token (model FLOPs)
        return 72.0 * lay * d * d * (1.0 + s / (6.0 * d) + v / (12.0 * lay * d))
    raise ValueError(f"unknown FLOP convention {conv!r}")


def _peak(row: dict[str, Any]) -> float:
    from budgetdsl.hardware.gpus import find_preset

    hw = row["hardware"]
    return float(hw.get("peak_flops") or find_preset(hw["gpu"]).peak_flops)


def published_mfu_from_step(row: dict[str, Any]) -> float:
    """A published iteration time as the MFU of the row's convention: the step's FLOPs (f of the
    convention × the global batch in tokens) ÷ (seconds × GPUs × peak) — Korthikanti et al. 2022's
    definition of the MFU their Table 5 prints beside the same times."""
    tokens = row["batch_sequences"] * row["model"]["seq_len"]
    gpus = row["hardware"]["gpus"]
    return convention_flops_per_token(row) * tokens / (row["published"]["step_s"] * gpus * _peak(row))


def declared_mfu(row: dict[str, Any]) -> float | None:
    """A declared row's MFU: as written (hardware.mfu), or from a published throughput
    (tokens_per_gpu_s × f ÷ peak, f = 6N + 12·L·d·s, the tool's own count; a published
    tflops_per_gpu is first turned into tokens/s with the row's FLOP convention)."""
    if "mfu" in row["hardware"]:
        return float(row["hardware"]["mfu"])
    rate = row.get("tokens_per_gpu_s")
    if rate is None and "tflops_per_gpu" in row:  # a published FLOP rate, in the row's convention
        rate = row["tflops_per_gpu"] * 1e12 / convention_flops_per_token(row)
    if rate is not None:
        m = row["model"]
        f = 6.0 * m["params"] + 12.0 * m["layers"] * m["d_model"] * m["seq_len"]
        return float(rate) * f / _peak(row)
    return None


PUBLISHED_LAYOUT_DEFAULTS = {"tensor_parallel": 1, "pipeline_parallel": 1, "zero": 0, "recompute": "none"}


def plan_document(row: dict[str, Any], **hardware: Any) -> dict[str, Any]:
    """The plan a user would write for a published run (what `make_plan` validates; `--plans DIR`
    writes it as DIR/<name>.yaml for `budgetdsl plan`)."""
    m = row["model"]
    seq = row["batch_sequences"]
    tokens = row.get("tokens") or 1000.0 * seq * m["seq_len"]
    # A published run has one layout: what the row does not name is the framework's default (no
    # tensor or pipeline parallelism, no ZeRO, no recomputation), pinned, never searched.
    hw = {**PUBLISHED_LAYOUT_DEFAULTS, **row["hardware"], **hardware}
    if row["mode"] == "declared" and "mfu" not in hw:
        hw["mfu"] = declared_mfu(row)
    return {
        "name": row["name"], "model": m, "hardware": hw,
        "target": {"tokens": float(tokens), "at_batch": float(seq * m["seq_len"])},
        "noise": {"b_crit": float(seq * m["seq_len"])},
        "run": {"batch": float(seq * m["seq_len"]),
                **({"micro_batch": int(row["micro_batch"])} if row.get("micro_batch") else {})},
    }


def make_plan(row: dict[str, Any], **hardware: Any):
    from budgetdsl.plan.model import Plan

    return Plan.model_validate(plan_document(row, **hardware))


def plan_file_text(row: dict[str, Any]) -> str:
    """A plan file for `budgetdsl plan`: the row's source as a comment, then the plan (numbers as
    YAML floats and integers, so the file reads back to the same plan)."""
    import yaml

    doc = plan_document(row)
    doc["hardware"] = {k: (str(v) if k == "recompute" else v) for k, v in doc["hardware"].items()}
    head = f"# {row['name']}: {row.get('source', '')}\n# published: {row['published']}\n"
    return head + yaml.safe_dump(doc, sort_keys=False, allow_unicode=True)


def write_plans(directory: pathlib.Path, rows: list[dict[str, Any]]) -> list[pathlib.Path]:
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for row in rows:
        slug = "".join(c if c.isalnum() else "-" for c in row["name"].lower()).strip("-")
        path = directory / f"{'-'.join(filter(None, slug.split('-')))}.yaml"
        path.write_text(plan_file_text(row), encoding="utf-8")
        paths.append(path)
    return paths


@dataclass(frozen=True)
class Result:
    name: str
    mode: str
    published: float
    value: float  # GPU-hours (declared) or TFLOP/s per GPU in the source's convention (predicted)
    unit: str
    mfu: float
    hfu: float
    micro_batch: int
    memory: float  # bytes per GPU at the launched micro-batch, reserve excluded
    fits: bool
    solution: Any

    @property
    def error(self) -> float:
        return self.value / self.published - 1.0


def evaluate(row: dict[str, Any], **hardware: Any) -> Result:
    from budgetdsl.solve.solver import solve

    plan = make_plan(row, **hardware)
    sol = solve(plan)
    tp = sol.throughput
    a = sol.assumptions
    # the counted bytes: memory = counted × (1 + fragmentation) + the fixed reserve (budgetdsl.cost.reserve)
    frag = a["fragmentation"].value if "fragmentation" in a else 0.0
    memory = (a["memory_at_micro_batch"].value - a["reserve_bytes"].value) / (1.0 + frag)
    if row["mode"] == "declared" or "gpu_hours" in row["published"]:  # predicted: the run's tokens at its step
        value, published, unit = sol.gpu_hours, row["published"]["gpu_hours"], "GPU-h"
    elif "tokens_per_gpu_s" in row["published"]:  # a published throughput: no FLOP convention in between
        value = sol.batch.tokens / tp.step_time_s / sol.gpus
        published, unit = row["published"]["tokens_per_gpu_s"], "tokens/s/GPU"
    else:
        per_token_s = tp.step_time_s / sol.batch.tokens
        value = convention_flops_per_token(row) / per_token_s / sol.gpus / 1e12
        if "mfu" in row["published"] or "step_s" in row["published"]:  # an MFU in the source's convention
            published = row["published"].get("mfu") or published_mfu_from_step(row)
            value, unit = value * 1e12 / sol.assumptions["peak_flops"].value, "MFU"
        else:
            published, unit = row["published"]["tflops_per_gpu"], "TFLOP/s/GPU"
    return Result(row["name"], row["mode"], published, value, unit, tp.mfu, tp.hfu, sol.batch.micro_batch,
                  memory, sol.feasible and a["micro_batch_max"].value >= 1, sol)


def modern_summary(results: list[Result]) -> tuple[float, int]:
    """(median |error|, rows within the predicted tolerance) of the modern rows' results."""
    errors = sorted(abs(r.error) for r in results)
    if not errors:
        return 0.0, 0
    mid = len(errors) // 2
    median = errors[mid] if len(errors) % 2 else 0.5 * (errors[mid - 1] + errors[mid])
    return median, sum(e <= 0.15 for e in errors)


def fit_efficiency(rows: list[dict[str, Any]] | None = None) -> float:
    """Bisection on a preset's kernel efficiency: the geometric mean of predicted/published over
    `rows` = 1. Default: Narayanan et al. 2021 Table 1 (all ten rows, A100), which is how
    gpus.A100_EFFICIENCY was obtained; MOSAIC_H100 gives gpus.H100_EFFICIENCY."""
    rows = TABLE1_ALL if rows is None else rows

    def ratio(eff: float) -> float:
        logs = [math.log(evaluate(r, kernel_efficiency=eff).error + 1.0) for r in rows]
        return math.exp(sum(logs) / len(logs))

    lo, hi = 0.3, 1.0
    for _ in range(30):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if ratio(mid) < 1.0 else (lo, mid)
    return 0.5 * (lo + hi)


def _table1(params: float, heads: int, d: int, layers: int, t: int, p: int, gpus: int, batch: int,
            tflops: float) -> dict[str, Any]:
    hw: dict[str, Any] = {"gpu": "A100-SXM4-80GB", "gpus": gpus, "recompute": "full", "flash_attention": False}
    if t > 1:
        hw["tensor_parallel"] = t
    if p > 1:
        hw["pipeline_parallel"] = p
    return {"name": f"Megatron {params / 1e9:g}B", "mode": "predicted", "convention": "megatron_hw",
            "model": {"params": params, "layers": layers, "d_model": d, "heads": heads, "seq_len": 2048,
                      "vocab": 51200}, "hardware": hw, "batch_sequences": batch,
            "published": {"tflops_per_gpu": tflops}}


# Narayanan et al. 2021, Table 1: every row (params, heads, hidden, layers, t, p, GPUs, batch, TFLOP/s)
TABLE1_ALL = [_table1(*r) for r in (
    (1.7e9, 24, 2304, 24, 1, 1, 32, 512, 137), (3.6e9, 32, 3072, 30, 2, 1, 64, 512, 138),
    (7.5e9, 32, 4096, 36, 4, 1, 128, 512, 142), (18.4e9, 48, 6144, 40, 8, 1, 256, 1024, 135),
    (39.1e9, 64, 8192, 48, 8, 2, 512, 1536, 138), (76.1e9, 80, 10240, 60, 8, 4, 1024, 1792, 140),
    (145.6e9, 96, 12288, 80, 8, 8, 1536, 2304, 148), (310.1e9, 128, 16384, 96, 8, 16, 1920, 2160, 155),
    (529.6e9, 128, 20480, 105, 8, 35, 2520, 2520, 163), (1008e9, 160, 25600, 128, 8, 64, 3072, 3072, 163))]


def _mtnlg(gpus: int, tflops: float) -> dict[str, Any]:
    return {"name": f"MT-NLG 530B, {gpus} GPUs", "mode": "predicted", "convention": "megatron_hw",
            "source": "Smith et al. 2022 (MT-NLG), section 2.4: 60.1/50.2/44.4 s per iteration at batch 1920; "
                      "TFLOP/s as llm-analysis's example converts them",
            "model": {"params": 530e9, "layers": 105, "d_model": 20480, "heads": 128, "seq_len": 2048,
                      "vocab": 50272},
            "hardware": {"gpu": "A100-SXM4-40GB", "gpus": gpus, "tensor_parallel": 8, "pipeline_parallel": 35,
                         "zero": 1, "recompute": "full", "flash_attention": False},
            "batch_sequences": 1920, "published": {"tflops_per_gpu": tflops}}


# MosaicML llm-foundry, scripts/train/benchmarking/README.md (MPT models, FSDP FULL_SHARD, flash
# attention, MFU in the PaLM convention: 6N + 12·L·d·s): (model, seq, GPUs, MFU %, micro-batch,
# accumulation, global batch, mixed precision, activation checkpointing, parameters). MPT shapes
# from llm-foundry's yamls; vocabulary 50,368.
_MPT = {"1b": (2048, 24, 16), "3b": (2560, 32, 32), "7b": (4096, 32, 32), "13b": (5120, 40, 40),
        "30b": (7168, 48, 64), "70b": (8192, 80, 64)}


def _mosaic(gpu: str, r: tuple) -> dict[str, Any]:
    m, s, g, mfu, micro, _accum, batch, mp, ckpt, n = r
    d, layers, heads = _MPT[m]
    return {"name": f"MPT-{m}, s {s}, {g} × {gpu.split('-')[0]}", "mode": "predicted", "convention": "palm",
            "source": "MosaicML llm-foundry benchmarks (scripts/train/benchmarking/README.md)",
            "micro_batch": micro,
            "model": {"params": float(n), "layers": layers, "d_model": d, "heads": heads, "seq_len": s, "vocab": 50368},
            "hardware": {"gpu": gpu, "gpus": g, "zero": 3, "recompute": "full" if ckpt else "none",
                         "flash_attention": True, "grad_dtype": "bf16" if mp == "PURE" else "fp32"},
            "batch_sequences": batch, "published": {"mfu": mfu / 100.0}}


# H100 80GB BF16 (3,200 Gb/s per node): the rows at 2,048 and 4,096 tokens — the H100 preset's fit.
MOSAIC_H100 = [_mosaic("H100-SXM5-80GB", r) for r in (
    ("70b", 2048, 64, 42.57, 8, 4, 2048, "DEFAULT", True, 64862437376),
    ("70b", 2048, 32, 36.15, 2, 16, 1024, "DEFAULT", True, 64862437376),
    ("30b", 4096, 8, 35.86, 1, 21, 168, "DEFAULT", True, 29989894144),
    ("30b", 2048, 32, 43.92, 14, 3, 1344, "DEFAULT", True, 29975214080),
    ("30b", 2048, 16, 43.07, 10, 3, 480, "DEFAULT", True, 29975214080),
    ("30b", 2048, 8, 38.11, 3, 21, 504, "DEFAULT", True, 29975214080),
    ("13b", 4096, 8, 41.6, 10, 3, 240, "DEFAULT", True, 12864440320),
    ("13b", 2048, 64, 39.86, 2, 1, 128, "DEFAULT", False, 12853954560),
    ("13b", 2048, 8, 39.79, 2, 1, 16, "DEFAULT", False, 12853954560),
    ("7b", 4096, 8, 40.42, 16, 2, 256, "DEFAULT", True, 6667247616),
    ("7b", 2048, 8, 46.44, 6, 1, 48, "DEFAULT", False, 6658859008),
    ("3b", 4096, 8, 42.31, 5, 6, 240, "DEFAULT", False, 2657080320),
    ("3b", 2048, 64, 40.8, 6, 3, 1152, "DEFAULT", False, 2651837440),
    ("3b", 2048, 16, 43.73, 10, 3, 480, "DEFAULT", False, 2651837440),
    ("1b", 4096, 8, 40.26, 7, 4, 224, "DEFAULT", False, 1320144896),
    ("1b", 2048, 64, 40.85, 20, 1, 1280, "DEFAULT", False, 1315950592),
    ("1b", 2048, 8, 41.82, 14, 1, 112, "DEFAULT", False, 1315950592))]
# A100 80GB (1,600 Gb/s per node): out of every fit, a check of the A100 number on 2023 software.
MOSAIC_A100 = [_mosaic("A100-SXM4-80GB", r) for r in (
    ("70b", 2048, 64, 53.33, 8, 4, 2048, "PURE", True, 64862437376),
    ("30b", 2048, 8, 55.3, 3, 21, 504, "DEFAULT", True, 29975214080),
    ("13b", 4096, 8, 57.62, 10, 3, 240, "DEFAULT", True, 12864440320),
    ("13b", 2048, 8, 59.57, 2, 3, 48, "DEFAULT", False, 12853954560),
    ("7b", 4096, 8, 54.84, 16, 2, 256, "DEFAULT", True, 6667247616),
    ("7b", 2048, 8, 64.23, 6, 2, 96, "DEFAULT", False, 6658859008),
    ("3b", 2048, 8, 62.11, 10, 2, 160, "DEFAULT", False, 2651837440),
    ("1b", 2048, 8, 59.86, 14, 4, 448, "DEFAULT", False, 1315950592))]


# Llama 3 405B (Dubey et al. 2024, "The Llama 3 Herd of Models", Table 3): its Table 4 layouts are
# rows of the test table (tests/budgetdsl/published_runs.yaml). Here: the shape the Llama 3.1 model
# card's GPU-hours are planned with, on the 16K-GPU layout (TP 8, PP 16; FSDP under a pipeline
# written zero: 1, as docs/cost-model.md explains; full recomputation).
_LLAMA3_405B = {"params": 405e9, "layers": 126, "d_model": 16384, "heads": 128, "seq_len": 8192,
                "vocab": 128256}
_LLAMA3_16K = {"gpus": 16384, "tensor_parallel": 8, "pipeline_parallel": 16, "zero": 1, "sequence_parallel": True,
               "recompute": "full"}


def _llama31(size: str, model: dict[str, Any], mfu: float, gpu_hours: float, tokens: float,
             layout: dict[str, Any]) -> dict[str, Any]:
    """Declared: the model card's H100-80GB GPU-hours against the tokens at a published MFU (the
    layout only places the run; the declared GPU-hours do not depend on it)."""
    return {"name": f"Llama 3.1 {size}, GPU-hours at MFU {mfu:g}", "mode": "declared", "convention": "palm",
            "source": "meta-llama/llama-models, models/llama3_1/MODEL_CARD.md (training time, GPU hours)",
            "model": model, "hardware": {"gpu": "H100-SXM5-80GB", "mfu": mfu, **layout},
            "batch_sequences": 2048 if size == "405B" else 1024, "tokens": tokens,
            "published": {"gpu_hours": gpu_hours}}


def _bloom_gpu_hours() -> dict[str, Any]:
    """BLOOM's two published figures against each other: ~150 TFLOP/s per GPU (Megatron-DeepSpeed's
    count, the test's BLOOM-176B row; section 3.4) over the 366B tokens trained, and the 1,082,990
    compute hours the paper gives for the 3.5-month run (Le Scao et al. 2022)."""
    import yaml

    bloom = next(r for r in _numbers(yaml.safe_load(TABLE.read_text()))["runs"] if r["name"] == "BLOOM-176B")
    return {**bloom, "name": "BLOOM-176B, GPU-hours at 150 TFLOP/s", "mode": "declared",
            "source": "Le Scao et al. 2022 (BLOOM): ~150 TFLOP/s per GPU (section 3.4), 366B tokens, "
                      "1,082,990 compute hours",
            "tflops_per_gpu": 150, "tokens": 366e9, "published": {"gpu_hours": 1082990}}


# Published layouts outside the test, shown in the docs as they come out (misses included):
# Megatron-Turing NLG 530B (DeepSpeed + Megatron, A100 40GB) on 280/350/420 DGX A100 nodes;
# the Llama 3.1 model card's GPU-hours at the 405B's published MFU
# (41 %, its 16K-GPU layout; none is published for 8B and 70B: their shapes are Table 3's, with the
# released configs' parameter counts 8.03B and 70.6B).
OTHER_ROWS = [_mtnlg(2240, 126), _mtnlg(2800, 121), _mtnlg(3360, 113),
              _bloom_gpu_hours(),
              _llama31("405B", dict(_LLAMA3_405B), 0.41, 30.84e6, 15.6e12, dict(_LLAMA3_16K)),
              _llama31("70B", {"params": 70.6e9, "layers": 80, "d_model": 8192, "heads": 64, "seq_len": 8192,
                               "vocab": 128256}, 0.41, 7.0e6, 15e12,
                       {"gpus": 1024, "tensor_parallel": 8, "zero": 3}),
              _llama31("8B", {"params": 8.03e9, "layers": 32, "d_model": 4096, "heads": 32, "seq_len": 8192,
                              "vocab": 128256}, 0.41, 1.46e6, 15e12, {"gpus": 1024, "zero": 3})]


def main(argv: list[str]) -> int:
    if "--fit" in argv:
        print(f"A100 kernel efficiency (Narayanan et al. 2021 Table 1, geometric mean): {fit_efficiency():.4f}")
        print(f"H100 kernel efficiency (MosaicML llm-foundry H100 BF16, geometric mean): "
              f"{fit_efficiency(MOSAIC_H100):.4f}")
        return 0
    table = load_rows()
    if "--plans" in argv:
        where = pathlib.Path(argv[argv.index("--plans") + 1])
        for path in write_plans(where, table["runs"] + OTHER_ROWS):
            print(path)
        return 0
    results = [evaluate(r) for r in table["runs"]]
    extra = [evaluate(r) for r in TABLE1_ALL if r["name"] not in {x.name for x in results}]
    extra += [evaluate(r) for r in OTHER_ROWS + MOSAIC_H100 + MOSAIC_A100]
    for res in results + extra:
        fmt = ",.3f" if res.unit == "MFU" else ",.1f"
        print(f"{res.name:16s} {res.mode:9s} budgetdsl {res.value:12{fmt}} published {res.published:12{fmt}} "
              f"{res.unit:12s} {res.error:+6.1%}  MFU {res.mfu:.3f} HFU {res.hfu:.3f} micro {res.micro_batch} "
              f"mem {res.memory / 2**30:5.1f} GiB{'' if res.fits else ' DOES NOT FIT'}")
    modern = [res for res, row in zip(results, table["runs"]) if row.get("modern")]
    median, within = modern_summary(modern)
    print(f"modern H100 rows: {len(modern)}, median |error| {median:.1%}, {within} within "
          f"{table['tolerance_predicted']:.0%}")
    if "--markdown" in argv:
        sys.path.insert(0, str(REPO / "bench"))
        from published_runs_doc import write_markdown

        write_markdown(table, results, extra)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
