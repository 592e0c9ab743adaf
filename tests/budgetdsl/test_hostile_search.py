"""Hostile plans for the layout search and the sweep (issue 13's new forms, the promise of issue 14):
no input crashes the tool (exit 0, 1 or 2 with located messages, never 3) or hangs it (work
bounded whatever the plan asks: a GPU range up to the cap of 10,000 counts with every layout key
`auto`, odd node sizes, shape extremes, every objective). A sweep's rows are identical on the
vectorized kernel and on the scalar path (BUDGETDSL_SWEEP_SCALAR=1), hostile values included.

The search's *speed* on these plans is a benchmark, not a timed test (timed tests flake on a
shared machine): `python bench/bench_search.py` prints the CPU seconds of each case below. The
tests here are a hang guard: every case ends, located or answered, within HANG_CPU_S.
"""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys
import textwrap

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
PLANS = REPO / "plans"
MINIMAL = (PLANS / "minimal.yaml").read_text()

# CPU seconds past which load + solve of one plan is a hang, whatever it asks (the search of a full
# GPU range included). The child process enforces it with a CPU timer. Before issue 13's search work
# several of these plans ran > 60 s; the slowest (step_overhead 1e10 on the full range, where no
# pair can be pruned) takes 17-23 s on a loaded 2-core machine since every collective pays its
# latency (bench/bench_search.py prints them all). A hang runs forever; a bound at the slowest case's
# own time flaked, as CPU time itself runs up to 1.5x on a loaded machine (shared caches, SMT).
HANG_CPU_S = 45.0
WALL_TIMEOUT_S = 120.0  # backstop only; the CPU timer ends a hanging child first

_CHILD = textwrap.dedent("""
    import pathlib, signal, sys, time
    from budgetdsl.plan.diagnostics import PlanError
    from budgetdsl.plan.loader import load_plan
    from budgetdsl.solve.solver import solve
    def over(*_):
        print(f"OVER {time.process_time() - t0:.2f}"); sys.stdout.flush(); raise SystemExit(9)
    signal.signal(signal.SIGVTALRM, over)
    t0 = time.process_time()
    signal.setitimer(signal.ITIMER_VIRTUAL, float(sys.argv[2]))
    try:
        sol = solve(load_plan(pathlib.Path(sys.argv[1])))
        outcome = "feasible" if sol.feasible else "infeasible"
    except PlanError as exc:
        outcome = "located " + exc.diagnostics[0].format()
    signal.setitimer(signal.ITIMER_VIRTUAL, 0)
    print(f"DONE {time.process_time() - t0:.2f} {outcome}")
""")


def plan_with(tmp_path: pathlib.Path, hardware: str = "", top: str = "", model: str = "",
              gpus: str = "64") -> pathlib.Path:
    """minimal.yaml with `gpus` replaced, lines added under hardware/model, and top-level lines."""
    text = MINIMAL.replace("  gpus: 64", f"  gpus: {gpus}" + "".join(f"\n  {h}" for h in hardware.split(";") if h))
    for m in filter(None, model.split(";")):
        key = m.split(":")[0]
        lines = [ln for ln in text.splitlines() if not ln.startswith(f"  {key}:")]
        text = "\n".join(lines).replace("model:", f"model:\n  {m}", 1) + "\n"
    text += "".join(f"{t}\n" for t in top.split(";") if t)
    path = tmp_path / "plans" / "hostile.yaml"
    path.parent.mkdir(exist_ok=True)
    path.write_text(text)
    return path


def solve_cpu(path: pathlib.Path, bound: float = HANG_CPU_S) -> tuple[str, float, str]:
    """('DONE' or 'OVER', CPU seconds, outcome) of load + solve in a fresh process."""
    p = subprocess.run([sys.executable, "-c", _CHILD, str(path), str(bound)], capture_output=True, text=True,
                       timeout=WALL_TIMEOUT_S, cwd=REPO)
    assert p.returncode in (0, 9), p.stderr[-2000:]  # a traceback is a crash
    word, cpu, *rest = p.stdout.split(" ", 2)
    return word, float(cpu), (rest[0].strip() if rest else "")


# -- the search: bounded work -------------------------------------------------------------------
# Each case: (id, plan_with's arguments, what it once cost). bench/bench_search.py reads this list.

SEARCH_CASES = [
    ("small-range", dict(gpus="{max: 64}"), "0.3 s"),
    # min_time on ranges of a thousand counts or so: the pick was re-chosen (a scan of the pool's
    # front) after every placed pair, > 4 s CPU each
    ("min_time-seq_len-512-max-1024", dict(gpus="{max: 1024}", model="seq_len: 512", top="objective: min_time"),
     "> 4 s"),
    ("min_time-8-2048-step-8", dict(gpus="{min: 8, max: 2048, step: 8}", top="objective: min_time"), "> 4 s"),
    # a realistic plan: seq_len 512 on {max: 1024}, balanced: 4.4 s
    ("seq_len-512-max-1024", dict(gpus="{max: 1024}", model="seq_len: 512"), "4.4 s"),
    # short sequences on a modest range: seq_len 128 (BERT-sized) on {max: 512}: > 30 s CPU while
    # objectives.Pool.pick re-ran the front over the whole pool after each placed pair
    ("seq_len-128-max-512", dict(gpus="{max: 512}", model="seq_len: 128"), "> 30 s"),
    ("balanced-max-10000", dict(gpus="{max: 10000}"), "5.4 s"),
    ("min_time-max-10000", dict(gpus="{max: 10000}", top="objective: min_time"), "> 60 s"),
    # an odd node size on the full range
    ("gpus_per_node-997", dict(gpus="{max: 10000}", hardware="gpus_per_node: 997"), "> 60 s"),
    # seq_len 1 on the full range
    ("seq_len-1", dict(gpus="{max: 10000}", model="seq_len: 1"), "> 60 s"),
    # a pinned run.batch with the layout searched on the full range
    ("pinned-batch-max-10000", dict(gpus="{max: 10000}", top="run:;  batch: 4Mi"), "12 s"),
    # the largest space a plan can ask: 4,080 layouts (TP up to 2^20 within a node of 10^6, PP up to
    # 2^16 of 100,000 layers, 4 ZeRO, 3 recompute) x 10,000 counts, none fits
    ("largest-space", dict(gpus="{max: 10000}", hardware="gpus_per_node: 1000000",
                           model="layers: 100000;d_model: 1048576;heads: 1048576"), "9.8 s"),
    # every pair ties: a fixed step of 1e10 s swamps what the layout and the count change, no bound
    # rules a pair out; the search stops at search_space.PLACED_MAX placements with a located error
    ("step_overhead-1e10-max-10000", dict(gpus="{max: 10000}", hardware="step_overhead: 1e10 s"), "> 100 s"),
]
# what each case answers (the rest: feasible)
# seq_len-1: with every collective's latency priced (throughput.collective_latency), a micro-batch of
# 1-token sequences is latency-bound — its tensor-parallel collectives cost more than its compute — so
# the pairs tie and no bound rules them out: the search stops at PLACED_MAX with the located error
EXPECTED = {"largest-space": "infeasible", "step_overhead-1e10-max-10000": "located", "seq_len-1": "located"}


@pytest.fixture(scope="module")
def search_runs(tmp_path_factory):
    """Every case in its own process, two at a time (the machine's cores): {id: solve_cpu(...)}."""
    from concurrent.futures import ThreadPoolExecutor

    paths = {cid: plan_with(tmp_path_factory.mktemp(cid), **args) for cid, args, _ in SEARCH_CASES}
    with ThreadPoolExecutor(max_workers=2) as pool:
        futures = {cid: pool.submit(solve_cpu, path) for cid, path in paths.items()}
        return {cid: f.result() for cid, f in futures.items()}


@pytest.mark.parametrize("cid", [c for c, _, _ in SEARCH_CASES])
def test_a_searched_plan_ends_and_answers(search_runs, cid):
    word, cpu, outcome = search_runs[cid]
    assert word == "DONE", f"load + solve past {HANG_CPU_S} s CPU ({cpu} s when stopped)"
    expected = EXPECTED.get(cid, "feasible")
    assert outcome.split(" ")[0] == expected, outcome
    if expected == "located":  # at the GPU range (minimal.yaml's line 12), naming what to do
        assert "hostile.yaml:12:" in outcome, outcome
        assert "error[search-too-large]" in outcome and "narrow hardware.gpus" in outcome, outcome


# -- the sweep: hostile --set values, kernel == scalar ---------------------------------------------

def cli(argv: list[str], capsys, monkeypatch, scalar: bool) -> tuple[int, str, str]:
    from budgetdsl.cli import main

    if scalar:
        monkeypatch.setenv("BUDGETDSL_SWEEP_SCALAR", "1")
    else:
        monkeypatch.setenv("BUDGETDSL_SWEEP_SCALAR", "0")  # the kernel, however few the rows
    rc = main(argv)
    out = capsys.readouterr()
    return rc, out.out, out.err


HOSTILE_SETS = [
    ["--set", "budget.deadline=1e10 s,1e11 s,1 s,0.5 s,1e400,-1 d,.inf,nan,2**1023 s"],
    ["--set", "noise.b_crit=1e-320,1,1e15,1e16,(1e154)^2,1M/0,$(id)"],
    ["--set", "target.tokens=1,1e18,1e19,-5,abc", "--set", "objective=balanced,min_time,min_cost,min_flops,bogus"],
    ["--set", "hardware.tensor_parallel=auto,1,3,8,0", "--set", "run.micro_batch=auto,1,1000000"],
    ["--set", "run.batch=1,1e15,4Mi,auto", "--set", "hardware.zero=0,3,4,auto"],
]


@pytest.mark.parametrize("settings", HOSTILE_SETS, ids=["deadline", "b_crit", "tokens-objective", "layout",
                                                        "batch-zero"])
@pytest.mark.parametrize("fmt", ["csv", "text", "json"])
def test_hostile_sweeps_are_identical_on_the_kernel_and_the_scalar_path(settings, fmt, capsys, monkeypatch):
    pytest.importorskip("numpy")
    argv = ["sweep", str(PLANS / "minimal.yaml"), *settings, "--format", fmt]
    kernel = cli(argv, capsys, monkeypatch, scalar=False)
    scalar = cli(argv, capsys, monkeypatch, scalar=True)
    assert kernel == scalar
    rc, out, err = kernel
    assert rc in (0, 1, 2), err
    assert "Traceback" not in err and "internal error" not in err
    if fmt == "json" and out.strip():
        json.loads(out, parse_constant=lambda c: pytest.fail(f"non-finite JSON {c}"))


def test_a_sweep_past_max_rows_is_refused_before_solving(capsys, monkeypatch):
    from budgetdsl.solve.sweep import MAX_ROWS

    values = ",".join(f"{d} d" for d in range(1, 318))  # 317 × 317 = 100,489 > MAX_ROWS
    rc, out, err = cli(["sweep", str(PLANS / "minimal.yaml"), "--set", f"budget.deadline={values}",
                        "--set", f"budget.usd={values.replace(' d', 'k')}"], capsys, monkeypatch, scalar=False)
    assert rc == 2 and f"{MAX_ROWS:,}" in err and "too-large" in err


def test_the_row_limit_is_exactly_100_000():
    """The documented limit is inclusive: 100 × 1,000 = 100,000 combinations are counted, and one
    more (11 × 9,091 = 100,001) is refused, naming the limit."""
    from budgetdsl.plan.diagnostics import PlanError
    from budgetdsl.solve.sweep import Setting, size

    def grid(a: int, b: int) -> list:
        return [Setting("budget.deadline", tuple(f"{i} d" for i in range(1, a + 1))),
                Setting("noise.b_crit", tuple(f"{i}M" for i in range(1, b + 1)))]

    assert size(grid(100, 1000)) == 100_000
    with pytest.raises(PlanError, match="100,001 combinations; the limit is 100,000"):
        size(grid(11, 9091))


def test_a_path_set_twice_is_a_usage_error(capsys, monkeypatch):
    rc, out, err = cli(["sweep", str(PLANS / "minimal.yaml"), "--set", "budget.deadline=1 d,2 d",
                        "--set", "budget.deadline=30 d", "--format", "csv"], capsys, monkeypatch, scalar=True)
    assert rc == 2 and "budget.deadline" in err


def _llama_micro_3(tmp_path: pathlib.Path) -> pathlib.Path:
    """plans/llama2-7b.yaml (run.batch pinned at 1,024 sequences) with run.micro_batch 3 and the layout
    searched: no data-parallel degree leaves a multiple of 3 sequences per replica."""
    (tmp_path / "base").mkdir()
    (tmp_path / "base" / "a100-cluster.yaml").write_text((PLANS / "base" / "a100-cluster.yaml").read_text())
    text = (PLANS / "llama2-7b.yaml").read_text()
    assert "  micro_batch: 1 " in text and "\n  mfu: 0.45" in text
    text = text.replace("  micro_batch: 1 ", "  micro_batch: 3 ").replace(
        "\n  mfu: 0.45", "\n  zero: auto\n  tensor_parallel: auto\n  mfu: 0.45", 1)
    path = tmp_path / "llama2-7b-micro3.yaml"
    path.write_text(text)
    return path


def test_a_pinned_micro_batch_no_layout_divides_is_located_at_run_micro_batch(tmp_path, capsys, monkeypatch):
    """Hostile-input finding (minor): the error was `no-layout` at hardware.gpus ("no searched layout
    launches"), though every layout launches; the micro-batch is what divides no replica's share.
    Exit 2: run.batch and run.micro_batch contradict each other on every layout (invalid input, as
    the same plan with the layout pinned), not a limit the plan misses (1)."""
    path = _llama_micro_3(tmp_path)
    lines = path.read_text().splitlines()
    row = next(i for i, line in enumerate(lines, 1) if line.startswith("  micro_batch: 3"))
    rc, out, err = cli(["plan", str(path)], capsys, monkeypatch, scalar=True)
    assert rc == 2, err
    assert f"{path.name}:{row}:" in err and "run.micro_batch (3)" in err and "1,024 sequences" in err
    assert "no-layout" not in err and "launches on the plan's GPU counts" not in err
    assert "run.micro_batch: auto" in err  # the hint


@pytest.mark.parametrize("gpus, told, hint", [
    ("{max: 64}", "starts at 1 and steps by 1", "gpus: 64"),
    ("{min: 64, max: 128}", "steps by 1", "step: 64"),
    ("{max: 32}", "it needs at least 64 GPUs", "gpus.max to 64"),
])
def test_a_gpu_range_beside_a_large_split_names_what_the_user_wrote(gpus, told, hint, tmp_path, capsys,
                                                                     monkeypatch):
    """Hostile-input finding (minor): `gpus: {max: 64}` beside tensor_parallel 64 was refused over
    "gpus.min (1) must be a multiple of …", a key and value the user never wrote. The error now shows
    the range as written, calls the unwritten min/step the defaults they are, and sits on the written
    max. Exit 2: a range whose counts do not split into t·p groups is an invalid plan (a language rule,
    checked before any solving), not a plan that misses a limit (1)."""
    path = tmp_path / "range.yaml"
    assert "\n  gpus: 64\n" in MINIMAL
    path.write_text(MINIMAL.replace("\n  gpus: 64\n", f"\n  gpus: {gpus}\n  tensor_parallel: 64\n"))
    row, line = next((i, ln) for i, ln in enumerate(path.read_text().splitlines(), 1) if ln.startswith("  gpus:"))
    rc, out, err = cli(["plan", str(path)], capsys, monkeypatch, scalar=True)
    assert rc == 2, err
    assert f"range.yaml:{row}:{line.index('max') + 1}:" in err  # at the written max
    assert f"gpus {gpus}" in err and told in err and hint in err and "(64 × 1 = 64)" in err
    assert "gpus.min (1)" not in err and "gpus.step (1)" not in err
    if "starts at" in told or "steps by" in told:
        assert "default" in err
