#!/usr/bin/env bash
# The installed package is the product: build the wheel, install it (not editable) into a clean
# venv outside the checkout, and run the commands users run — check, plan, export on the example
# plans, the TUI built headless from the installed package, and a short calibration with torch.
# Run by .ci/run after the test suite; by hand: bash .ci/wheel-smoke.sh
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
TORCH="${TORCH:-torch==2.13.0}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

python3 -m venv "$work/venv"
bin="$work/venv/bin"
"$bin/python" -m pip install -q --upgrade pip
"$bin/pip" wheel -q --no-deps -w "$work/dist" "$repo"
wheel=("$work"/dist/budgetdsl-*.whl)
"$bin/pip" install -q "$TORCH"
"$bin/pip" install -q "${wheel[0]}[calibrate,tui,plot]"

# Run from a folder with nothing of the checkout but the example plans (and the calibration file
# one of them reads): every import must come from site-packages.
mkdir -p "$work/user/tests/fixtures" && cd "$work/user"
cp -r "$repo/plans" plans && cp -r "$repo/tests/fixtures/calibration" tests/fixtures/calibration
# No git work tree here: name the root that `extends` and calibration paths must stay inside.
export BUDGETDSL_ROOT="$work/user"
site="$("$bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
for name in calibrate tui; do
  if [ -e "$site/$name" ]; then echo "wheel-smoke: the wheel installed a top-level '$name'" >&2; exit 1; fi
done

"$bin/budgetdsl" --version
"$bin/budgetdsl" check plans/*.yaml
"$bin/budgetdsl" plan plans/*.yaml > plan.txt
"$bin/budgetdsl" plan --format json plans/llama2-7b.yaml > plan.json
"$bin/python" -c 'import json; json.load(open("plan.json"))'
for fmt in slurm torchrun kubeflow pytorchjob skypilot deepspeed hf megatron; do
  "$bin/budgetdsl" export plans/llama2-7b.yaml --to "$fmt" > "export.$fmt"
done
"$bin/budgetdsl" schema > schema.json

# The TUI from the installed package, headless: the stylesheet must load and the plan render.
"$bin/python" - <<'PY'
import asyncio
from budgetdsl.tui.app import make_app

async def main() -> None:
    app = make_app("plans/llama2-7b.yaml")
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        assert app.screen.query("*"), "the TUI rendered no widget"
    print("wheel-smoke: TUI ok")

asyncio.run(main())
PY

"$bin/budgetdsl" calibrate --quick --steps 4 --quiet --out calib.json
"$bin/python" -c 'import json; assert json.load(open("calib.json"))'
echo "wheel-smoke: ok (${wheel[0]##*/})"
