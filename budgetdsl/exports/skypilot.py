"""`skypilot`: a SkyPilot task YAML (`sky launch task.yaml`).

`num_nodes` nodes with `resources.accelerators: <GPU>:<count>`, the image as `image_id: docker:…`,
the plan's numbers and `launch.env` as `envs`, and a `run` script that starts torchrun on every node
from SkyPilot's variables (SKYPILOT_NODE_RANK, SKYPILOT_NODE_IPS, ...), as SkyPilot's docs do.
SkyPilot has no time limit, so the run is wrapped in `timeout` with the deadline (SIGTERM, SIGKILL
two minutes later, as Slurm does). Checked by `sky.Task.from_yaml`, `bash -n` and shellcheck.
"""

from __future__ import annotations

from budgetdsl.exports._text import (
    dns1035,
    dump_yaml,
    hash_comments,
    header,
    literal_note,
    sh,
)
from budgetdsl.exports.spec import ExportError, LaunchSpec

USES = frozenset({"launch.image", "launch.command", "launch.accelerator", "budget.deadline",
                  "optimizer.lr"})


def run_script(spec: LaunchSpec) -> str:
    timeout = ("" if spec.time_limit_s is None else
               f"timeout --signal=TERM --kill-after=120 {spec.time_limit_s}s ")
    words = [f"{timeout}torchrun",
             '--nnodes="$SKYPILOT_NUM_NODES"',
             '--nproc-per-node="$SKYPILOT_NUM_GPUS_PER_NODE"',
             '--node-rank="$SKYPILOT_NODE_RANK"',
             '--master-addr="$MASTER_ADDR"',
             f"--master-port={spec.port}",
             " ".join(sh(w) for w in spec.command)]
    return (literal_note(list(spec.command)) + "set -euo pipefail\n"
            'MASTER_ADDR="$(echo "$SKYPILOT_NODE_IPS" | head -n 1)"\n'
            + " \\\n  ".join(words) + "\n")


def task(spec: LaunchSpec) -> dict:
    if spec.accelerator is None:
        raise ExportError("SkyPilot needs the GPU's name: set launch.accelerator (e.g. 'H100'; "
                          "see `sky show-gpus`) or a hardware.gpu preset that names one")
    return {
        "name": dns1035(spec.name),
        "num_nodes": spec.nodes,
        "resources": {"accelerators": f"{spec.accelerator}:{spec.gpus_per_node}",
                      "image_id": f"docker:{spec.image}"},
        "envs": dict(spec.env()),
        "run": run_script(spec),
    }


def render(spec: LaunchSpec) -> str:
    return hash_comments(header(spec, "skypilot", USES)) + dump_yaml(task(spec))
