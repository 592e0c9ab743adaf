"""Benchmark the mutation fuzzer (not a timed test): `python bench/bench_fuzz.py [N] [--seed S]`.

N mutants of the example plans (default 100,000) through loader, solver, renderers and every export
in one process, as tests/budgetdsl/test_fuzz_mutations.py does with a smaller N. Prints the figures
docs/fuzzing.md reports and every finding (uncaught exception, hang, non-finite JSON, Markdown
injection) by the file and line that raised it; examples go to bench/fuzz-findings/. Exit 1 when
anything was found.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys
import time

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests" / "budgetdsl"))

from fuzz_mutations import Findings, fuzz  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("mutants", nargs="?", type=int, default=100_000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--bound", type=float, default=10.0, help="seconds per mutant before it counts as a hang")
    ap.add_argument("--chunk", type=int, default=5_000, help="print progress every CHUNK mutants")
    ap.add_argument("--full-ranges", action="store_true",
                    help="mutations also write GPU ranges at the cap (10,000 counts, step 1)")
    ap.add_argument("--out", type=pathlib.Path, default=REPO / "bench" / "fuzz-findings")
    args = ap.parse_args()
    total = Findings()
    t0 = time.perf_counter()
    done = 0
    while done < args.mutants:  # chunks with derived seeds: same mutants for the same (N, seed, chunk)
        n = min(args.chunk, args.mutants - done)
        found = fuzz(n, seed=args.seed * 1_000_003 + done, bound_s=args.bound, full_ranges=args.full_ranges)
        total.merge(found)  # hangs, non-finite and the slowest of every chunk (only of chunks with a finding before)
        for site in found.crashes:  # new sites as they appear, so a long run shows them early
            print(f"  finding: {site} (e.g. {found.examples[site][0]} {'+'.join(found.examples[site][1])})",
                  flush=True)
        done += n
        total.seconds = time.perf_counter() - t0
        print(f"[{done}/{args.mutants}] {total.seconds:.0f} s, findings {total.failures}, "
              f"slowest {total.slowest:.2f} s", flush=True)
    print(total.summary())
    if total.examples:
        args.out.mkdir(parents=True, exist_ok=True)
        for i, (site, (name, ops, text)) in enumerate(sorted(total.examples.items())):
            (args.out / f"finding-{i:02d}.yaml").write_text(f"# {site}\n# seed {name}, {'+'.join(ops)}\n{text}")
    print(json.dumps({"mutants": total.mutants, "seconds": round(total.seconds, 1),
                      "per_second": round(total.mutants / total.seconds, 1), "slowest_s": round(total.slowest, 3),
                      "findings": total.failures, "hangs": total.hangs, "non_finite": total.non_finite,
                      "outcomes": dict(total.outcomes)}))
    return 1 if total.failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
