"""Benchmark: how fast `budgetdsl check` answers, as a pre-commit hook or CI step sees it.

Prints side by side from one run: a bare `python -c pass` start (the floor), cold
`budgetdsl check plans/*.yaml` as a whole process (median of runs), and 200 plan files checked in
one process, per file. Run: .venv/bin/python bench/bench_check.py
"""

from __future__ import annotations

import os
import pathlib
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

REPO = pathlib.Path(__file__).resolve().parents[1]
RUNS = 15
# As an installed package runs: bytecode compiled once and read from a cache (a temporary folder,
# so the checkout stays clean); the warm-up run of each command fills it (bench/bench_plan.py).
ENV = {**{k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"},
       "PYTHONPYCACHEPREFIX": tempfile.mkdtemp(prefix="budgetdsl-bench-pycache-")}


def wall(cmd: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, check=True, capture_output=True, cwd=REPO, env=ENV)
    return time.perf_counter() - start


def median_wall(cmd: list[str]) -> float:
    wall(cmd)  # warm the page cache and the bytecode cache
    return statistics.median(wall(cmd) for _ in range(RUNS))


def main() -> None:
    plans = sorted(str(p.relative_to(REPO)) for p in (REPO / "plans").glob("*.yaml"))
    floor = median_wall([sys.executable, "-c", "pass"])
    cold = median_wall([sys.executable, "-m", "budgetdsl", "check", "-q", *plans])
    with tempfile.TemporaryDirectory() as tmp:
        tmpdir = pathlib.Path(tmp)
        for i in range(200):
            shutil.copy(REPO / "plans" / "llama2-7b.yaml", tmpdir / f"plan{i:03}.yaml")
        # a copy, not a link: `extends` may not leave the plan's root (a link out of it is refused)
        shutil.copytree(REPO / "plans" / "base", tmpdir / "base")
        files = sorted(str(p) for p in tmpdir.glob("plan*.yaml"))
        many = median_wall([sys.executable, "-m", "budgetdsl", "check", "-q", *files])
    print(f"python -c pass (floor)                  {floor * 1000:8.1f} ms")
    print(f"budgetdsl check plans/*.yaml ({len(plans)} files) {cold * 1000:8.1f} ms  "
          f"({cold / floor:.1f}x the floor)")
    print(f"budgetdsl check 200 files, one process  {many * 1000:8.1f} ms  "
          f"({(many - floor) / 200 * 1000:.2f} ms per file above the floor)")


if __name__ == "__main__":
    main()
