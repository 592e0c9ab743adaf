#!/usr/bin/env bash
# One prepared check of the CUDA paths nothing on CPU exercises:
#   1. `budgetdsl calibrate` on the GPU in bf16 autocast: the file's hardware profile (device name,
#      median step time, tokens/s) and the peak memory of a forward+backward per micro-batch size;
#   2. the in-training recorder's overhead on the GPU (bench/bench_gns_overhead.py, paired steps);
#   3. with more than one GPU: `budgetdsl calibrate` under torchrun (NCCL, the replicas as small
#      batches) and the recorder under DDP with NCCL (tests/calibrate/gns_loops.py, linear
#      regression: the closed form B_simple = 33 must lie in its interval);
#   4. the GEMM-shape sweep (bench/gemm_sweep.py): the share of peak of every layer GEMM of three
#      model shapes at tensor parallelism 1-8, for a saturation curve per GPU generation.
# Fails fast, with exit status 2 and one line saying why, on a machine without CUDA.
#
#   bench/device_check.sh [OUT_DIR]        # default OUT_DIR: device-check
#
# Environment: PYTHON (default .venv/bin/python, else python3), STEPS (default 200),
# MODEL (default gpt-small), DEVICE_CHECK_QUICK=1 (a smoke run: 20 steps, gpt-micro).
set -euo pipefail

cd "$(dirname "$0")/.."
OUT=${1:-device-check}
if [[ -z "${PYTHON:-}" ]]; then
    if [[ -x .venv/bin/python ]]; then PYTHON=.venv/bin/python; else PYTHON=python3; fi
fi
STEPS=${STEPS:-200}
MODEL=${MODEL:-gpt-small}
if [[ "${DEVICE_CHECK_QUICK:-0}" == 1 ]]; then STEPS=20; MODEL=gpt-micro; fi

die() { echo "device_check: $*" >&2; exit 2; }
step() { echo; echo "== $*"; }

# -- guards: fail in seconds, before anything trains ------------------------------------------------
command -v "$PYTHON" >/dev/null 2>&1 || die "no Python at '$PYTHON' (set PYTHON=...)"
command -v nvidia-smi >/dev/null 2>&1 || die "no nvidia-smi on PATH: this is not a CUDA machine"
nvidia-smi -L >/dev/null 2>&1 || die "nvidia-smi finds no GPU (driver not loaded?)"
# One query: torch's version, whether it sees CUDA, how many GPUs, whether they do bf16.
if ! PROBE=$("$PYTHON" - <<'EOF' 2>&1
import sys
try:
    import torch
except ImportError:
    sys.exit("torch is not installed: pip install 'budgetdsl[calibrate]' with a CUDA build of torch")
if not torch.cuda.is_available():
    sys.exit(f"torch {torch.__version__} sees no CUDA device (a CPU-only build, or CUDA_VISIBLE_DEVICES empty)")
n = torch.cuda.device_count()
bf16 = all(torch.cuda.get_device_properties(i).major >= 8 for i in range(n))
print(torch.__version__, n, int(bf16), torch.cuda.get_device_name(0).replace(" ", "_"))
EOF
); then
    die "$(echo "$PROBE" | tail -n 1)"
fi
read -r TORCH NGPU BF16 GPU_NAME <<<"$PROBE"
[[ "$BF16" == 1 ]] || die "GPU $GPU_NAME has no bf16 support (compute capability < 8.0)"
mkdir -p "$OUT"
echo "device_check: torch $TORCH, $NGPU x $GPU_NAME, results in $OUT/"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee "$OUT/nvidia-smi.csv"

# -- 1. calibration in bf16 on one GPU ---------------------------------------------------------------
step "1. budgetdsl calibrate --device cuda --amp bf16 ($MODEL, $STEPS steps)"
"$PYTHON" -m budgetdsl calibrate --device cuda --amp bf16 --model "$MODEL" --steps "$STEPS" \
    --batch 64 --micro-batch 16 --eval-every 20 --checkpoint-every 0 --quiet --out "$OUT/calibration-bf16.json"
"$PYTHON" - "$OUT/calibration-bf16.json" <<'EOF' | tee "$OUT/calibration-bf16.txt"
import sys
from budgetdsl.plan.calibration_file import load_calibration

cal = load_calibration(sys.argv[1])
hw, p = cal.hardware, cal.provenance
assert hw.device == "cuda" and p.amp == "bf16", (hw.device, p.amp)
assert hw.memory, "no memory profile: the CUDA path of calibrate.hardware.cuda_memory_profile did not run"
flops = p.model.flops_per_token
print(f"{hw.device_name}: {p.model.name} ({p.model.n_params:,} params), torch {p.torch_version}, bf16")
print(f"  median step {hw.step_time_s * 1e3:.1f} ms, {hw.tokens_per_s:,.0f} tokens/s"
      + (f", {hw.tokens_per_s * flops / 1e12:.1f} TFLOP/s achieved (6N + 12LdS per token)" if flops else ""))
for m in hw.memory:
    print(f"  micro-batch {m.micro_batch_examples:>3}: peak {m.peak_bytes / 2**20:,.0f} MiB")
s = cal.summary
print(f"  B_simple {s.b_simple_tokens:,.0f} tokens at loss {s.loss:.3f}; fit: "
      + (f"alpha {cal.fit.alpha:.3f}" if cal.fit else f"none ({cal.fit_error})"))
EOF

# -- 2. the recorder's overhead on the GPU -----------------------------------------------------------
step "2. bench/bench_gns_overhead.py --device cuda ($MODEL)"
"$PYTHON" bench/bench_gns_overhead.py --device cuda --model "$MODEL" --pairs 40 | tee "$OUT/gns-overhead.txt"

# -- 3. NCCL, when there is more than one GPU --------------------------------------------------------
if (( NGPU > 1 )); then
    step "3a. torchrun --nproc-per-node $NGPU budgetdsl calibrate (NCCL)"
    "$PYTHON" -m torch.distributed.run --standalone --nproc-per-node "$NGPU" -m budgetdsl calibrate \
        --device cuda --amp bf16 --model "$MODEL" --steps "$STEPS" --batch $((16 * NGPU * 2)) \
        --micro-batch 16 --eval-every 20 --checkpoint-every 0 --quiet --out "$OUT/calibration-ddp.json"
    "$PYTHON" - "$OUT/calibration-ddp.json" "$NGPU" <<'EOF' | tee "$OUT/calibration-ddp.txt"
import sys
from budgetdsl.plan.calibration_file import load_calibration

cal = load_calibration(sys.argv[1])
assert cal.provenance.batch.world_size == int(sys.argv[2]) == cal.hardware.world_size
print(f"{cal.hardware.world_size} replicas: {cal.hardware.tokens_per_s:,.0f} tokens/s, "
      f"B_simple {cal.summary.b_simple_tokens:,.0f} tokens at loss {cal.summary.loss:.3f}")
EOF
    step "3b. budgetdsl.calibrate.gns under DDP with NCCL (linear regression, closed form 33)"
    "$PYTHON" -m torch.distributed.run --standalone --nproc-per-node "$NGPU" \
        tests/calibrate/gns_loops.py "$OUT/gns-ddp.json" --device cuda --steps 200 | tee "$OUT/gns-ddp.txt"
    "$PYTHON" -c "
import sys
from budgetdsl.plan.calibration_file import load_calibration
s = load_calibration(sys.argv[1]).summary
sys.exit(0 if s.ci_low <= 33 <= s.ci_high else 'closed form 33 outside [%g, %g]' % (s.ci_low, s.ci_high))
" "$OUT/gns-ddp.json"
else
    step "3. one GPU: the NCCL paths need two or more (skipped)"
    echo "skipped: $NGPU GPU" | tee "$OUT/ddp-skipped.txt"
fi

# -- 4. GEMM shapes: the share of peak at the layers' own shapes (issue 24 item 6) -------------------
step "4. bench/gemm_sweep.py (274 GEMMs: Llama 3 8B/70B, GPT-3 175B layers at t 1-8, 2k-32k tokens)"
"$PYTHON" bench/gemm_sweep.py --device cuda --out "$OUT/gemm-sweep.csv" | tee "$OUT/gemm-sweep.txt"

echo
echo "device_check: done; figures in $OUT/*.txt, GEMM shapes in $OUT/gemm-sweep.csv"
