"""The layout search's work on hostile plans: CPU seconds of load + solve in a fresh process.

    python bench/bench_search.py [--runs N]

Each case is one of tests/budgetdsl/test_hostile_search.py's SEARCH_CASES (plans/minimal.yaml, every
layout key `auto`, the GPU range and shape changed); that test only guards against hangs. Prints one
Markdown row per case (the least CPU time of N processes, and the case's `before` figure) for docs/fuzzing.md.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import re
import sys
import tempfile

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests" / "budgetdsl"))

from test_hostile_search import SEARCH_CASES, plan_with, solve_cpu  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3, help="fresh processes per case (the least is shown)")
    args = parser.parse_args()
    load = os.getloadavg()
    print(f"load average {load[0]:.2f} on {os.cpu_count()} CPUs, python {sys.version.split()[0]}")
    print("| plan (minimal.yaml, every layout key auto) | load + solve, CPU | answer | before |")
    print("|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for cid, plan_args, before in SEARCH_CASES:
            path = plan_with(pathlib.Path(tempfile.mkdtemp(dir=tmp)), **plan_args)
            runs = [solve_cpu(path, bound=300.0) for _ in range(args.runs)]
            cpu = min(r[1] for r in runs)
            shown = ", ".join(f"{k}: {v}" for k, v in plan_args.items())
            answer = runs[0][2]
            code = re.search(r"error\[([^\]]+)\]", answer)  # a located error: its code, not the temp path
            answer = f"located error[{code.group(1)}]" if answer.startswith("located") and code else answer[:30]
            print(f"| `{cid}` ({shown}) | {cpu:.2f} s | {answer} | {before} |", flush=True)


if __name__ == "__main__":
    main()
