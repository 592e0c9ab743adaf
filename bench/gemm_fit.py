"""Fit the GEMM-shape curves of budgetdsl.cost.gemm_shape to OpenXLA's measured GEMM tables (not a
test): `python bench/gemm_fit.py`.

Reads tests/fixtures/xla-matmul/matmul_interpolator_data.h (vendored unmodified; its README says
from where), takes each chip's bf16 entries (a batch of b GEMMs of M×K by K×N counts as one of
b·M rows: the tables' batched and unbatched shapes of equal b·M agree within a few per cent), and
fits 1/η = c∞ + c_k/K + c_a/(M·N) + c_t/(M·N·K) by linear least squares weighted to relative
error. Prints each chip's constants, as `gemm_shape.GemmCurve` takes them, and the fit's error on
every shape and on training-sized ones (M ≥ 2,048, N and K ≥ 512).
"""

from __future__ import annotations

import math
import pathlib
import re
import sys

REPO = pathlib.Path(__file__).resolve().parents[1]
TABLE = REPO / "tests/fixtures/xla-matmul/matmul_interpolator_data.h"
# the tables' chips and the dense bf16 peaks their FLOP/s are shares of (budgetdsl.hardware.gpus)
CHIPS = {"sm_90": ("HOPPER", "H100-SXM5-80GB"), "sm_100_B200": ("BLACKWELL", "B200-SXM-180GB")}


def read_table(path: pathlib.Path = TABLE) -> dict[str, list[tuple[int, int, int, float]]]:
    """Each chip's (b·M, N, K, bf16 FLOP/s) entries."""
    text = path.read_text()
    out: dict[str, list[tuple[int, int, int, float]]] = {}
    for chip in re.finditer(r'key: "(sm_[^"]*)"\s*value \{(.*?)\n    \}\n  \}', text, re.S):
        rows = out.setdefault(chip.group(1), [])
        for e in re.finditer(r"entries \{\s*b: (\d+)\s*m: (\d+)\s*n: (\d+)\s*k: (\d+)\s*(.*?)\n      \}",
                             chip.group(2), re.S):
            b, m, n, k = (int(x) for x in e.groups()[:4])
            flops = re.search(r'flops \{ key: "bf16xbf16->bf16" value: (\d+) \}', e.group(5))
            if flops:
                rows.append((b * m, n, k, float(flops.group(1))))
    return out


def fit(rows: list[tuple[int, int, int, float]], peak: float) -> tuple[float, float, float, float]:
    """(c∞, c_k, c_a, c_t) of 1/η over `rows`, least squares on the relative error of 1/η."""
    import numpy as np

    m, n, k, flops = (np.array(c, dtype=float) for c in zip(*rows))
    eta = flops / peak
    x = np.stack([np.ones_like(m), 1.0 / k, 1.0 / (m * n), 1.0 / (m * n * k)], axis=1)
    coef, *_ = np.linalg.lstsq(x * eta[:, None], np.ones_like(eta), rcond=None)  # (1/η)·η = 1
    return tuple(float(c) for c in coef)  # type: ignore[return-value]


def errors(rows: list[tuple[int, int, int, float]], peak: float, coef: tuple[float, ...],
           training: bool = False) -> list[float]:
    """log(predicted/measured η) of each entry (training: M ≥ 2,048 and N, K ≥ 512 only)."""
    c_inf, c_k, c_a, c_t = coef
    out = []
    for m, n, k, flops in rows:
        if training and (m < 2048 or n < 512 or k < 512):
            continue
        out.append(math.log(1.0 / (c_inf + c_k / k + c_a / (m * n) + c_t / (m * n * k)) / (flops / peak)))
    return out


def fits(table: dict | None = None) -> dict[str, tuple[float, float, float, float]]:
    """Each table chip's fitted constants (what gemm_curves holds); `table`: `read_table()`'s."""
    sys.path.insert(0, str(REPO))
    from budgetdsl.hardware.gpus import PRESETS

    table = read_table() if table is None else table
    return {chip: fit(table[chip], PRESETS[preset].peak_flops) for chip, (_, preset) in CHIPS.items()}


def main() -> int:
    sys.path.insert(0, str(REPO))
    from budgetdsl.hardware.gpus import PRESETS

    table = read_table()
    for chip, coef in fits(table).items():
        name, preset = CHIPS[chip]
        peak = PRESETS[preset].peak_flops
        every, train = errors(table[chip], peak, coef), errors(table[chip], peak, coef, training=True)
        rms = math.sqrt(sum(e * e for e in every) / len(every))
        rms_t = math.sqrt(sum(e * e for e in train) / len(train))
        print(f"{name} ({chip}, {len(table[chip])} shapes, peak {peak / 1e12:.0f} TFLOP/s): "
              f"c_inf {coef[0]:.4f} c_k {coef[1]:.2f} c_a {coef[2]:.4e} c_t {coef[3]:.4e}; large-GEMM limit "
              f"{1 / coef[0]:.3f} of peak; error rms {rms:.1%} (all), {rms_t:.1%} (training shapes, "
              f"{len(train)}), worst {max(abs(e) for e in train):.1%}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
