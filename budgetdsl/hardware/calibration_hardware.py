"""What a calibration's hardware profile says about the plan's kernel efficiency.

A calibration records its proxy's median step and FLOPs per token (6N + 12·L·d·s, PaLM appendix
B), hence the model FLOP/s its device reached. On the plan's GPU that is a lower bound on the
fraction of peak the cost model assumes for matmuls (`kernel_efficiency`): a small proxy keeps the
tensor cores less busy, and its step includes the optimizer. This module only reads and words it;
a plan that trusts it declares `hardware.kernel_efficiency`. No torch, no numpy: the planner imports it.
"""

from __future__ import annotations

from typing import Any

from budgetdsl.hardware.gpus import find_preset


def achieved_flops_per_device(cal: Any) -> float | None:
    """Model FLOP/s per device of the calibration's training step; None when the file lacks the
    throughput or the FLOPs per token (a factory model)."""
    hw = getattr(cal, "hardware", None)
    prov = getattr(cal, "provenance", None)
    if hw is None or prov is None or not hw.tokens_per_s or not prov.model.flops_per_token:
        return None
    return hw.tokens_per_s * prov.model.flops_per_token / max(hw.world_size, 1)


def same_part(device_name: str, preset_name: str) -> bool:
    """`NVIDIA H100 80GB HBM3` is an `H100-SXM5-80GB`: the preset's family (its first segment)
    appears in the device's name."""
    family = preset_name.split("-")[0].upper()
    return len(family) >= 3 and family in device_name.upper().replace("-", " ").split()


def kernel_evidence(plan: Any, cal: Any, name: str) -> str | None:
    """One report note, or None when the calibration measured no throughput."""
    flops = achieved_flops_per_device(cal)
    if flops is None:
        return None
    hw = cal.hardware
    shapes = cal.provenance.model.config
    shape = (f" (d_model {shapes['n_embd']}, {shapes['n_layer']} layers, {shapes['block_size']}-token sequences)"
             if {"n_embd", "n_layer", "block_size"} <= set(shapes) else "")
    measured = f"calibration {name} measured {flops / 1e12:.3g} TFLOP/s per device on {hw.device_name}{shape}"
    gpu = getattr(plan.hardware, "gpu", None)
    preset = find_preset(gpu) if gpu else None
    if hw.device != "cuda" or preset is None or not same_part(hw.device_name, preset.name):
        target = preset.name if preset is not None else "the plan's GPU"
        return f"{measured}: not {target}, so no evidence for its kernel efficiency"
    fraction = flops / preset.peak_flops
    assumed = (f"; the cost model's kernel efficiency for {preset.name} is {preset.kernel_efficiency:.0%}"
               if preset.kernel_efficiency else "")
    return (f"{measured} = {fraction:.1%} of the {preset.name} dense peak, a lower bound for full-size "
            f"layers{assumed}")
