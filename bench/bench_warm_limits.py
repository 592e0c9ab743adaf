"""Warm solves with a new limit each, for an instruction count (not a timed test).

`python bench/bench_warm_limits.py N`: `plans/minimal.yaml` with every layout key auto, solved once
cold, then N times in the same `SolveCache`, each with a new `budget.gpu_hours` (1e6 + k), as
`bench/bench_plan.py`'s "new gpu_hours limit each solve" line. Under callgrind the instructions per
warm solve are (count at N − count at 0) / N, deterministic where the CPU time of a shared machine
is not:

    PYTHONHASHSEED=0 valgrind --tool=callgrind python bench/bench_warm_limits.py 200   # and 0

Run it with the tree to measure first on PYTHONPATH (it imports `budgetdsl` from there, else from
this checkout).
"""

from __future__ import annotations

import pathlib
import sys
import time

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.append(str(REPO))  # after PYTHONPATH: an A/B measures the tree it names

LAYOUT_KEYS = ("tensor_parallel", "pipeline_parallel", "zero", "recompute")


def main() -> None:
    from budgetdsl.plan.loader import load_plan
    from budgetdsl.solve.solver import SolveCache, solve

    n = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    plan = load_plan(REPO / "plans/minimal.yaml")
    hw = plan.hardware.model_copy(update={k: "auto" for k in LAYOUT_KEYS})
    auto = plan.model_copy(update={"hardware": hw})
    cache = SolveCache()
    solve(auto, cache)
    t = time.process_time()
    for k in range(n):
        solve(auto.model_copy(update={"budget": auto.budget.model_copy(update={"gpu_hours": 1e6 + k})}), cache)
    cpu = time.process_time() - t
    print(f"warm      {n} solves of plans/minimal.yaml (every layout key auto), a new gpu_hours each: {cpu:.2f} s CPU"
          + (f", {n / cpu:,.0f} solves/CPU-s" if n and cpu > 0 else ""))


if __name__ == "__main__":
    main()
