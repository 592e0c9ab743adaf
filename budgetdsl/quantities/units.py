"""Physical dimensions and the unit vocabulary of plan files.

A small, tested table instead of pint, whose registry is slow to build (`budgetdsl check` runs in
pre-commit hooks). A quantity is a float in base units (s, byte, FLOP) with a vector of exponents
over (s, byte, FLOP); a count has none. The conventions, also in the README, head `_build_units`.
"""

from __future__ import annotations

from dataclasses import dataclass

# Exponents of (second, byte, FLOP).
Dim = tuple[int, int, int]

DIMENSIONLESS: Dim = (0, 0, 0)
TIME: Dim = (1, 0, 0)
DATA: Dim = (0, 1, 0)
FLOP: Dim = (0, 0, 1)
BANDWIDTH: Dim = (-1, 1, 0)
FLOP_RATE: Dim = (-1, 0, 1)

DIM_NAMES: dict[Dim, str] = {
    DIMENSIONLESS: "a plain number",
    TIME: "a duration",
    DATA: "a data size",
    FLOP: "a FLOP count",
    BANDWIDTH: "a bandwidth",
    FLOP_RATE: "a FLOP rate",
}

#: What a plain number means for each dimension, and an example, for messages and the schema.
BASE_UNIT: dict[Dim, str] = {
    DIMENSIONLESS: "",
    TIME: "s",
    DATA: "bytes",
    FLOP: "FLOP",
    BANDWIDTH: "bytes/s",
    FLOP_RATE: "FLOP/s",
}
EXAMPLES: dict[Dim, str] = {
    DIMENSIONLESS: "4M",
    TIME: "21 days",
    DATA: "80 GiB",
    FLOP: "1.2e23",
    BANDWIDTH: "200 Gb/s",
    FLOP_RATE: "312 TFLOP/s",
}


def dim_name(dim: Dim) -> str:
    if dim in DIM_NAMES:
        return DIM_NAMES[dim]
    parts = [f"{u}^{e}" if e != 1 else u for u, e in zip(("s", "byte", "FLOP"), dim) if e]
    return "a quantity in " + "·".join(parts)


@dataclass(frozen=True, slots=True)
class Unit:
    factor: float
    dim: Dim


def _build_units() -> dict[str, Unit]:
    """The unit table. Conventions:
    - decimal prefixes for bytes and bits (`GB` = 1e9 bytes, `Gb` = 1e9 bits), binary ones spelled
      out (`GiB` = 2**30 bytes);
    - counts take `k`/`K`, `M`, `B`/`G`, `T` (thousand … trillion) and binary `Ki`, `Mi`, `Gi`, `Ti`
      (`4Mi` tokens = 1024 sequences of 4096); `B` alone is *billion*, never bytes;
    - `FLOP` counts operations, `FLOP/s` (or `FLOPS`) is a rate; `%` is 0.01.
    """
    units: dict[str, Unit] = {}

    def add(names: str, factor: float, dim: Dim) -> None:
        for name in names.split():
            assert name not in units, name
            units[name] = Unit(factor, dim)

    # Time.
    add("s sec secs second seconds", 1.0, TIME)
    add("ms", 1e-3, TIME)
    add("min mins minute minutes", 60.0, TIME)
    add("h hr hrs hour hours", 3600.0, TIME)
    add("d day days", 86400.0, TIME)
    add("w wk wks week weeks", 7 * 86400.0, TIME)
    # Counts.
    add("k K thousand", 1e3, DIMENSIONLESS)
    add("M million", 1e6, DIMENSIONLESS)
    add("B G billion", 1e9, DIMENSIONLESS)
    add("T trillion", 1e12, DIMENSIONLESS)
    add("Ki", 2.0**10, DIMENSIONLESS)  # binary counts: 4Mi tokens = 4,194,304 = 1024 x 4096
    add("Mi", 2.0**20, DIMENSIONLESS)
    add("Gi", 2.0**30, DIMENSIONLESS)
    add("Ti", 2.0**40, DIMENSIONLESS)
    add("%", 1e-2, DIMENSIONLESS)
    # Data: bytes (decimal and binary prefixes) and bits.
    add("byte bytes", 1.0, DATA)
    add("bit bits", 0.125, DATA)
    decimal = {"k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18}
    for prefix, f in decimal.items():
        add(f"{prefix}B", f, DATA)
        add(f"{prefix}b {prefix}bit", f / 8, DATA)
        add(f"{prefix}bps", f / 8, BANDWIDTH)
    for i, prefix in enumerate(("Ki", "Mi", "Gi", "Ti", "Pi"), start=1):
        add(f"{prefix}B", float(2 ** (10 * i)), DATA)
    # Floating-point operations: FLOP (count) and FLOPS (rate), SI prefixes up to yotta.
    flop_prefixes = {"": 1.0, "k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15,
                     "E": 1e18, "Z": 1e21, "Y": 1e24}
    for prefix, f in flop_prefixes.items():
        add(f"{prefix}FLOP {prefix}FLOPs {prefix}flop {prefix}flops", f, FLOP)
        add(f"{prefix}FLOPS", f, FLOP_RATE)
    return units


UNITS: dict[str, Unit] = _build_units()
