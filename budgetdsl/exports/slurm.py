"""`slurm`: an sbatch script that starts one torchrun per node with `srun`.

    #SBATCH --nodes=N --ntasks-per-node=1 --gpus-per-node=G --time=D-HH:MM:SS --exclusive
    srun torchrun --nnodes=N --nproc-per-node=G --rdzv-backend=c10d --rdzv-endpoint=<first node>:PORT

The c10d rendezvous runs on the allocation's first host, keyed by the job id; `--exclusive` and
`srun --cpus-per-task` give each torchrun the whole node and its CPUs (a step otherwise gets one
CPU per task). Checked in CI by `sbatch --test-only`, a real single-node run, `bash -n` and shellcheck.
"""

from __future__ import annotations

from budgetdsl.exports._text import (
    dns1035,
    hash_comments,
    header,
    literal_note,
    sh,
    time_limit,
    torchrun_flags,
)
from budgetdsl.exports.spec import LaunchSpec

USES = frozenset({"launch.command", "launch.partition", "launch.account", "budget.deadline",
                  "optimizer.lr"})


def render(spec: LaunchSpec) -> str:
    plan_text = [value for _, value in spec.env()] + list(spec.command)
    out = ["#!/bin/bash\n", literal_note(plan_text), hash_comments(header(spec, "slurm", USES))]
    directives = [
        f"--job-name={dns1035(spec.name)}",
        f"--nodes={spec.nodes}",
        "--ntasks-per-node=1",
        f"--gpus-per-node={spec.gpus_per_node}",
        "--exclusive",
    ]
    if spec.time_limit_s is not None:
        directives.append(f"--time={time_limit(spec.time_limit_s)}")
    if spec.launch.partition:
        directives.append(f"--partition={spec.launch.partition}")
    if spec.launch.account:
        directives.append(f"--account={spec.launch.account}")
    directives.append("--output=%x-%j.out")
    out += [f"#SBATCH {d}\n" for d in directives]
    out.append("\nset -euo pipefail\n\n")
    out.append("# The plan's numbers, for the training program to read and check; then launch.env.\n")
    out += [f"export {name}={sh(value)}\n" for name, value in spec.env()]
    launch = [
        'srun --kill-on-bad-exit=1 --cpus-per-task="$SLURM_CPUS_ON_NODE" torchrun',
        *torchrun_flags(spec),
        '--rdzv-id="$SLURM_JOB_ID"', "--rdzv-backend=c10d",
        f'--rdzv-endpoint="$head_node:{spec.port}"',
        " ".join(sh(word) for word in spec.command),
    ]
    out.append("\n# c10d rendezvous on the first node of the allocation.\n")
    out.append('head_node="$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)"\n')
    out.append(" \\\n  ".join(launch) + "\n")
    return "".join(out)
