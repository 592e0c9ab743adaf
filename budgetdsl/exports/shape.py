"""`python -m budgetdsl.exports.shape PLAN...`: print "NODES GPUS_PER_NODE", the largest cluster
any of the plans exports to Slurm. `.ci/setup-slurm.sh` declares a test cluster of that shape."""

from __future__ import annotations

import sys


def main(paths: list[str]) -> int:
    from budgetdsl.exports.spec import ExportError, launch_spec
    from budgetdsl.io.exit_codes import ExitCode
    from budgetdsl.plan.loader import load_plan
    from budgetdsl.solve.solver import solve

    nodes = gpus = 0
    for path in paths:
        try:
            spec = launch_spec(plan := load_plan(path), solve(plan))
        except ExportError:
            continue  # infeasible: nothing to schedule
        if spec.tpu is not None:
            continue  # every format refuses a TPU plan: nothing to schedule either
        nodes, gpus = max(nodes, spec.nodes), max(gpus, spec.gpus_per_node)
    if not nodes:
        return ExitCode.NO
    print(nodes, gpus)
    return ExitCode.OK


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
