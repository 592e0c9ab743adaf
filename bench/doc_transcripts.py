"""The command transcripts of docs/transfer.md, run rather than pasted: each lies between
`<!-- transcript: NAME -->` and `<!-- /transcript -->` and is what its commands print now.

    python bench/doc_transcripts.py            # check: exit 1, with a diff, when a page is stale
    python bench/doc_transcripts.py --write    # rerun every command (budgetdsl calibrate included) and rewrite

The check reruns the planner on the committed calibration (docs/examples/), which needs no torch;
--write also reruns the calibration that file came from. tests/calibrate/test_doc_examples.py runs
the check.
"""

from __future__ import annotations

import argparse
import difflib
import json
import os
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PAGE = REPO / "docs" / "transfer.md"
EXAMPLES = Path("docs/examples")
QUICK = EXAMPLES / "quick-gpt-nano.json"
PLAN = EXAMPLES / "llama2-13b-quick.yaml"
BLOCK = re.compile(r"(<!-- transcript: (?P<name>[\w-]+) -->\n```\n)(?P<body>.*?)(```\n<!-- /transcript -->)", re.S)


def _run(*argv: str) -> tuple[str, int]:
    """A budgetdsl command from the repository root, as a user types it: stderr then stdout."""
    env = {**os.environ, "COLUMNS": "100", "NO_COLOR": "1", "OMP_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, "-m", "budgetdsl", *argv], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=600)
    return done.stderr + done.stdout, done.returncode


def _write_quick_inputs() -> None:
    """`budgetdsl calibrate --quick` into docs/examples, and the Llama-2-13B plan that reads it at
    the loss it measured (plans/llama2-13b.yaml with its noise section replaced)."""
    out, rc = _run("calibrate", "--quick", "--quiet", "--out", str(QUICK))
    if rc != 0:
        raise SystemExit(f"budgetdsl calibrate --quick failed ({rc}):\n{out}")
    loss = round(json.loads((REPO / QUICK).read_text())["summary"]["loss"], 2)
    plan = (REPO / "plans/llama2-13b.yaml").read_text()
    plan = plan.replace("extends: base/a100-cluster.yaml", "extends: ../../plans/base/a100-cluster.yaml")
    plan = plan.replace("name: llama2-13b\n", "name: llama2-13b-quick\n")
    plan = re.sub(r"noise:\n(  .*\n)+", f"noise:\n  calibration: {QUICK.name}\n  at_loss: {loss}\n", plan)
    (REPO / PLAN).write_text("# plans/llama2-13b.yaml reading a `budgetdsl calibrate --quick` file at the loss it "
                             "measured\n# (written by bench/doc_transcripts.py --write)\n" + plan)


def transfer_quick() -> str:
    """The issue-15 case: a --quick calibration fed to a 13B plan, refused with located errors."""
    out, rc = _run("plan", str(PLAN))
    return (f"$ budgetdsl calibrate --quick --quiet --out {QUICK}\n"
            f"$ budgetdsl plan {PLAN}     # plans/llama2-13b.yaml reading it at the loss it measured\n"
            f"{out}$ echo $?\n{rc}\n")


TRANSCRIPTS = {"transfer-quick": transfer_quick}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--write", action="store_true", help="rerun everything and rewrite the page")
    args = ap.parse_args(argv)
    if args.write:
        _write_quick_inputs()
    text = PAGE.read_text()
    stale = []

    def fresh(m: re.Match) -> str:
        body = TRANSCRIPTS[m["name"]]()
        if body != m["body"]:
            stale.append((m["name"], m["body"], body))
        return m.group(1) + body + m.group(4)

    new = BLOCK.sub(fresh, text)
    if not BLOCK.search(text):
        print(f"{PAGE}: no transcript block", file=sys.stderr)
        return 1
    if args.write:
        PAGE.write_text(new)
        print(f"wrote {PAGE.relative_to(REPO)} ({len(stale)} transcript(s) changed)")
        return 0
    for name, old, body in stale:
        sys.stdout.writelines(difflib.unified_diff(old.splitlines(True), body.splitlines(True),
                                                   f"{PAGE.name} [{name}]", "a fresh run"))
    if stale:
        print(f"{PAGE} is stale: run python bench/doc_transcripts.py --write", file=sys.stderr)
    return 1 if stale else 0


if __name__ == "__main__":
    raise SystemExit(main())
