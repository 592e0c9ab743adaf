"""Run llm-analysis (github.com/cli99/llm-analysis) on the published rows: JSON in on stdin, JSON
out on stdout, with the interpreter of whatever venv holds llm-analysis (not a budgetdsl dependency);
bench/published_runs.py --markdown calls it. Input item: {name, model: {layers, heads, d_model, vocab,
seq_len, kv_heads?, ffn_hidden?}, micro_batch, global_batch, tokens, recompute, zero, tp, pp, gpus,
flash_attention, sequence_parallel, flops_efficiency, gpu_name (llm-analysis's GPU config)}.
Output item: {name, gpu_hours, latency_per_iter, weights,
grads, optimizer, activations, total, params} (bytes per GPU) or {name, error}.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import tempfile


def run(item: dict) -> dict:
    from llm_analysis.analysis import train

    m = item["model"]
    cfg = {"name": item["name"].replace(" ", "_"), "num_layers": m["layers"], "n_head": m["heads"],
           "hidden_dim": m["d_model"], "vocab_size": m["vocab"], "max_seq_len": m["seq_len"]}
    if m.get("kv_heads"):  # grouped-query attention and the MLP width, where the row gives them
        cfg["num_key_value_heads"] = m["kv_heads"]
    if m.get("ffn_hidden") and m["ffn_hidden"] % m["d_model"] == 0:  # llm-analysis takes whole multiples of d only
        cfg["ffn_embed_dim"] = m["ffn_hidden"]
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, cfg["name"] + ".json")
        with open(path, "w") as fh:
            json.dump(cfg, fh)
        s = train(model_name=path, gpu_name=item.get("gpu_name", "a100-sxm-80gb"), dtype_name="w16a16e16",
                  log_level="ERROR",
                  batch_size_per_gpu=item["micro_batch"], global_batch_size=item["global_batch"],
                  seq_len=m["seq_len"], total_num_tokens=item["tokens"],
                  activation_recomputation={"none": 0, "selective": 1, "full": 2}[item["recompute"]],
                  ds_zero=item["zero"], tp_size=item["tp"], pp_size=item["pp"], total_num_gpus=item["gpus"],
                  sp_size=item["tp"] if item["sequence_parallel"] else 1,
                  flash_attn=item["flash_attention"], flops_efficiency=item["flops_efficiency"])
    return {"name": item["name"], "gpu_hours": s["gpu_hours"], "latency_per_iter": s["latency_per_iter"],
            "weights": s["weight_memory_per_gpu"], "grads": s["gradient_memory_per_gpu"],
            "optimizer": s["optimizer_state_memory_per_gpu"], "activations": s["activation_memory_per_gpu"],
            "total": s["(weight+op_state+grad+act)_memory_per_gpu"], "params": s["num_params_total"]}


def main() -> int:
    logging.disable(logging.CRITICAL)
    out = []
    for item in json.load(sys.stdin):
        try:
            out.append(run(item))
        except Exception as exc:  # noqa: BLE001 - one row's failure is reported, not fatal
            out.append({"name": item["name"], "error": f"{type(exc).__name__}: {exc}"[:200]})
    json.dump(out, sys.stdout)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
