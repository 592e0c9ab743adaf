"""Benchmark `budgetdsl plan` (not a timed test): run `python bench/bench_plan.py [PLAN]`.

Prints three figures for the README's performance section:
  cold   `budgetdsl plan PLAN` as a whole process (python -m budgetdsl), median of several runs
  warm   solves per second in one process (`solve(plan)` on a loaded plan)
  sweep  a 10,000-point sweep of the deadline (solve each variant), total seconds
and, for the record, the cost of the sympy path the emitted closed forms avoid (import + derive +
lambdify in a fresh process). Aims (issue 3): cold ≤ 1 s, ≥ 10,000 solves/s warm.
"""

from __future__ import annotations

import os
import pathlib
import statistics
import subprocess
import sys
import time

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def cold(plan: str, runs: int = 7) -> float:
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        subprocess.run([sys.executable, "-m", "budgetdsl", "plan", plan], cwd=REPO, check=False,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def sympy_path() -> float:
    code = "import budgetdsl.closed_forms as c; c.lambdified()"
    t = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], cwd=REPO, check=True)
    return time.perf_counter() - t


def main() -> None:
    from budgetdsl.plan_loader import load_plan
    from budgetdsl.solver import solve

    plan_path = sys.argv[1] if len(sys.argv) > 1 else "plans/llama2-7b.yaml"
    plan = load_plan(REPO / plan_path)
    optimizing = plan.model_copy(update={"run": None})
    print(f"cold  budgetdsl plan {plan_path}: {cold(plan_path) * 1000:.0f} ms (median of 7 processes)")
    for label, p in (("pinned (evaluates run: and the objective's choice)", plan),
                     ("optimizing (run: removed)", optimizing)):
        solve(p)
        n, t = 0, time.perf_counter()
        while time.perf_counter() - t < 2.0:
            solve(p)
            n += 1
        rate = n / (time.perf_counter() - t)
        print(f"warm  {rate:,.0f} solves/s, {1e6 / rate:.0f} µs per solve — {label}")
    deadline = optimizing.budget.deadline or 21 * 86400.0
    variants = [optimizing.model_copy(update={"budget": optimizing.budget.model_copy(
        update={"deadline": deadline * (0.5 + i / 10_000)})}) for i in range(10_000)]
    t = time.perf_counter()
    feasible = sum(solve(v).feasible for v in variants)
    print(f"sweep 10,000 deadlines ({0.5 * deadline / 86400:.1f}–{1.5 * deadline / 86400:.1f} days): "
          f"{time.perf_counter() - t:.2f} s, {feasible} feasible")
    print(f"sympy path (import, derive, lambdify; avoided by the emitted module): {sympy_path() * 1000:.0f} ms")
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs")


if __name__ == "__main__":
    main()
