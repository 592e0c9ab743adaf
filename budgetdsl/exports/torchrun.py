"""`torchrun`: the one command line that starts the run, for a cluster without a scheduler.

Integers for --nnodes and --nproc-per-node (never `auto`, which counts whatever GPUs a node
happens to show). One node: `--standalone` (a local rendezvous). Several: the same command on
every node with a c10d rendezvous at $MASTER_ADDR (the first node's address, which the person
launching sets) and the plan's port, keyed by the run's name. Every flag is checked in the tests
against the exact option strings of torch's own parser (`torch.distributed.run.get_args_parser`).
"""

from __future__ import annotations

from budgetdsl.exports._text import (
    dns1035,
    hash_comments,
    header,
    literal_note,
    sh,
    torchrun_flags,
)
from budgetdsl.exports.spec import LaunchSpec

USES = frozenset({"launch.command", "optimizer.lr"})


def render(spec: LaunchSpec) -> str:
    extra = ([] if spec.nodes == 1 else
             [f"run on each of the {spec.nodes} nodes, with MASTER_ADDR set to the first node's address"])
    lines = header(spec, "torchrun", USES, extra)
    env = [f"{name}={sh(value)}" for name, value in spec.env()]
    if spec.nodes == 1:
        rdzv = ["--standalone"]
    else:
        rdzv = [f"--rdzv-id={dns1035(spec.name)}", "--rdzv-backend=c10d",
                f'--rdzv-endpoint="${{MASTER_ADDR:?set MASTER_ADDR to the first node}}:{spec.port}"']
    words = ["env", *env, "torchrun", *torchrun_flags(spec), *rdzv, " ".join(sh(w) for w in spec.command)]
    plan_text = [value for _, value in spec.env()] + list(spec.command)
    return literal_note(plan_text) + hash_comments(lines) + " \\\n  ".join(words) + "\n"
