"""Published training runs against budgetdsl (and llm-analysis): `python bench/published_runs.py`.

Reads tests/budgetdsl/published_runs.yaml (each run with its source and FLOP convention), plans
each with budgetdsl (the published global batch pinned, the micro-batch left to the tool) and
prints the comparison. Options:
  --markdown        write docs/published-runs.md (the table, and per-GPU memory beside
                    llm-analysis's when it is installed: pip install llm-analysis, in any venv —
                    it is not a dependency of budgetdsl)
  --fit             the A100 kernel efficiency that makes the predicted Narayanan et al. 2021
                    Table 1 rows' geometric-mean ratio 1 (how gpus.A100_EFFICIENCY was obtained)
The test tests/budgetdsl/test_published_runs.py runs the same rows.
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
    n, lay, d, s, v = m["params"], m["layers"], m["d_model"], m["seq_len"], m.get("vocab") or 0
    conv = row["convention"]
    if conv == "palm":
        return 6.0 * n + 12.0 * lay * d * s
    if conv == "megatron_hw":  # Narayanan et al. 2021 eq. 3, per token
        return 96.0 * lay * d * d * (1.0 + s / (6.0 * d) + v / (16.0 * lay * d))
    raise ValueError(f"unknown FLOP convention {conv!r}")


def make_plan(row: dict[str, Any], **hardware: Any):
    from budgetdsl.plan_model import Plan

    m = row["model"]
    seq = row["batch_sequences"]
    tokens = row.get("tokens") or 1000.0 * seq * m["seq_len"]
    hw = {**row["hardware"], **hardware}
    return Plan.model_validate({
        "name": row["name"], "model": m, "hardware": hw,
        "target": {"tokens": float(tokens), "at_batch": float(seq * m["seq_len"])},
        "noise": {"b_crit": float(seq * m["seq_len"])},
        "run": {"batch": float(seq * m["seq_len"])},
    })


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
    from budgetdsl.solver import solve

    plan = make_plan(row, **hardware)
    sol = solve(plan)
    tp = sol.throughput
    a = sol.assumptions
    memory = a["memory_at_micro_batch"].value - a["reserve_bytes"].value
    if row["mode"] == "declared":
        value, published, unit = sol.gpu_hours, row["published"]["gpu_hours"], "GPU-h"
    else:
        per_token_s = tp.step_time_s / sol.batch.tokens
        value = convention_flops_per_token(row) / per_token_s / sol.gpus / 1e12
        published, unit = row["published"]["tflops_per_gpu"], "TFLOP/s/GPU"
    return Result(row["name"], row["mode"], published, value, unit, tp.mfu, tp.hfu, sol.batch.micro_batch,
                  memory, sol.feasible and a["micro_batch_max"].value >= 1, sol)


def fit_efficiency() -> float:
    """Bisection on the A100 kernel efficiency: geometric mean of predicted/published over the
    Narayanan et al. 2021 Table 1 rows = 1. The table's other five rows are in TABLE1_ALL."""
    rows = TABLE1_ALL

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


# Published layouts outside the test, shown in the docs as they come out (misses included):
# Megatron-Turing NLG 530B (DeepSpeed + Megatron, A100 40GB) on 280/350/420 DGX A100 nodes.
OTHER_ROWS = [_mtnlg(2240, 126), _mtnlg(2800, 121), _mtnlg(3360, 113)]


def main(argv: list[str]) -> int:
    if "--fit" in argv:
        print(f"A100 kernel efficiency (Table 1, geometric mean): {fit_efficiency():.4f}")
        return 0
    table = load_rows()
    results = [evaluate(r) for r in table["runs"]]
    extra = [evaluate(r) for r in TABLE1_ALL if r["name"] not in {x.name for x in results}]
    extra += [evaluate(r) for r in OTHER_ROWS]
    for res in results + extra:
        print(f"{res.name:16s} {res.mode:9s} budgetdsl {res.value:12,.1f} published {res.published:12,.1f} "
              f"{res.unit:12s} {res.error:+6.1%}  MFU {res.mfu:.3f} HFU {res.hfu:.3f} micro {res.micro_batch} "
              f"mem {res.memory / 2**30:5.1f} GiB{'' if res.fits else ' DOES NOT FIT'}")
    if "--markdown" in argv:
        sys.path.insert(0, str(REPO / "bench"))
        from published_runs_doc import write_markdown

        write_markdown(table, results, extra)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
