"""Benchmark `budgetdsl plan` and `budgetdsl sweep` (not a timed test): `python bench/bench_plan.py`.

Prints from one run: a bare Python start and `import budgetdsl.cli`; each example plan cold, as a
whole process, and the mixture-of-experts example with its layout searched (issue 24: every key
auto); warm solves per CPU-second in one process with one `SolveCache` (a pinned layout and a full
search, the same plan again and with a new gpu_hours limit each solve); a 100 × 100 sweep through
the command line.
Each figure beside the load average, its CPU time and its ratio to the bare-Python start, so runs
on a loaded machine compare. Child processes read bytecode from a cache, as an installed package.
"""

from __future__ import annotations

import os
import pathlib
import resource
import statistics
import subprocess
import sys
import tempfile
import time

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

LAYOUT_KEYS = ("tensor_parallel", "pipeline_parallel", "zero", "recompute")


# Child processes run as an installed user's do: bytecode compiled once and read from a cache
# (a PYTHONDONTWRITEBYTECODE environment would make every run compile budgetdsl from source, a
# large share of a cold `budgetdsl plan`). The cache lives in a temporary folder, so the
# checkout stays clean; each command runs once unmeasured first to fill it.
PYCACHE = tempfile.mkdtemp(prefix="budgetdsl-bench-pycache-")
ENV = {**{k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}, "PYTHONPYCACHEPREFIX": PYCACHE}


def cpu_children() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def proc(args: list[str], runs: int) -> tuple[float, float]:
    """(median wall clock, median CPU time) of `args` as a whole process, after one warm-up run."""
    subprocess.run(args, cwd=REPO, check=False, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=ENV)
    walls, cpus = [], []
    for _ in range(runs):
        c, t = cpu_children(), time.perf_counter()
        subprocess.run(args, cwd=REPO, check=False, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=ENV)
        walls.append(time.perf_counter() - t)
        cpus.append(cpu_children() - c)
    return statistics.median(walls), statistics.median(cpus)


def rate(fn, seconds: float = 2.0) -> float:
    """Calls of `fn` per second of this process's CPU time: on a shared machine the wall clock
    counts the other jobs too."""
    n, t = 0, time.process_time()
    while time.process_time() - t < seconds:
        fn()
        n += 1
    return n / (time.process_time() - t)


def with_layout(plan, value):
    """`plan` with every layout key set to `value` (a dict of key -> value, or 'auto')."""
    hw = plan.hardware.model_copy(update={k: (value if value == "auto" else value[k]) for k in LAYOUT_KEYS})
    run = plan.run
    if value == "auto":
        run = (run.model_copy(update={"micro_batch": "auto"}) if run is not None else None)
    return plan.model_copy(update={"hardware": hw, "run": run})


def main() -> None:
    from budgetdsl.plan.loader import load_plan
    from budgetdsl.solve.solver import SolveCache, solve

    runs = int(os.environ.get("BENCH_RUNS", "5"))
    load = os.getloadavg()
    print(f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} on {os.cpu_count()} CPUs, "
          f"python {sys.version.split()[0]}")
    base, _ = proc([sys.executable, "-c", "pass"], runs)
    imp, _ = proc([sys.executable, "-c", "import budgetdsl.cli"], runs)
    print(f"baseline  python -c pass: {base * 1000:.0f} ms; import budgetdsl.cli: {imp * 1000:.0f} ms "
          f"({imp / base:.1f}x); bytecode cached, as installed")
    for path in sorted((REPO / "plans").glob("*.yaml")):
        rel = path.relative_to(REPO)
        t, cpu = proc([sys.executable, "-m", "budgetdsl", "plan", str(rel)], runs)
        print(f"cold      budgetdsl plan {rel}: {t * 1000:.0f} ms wall, {cpu * 1000:.0f} ms CPU "
              f"({t / base:.1f}x python -c pass)")

    # the mixture-of-experts example with the layout searched: tensor, pipeline, ZeRO and
    # recomputation auto (expert parallelism as the plan pins it); then every layout key that
    # accepts auto (expert, context and sequence parallelism, virtual stages, recomputed layers)
    # and run.micro_batch auto: issue 24's bound is 0.5 s cold
    import yaml

    from budgetdsl.plan.model import PARALLEL_KEYS

    folder = pathlib.Path(tempfile.mkdtemp(prefix="budgetdsl-bench-"))
    for label, keys, name in (("tensor, pipeline, ZeRO, recompute auto", LAYOUT_KEYS, "mixtral-8x7b-auto.yaml"),
                              ("every layout key and micro_batch auto", LAYOUT_KEYS + PARALLEL_KEYS,
                               "mixtral-8x7b-every-auto.yaml")):
        doc = yaml.safe_load((REPO / "plans/mixtral-8x7b.yaml").read_text())
        doc["hardware"].update({k: "auto" for k in keys})
        if keys != LAYOUT_KEYS:
            doc.setdefault("run", {})["micro_batch"] = "auto"
        moe = folder / name
        moe.write_text(yaml.safe_dump(doc, sort_keys=False))
        t, cpu = proc([sys.executable, "-m", "budgetdsl", "plan", str(moe)], runs)
        print(f"cold      budgetdsl plan plans/mixtral-8x7b.yaml, {label}: {t * 1000:.0f} ms wall, "
              f"{cpu * 1000:.0f} ms CPU ({t / base:.1f}x python -c pass)")

    plan = load_plan(REPO / "plans/minimal.yaml")
    first = solve(plan)
    fixed = with_layout(plan, {"tensor_parallel": first.batch.tensor_parallel,
                               "pipeline_parallel": first.batch.pipeline_parallel, "zero": first.batch.zero,
                               "recompute": first.batch.recompute})
    auto = with_layout(plan, "auto")
    for label, p in (("fixed layout", fixed), ("full search (every layout key auto)", auto)):
        cache = SolveCache()
        t = time.perf_counter()
        solve(p, cache)
        t_first = time.perf_counter() - t
        r = rate(lambda p=p, cache=cache: solve(p, cache))
        print(f"warm      {r:,.0f} solves/CPU-s ({1e6 / r:.0f} µs) — plans/minimal.yaml, {label}, the same plan "
              f"again ({'the search replayed from ' if p is auto else ''}placements kept across solves); first solve "
              f"{t_first * 1000:.0f} ms; {r * base:.1f} solves per python -c pass")
        # a new GPU-hours limit each solve (a sweep's rows, the TUI's edits)
        limits = iter(range(10**9))

        def new_limit(p=p, limits=limits):
            return p.model_copy(update={"budget": p.budget.model_copy(update={"gpu_hours": 1e6 + next(limits)})})
        fresh = rate(lambda new_limit=new_limit, cache=cache: solve(new_limit(), cache))
        print(f"warm      {fresh:,.0f} solves/CPU-s ({1e6 / fresh:.0f} µs) — the same, a new gpu_hours limit each "
              f"solve ({'the search replayed' if p is auto else 'placed again'})")
        if p is not auto:  # no search to replay: placing again is what a new limit costs
            continue

        def afresh(cache=cache, new_limit=new_limit):
            cache.forget_limits()  # what depends on the limits: placements, picks, the replay's records
            solve(new_limit(), cache)
        cold_limits = rate(afresh)
        print(f"warm      {cold_limits:,.0f} solves/CPU-s ({1e6 / cold_limits:.0f} µs) — the same, nothing kept that "
              f"depends on the limits (searched afresh each solve; the replay: {fresh / cold_limits:.2f}x)")

    deadlines = ",".join(f"{d}d" for d in range(5, 105))
    b_crits = ",".join(f"{b}k" for b in range(100, 10_100, 100))
    args = [sys.executable, "-m", "budgetdsl", "sweep", "plans/minimal.yaml", "--format", "csv",
            "--set", f"budget.deadline={deadlines}", "--set", f"noise.b_crit={b_crits}"]
    outputs = {}
    # warm-up: one row through the kernel (BUDGETDSL_SWEEP_SCALAR=0: a sweep of fewer than 32 rows
    # takes solve() and would leave the kernel's modules, numpy's too, to be compiled in the run
    # measured) fills the bytecode cache of the sweep's modules
    subprocess.run([*args[:-4], "--set", "budget.deadline=5d"], cwd=REPO, check=False, capture_output=True,
                   env={**ENV, "BUDGETDSL_SWEEP_SCALAR": "0"})
    def sweep_run(cmd: list[str], env: dict, n: int) -> tuple[float, float, bytes]:
        """(median wall clock, median CPU time, stdout) of `n` runs of a sweep command."""
        walls, cpus, out = [], [], b""
        for _ in range(n):
            c, t = cpu_children(), time.perf_counter()
            done = subprocess.run(cmd, cwd=REPO, check=False, capture_output=True, env={**ENV, **env})
            walls.append(time.perf_counter() - t)
            cpus.append(cpu_children() - c)  # less load-bound than wall
            out = out or done.stdout
        return statistics.median(walls), statistics.median(cpus), out

    for label, env, n in (("kernel", {}, 5), ("scalar", {"BUDGETDSL_SWEEP_SCALAR": "1"}, 1)):
        wall, cpu, out = sweep_run(args, env, n)
        outputs[label] = (wall, out)
        print(f"sweep     budgetdsl sweep plans/minimal.yaml, 100 deadlines × 100 B_crit = 10,000 rows, "
              f"{label} path{' (BUDGETDSL_SWEEP_SCALAR=1, solve() per row)' if env else ''}: {wall:.2f} s "
              f"wall, {cpu:.2f} s CPU ({wall / base:.0f}x python -c pass){f', median of {n}' if n > 1 else ''}")
    # the kernel's share: a row it cannot decide exactly goes to solve(), ~100x its cost (a sweep
    # that slows without changing its answers has lost rows to that path)
    from budgetdsl.plan.loader import read_merged
    from budgetdsl.solve.sweep import iter_sweep, parse_setting
    rows = list(iter_sweep(read_merged(REPO / "plans" / "minimal.yaml"), [parse_setting(a) for a in args[-3::2]],
                           full=False))
    print(f"sweep     rows the kernel decided itself: {sum(r.solution is None for r in rows):,} of {len(rows):,}")
    (tk, out_k), (ts, out_s) = outputs["kernel"], outputs["scalar"]
    print(f"sweep     kernel / scalar: {ts / tk:.0f}x faster; CSV output identical: "
          f"{'yes' if out_k == out_s and out_k else 'NO'}")
    # near the limits: deadlines of hours make some rows infeasible; the kernel diagnoses them as
    # solve() does (sweep_kernel._diagnosed): those rows' cost, kernel path only
    hours = ",".join(f"{h}h" for h in range(1, 101))
    near = [*args[:-3], f"budget.deadline={hours}", *args[-2:]]
    t, cpu, out = sweep_run(near, {}, 5)
    infeasible = sum(line.split(b",")[2] == b"False" for line in out.splitlines()[1:])
    print(f"sweep     the same with 100 deadlines of 1-100 hours, kernel path: {t:.2f} s wall, {cpu:.2f} s CPU, "
          f"median of 5; {infeasible} infeasible rows, diagnosed in the kernel")
    load = os.getloadavg()
    print(f"load average at the end {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")


if __name__ == "__main__":
    main()
