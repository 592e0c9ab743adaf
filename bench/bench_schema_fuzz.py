"""Benchmark the schema fuzzer (not a timed test): `python bench/bench_schema_fuzz.py [N] [--seed S]`.

N plans generated from budgetdsl.schema.json (tests/budgetdsl/schema_plans.py) through loader,
solver, renderers, every export and the CLI entry (`plan --format json` and one `export` a plan),
as tests/budgetdsl/test_schema_fuzz.py does with 60. Prints the share that loads, solves
(feasible / infeasible), exports, and every finding: crash (by the file and line that raised it),
hang (past --bound s of CPU), non-finite JSON, limit violation, exit 3. Examples go to
bench/schema-fuzz-findings/. Exit 1 when anything was found.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys
import tempfile
import time
import warnings
from collections import Counter

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests" / "budgetdsl"))

import yaml  # noqa: E402
from fuzz_mutations import Hang, NonFinite, site_of, time_bound  # noqa: E402
from hypothesis import HealthCheck, Phase, given, settings  # noqa: E402
from hypothesis import seed as hypothesis_seed  # noqa: E402
from schema_plans import check_plan, plans  # noqa: E402

from budgetdsl.exports import FORMATS  # noqa: E402


def _kind(exc: BaseException) -> str:
    if isinstance(exc, Hang):
        return "hang"
    if isinstance(exc, NonFinite):
        return "non-finite"
    if isinstance(exc, AssertionError):
        text = str(exc)
        if text.startswith("internal error"):
            return "exit-3"
        if any("test_solver_properties" in f.filename for f in _frames(exc)):
            return "limit-violation"
    return "crash"


def _frames(exc: BaseException):
    import traceback

    return traceback.extract_tb(exc.__traceback__)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("plans", nargs="?", type=int, default=100_000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--bound", type=float, default=10.0, help="seconds of CPU per plan before it counts as a hang")
    ap.add_argument("--chunk", type=int, default=1_000, help="print progress every CHUNK plans")
    ap.add_argument("--out", type=pathlib.Path, default=REPO / "bench" / "schema-fuzz-findings")
    args = ap.parse_args()
    outcomes: Counter = Counter()
    findings: Counter = Counter()  # (kind, site) -> count
    examples: dict = {}
    formats = sorted(FORMATS)
    slowest = 0.0
    work = pathlib.Path(tempfile.mkdtemp(prefix="schema-fuzz-"))
    t0 = time.perf_counter()

    @hypothesis_seed(args.seed)
    @settings(max_examples=args.plans, deadline=None, database=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @given(plans())
    def one(doc):
        nonlocal slowest
        n = sum(outcomes.values()) + sum(findings.values())
        c0 = time.process_time()
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                with time_bound(args.bound):
                    outcomes[check_plan(doc, work / "plan.yaml", formats[n % len(formats)])] += 1
        except Exception as exc:  # noqa: BLE001 - every exception is a finding
            key = (_kind(exc), "hang" if isinstance(exc, Hang) else site_of(exc))
            findings[key] += 1
            if key not in examples:
                examples[key] = yaml.safe_dump(doc, sort_keys=False, allow_unicode=True)
                print(f"  finding: {key[0]} {key[1]}: {str(exc)[:200]}", flush=True)
        slowest = max(slowest, time.process_time() - c0)
        if (n + 1) % args.chunk == 0:
            print(f"[{n + 1}/{args.plans}] {time.perf_counter() - t0:.0f} s, findings {sum(findings.values())}, "
                  f"slowest {slowest:.2f} s", flush=True)

    one()
    seconds = time.perf_counter() - t0
    total = sum(outcomes.values()) + sum(findings.values())
    kinds: Counter = Counter()
    for (kind, _site), count in findings.items():
        kinds[kind] += count

    def share(*names: str) -> float:
        return round(100.0 * sum(outcomes[k] for k in names) / max(total, 1), 1)

    if examples:
        args.out.mkdir(parents=True, exist_ok=True)
        for i, ((kind, site), text) in enumerate(sorted(examples.items())):
            (args.out / f"finding-{i:02d}.yaml").write_text(f"# {kind}: {site}\n{text}")
    for (kind, site), count in findings.most_common():
        print(f"  {count:6d}  {kind}  {site}")
    print(json.dumps({
        "plans": total, "seed": args.seed, "seconds": round(seconds, 1),
        "per_second": round(total / seconds, 1), "slowest_cpu_s": round(slowest, 3),
        "loads_pct": round(100.0 - share("invalid"), 1),
        "solved_feasible_pct": share("exported", "not-exportable"), "solved_infeasible_pct": share("infeasible"),
        "unsolvable_pct": share("unsolvable"), "exported_pct": share("exported"),
        "crashes": kinds["crash"], "hangs": kinds["hang"], "non_finite": kinds["non-finite"],
        "limit_violations": kinds["limit-violation"], "exit_3": kinds["exit-3"], "outcomes": dict(outcomes)}))
    return 1 if findings else 0


if __name__ == "__main__":
    raise SystemExit(main())
