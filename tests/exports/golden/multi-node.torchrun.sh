# budgetdsl export --to torchrun: plan "llama-13b-h100". Generated: re-export, do not edit.
# 16 nodes x 8 GPUs = 128 GPUs = data 32 x tensor 2 x pipeline 2 parallel
# global batch 512 sequences = micro-batch 1 x accumulation 16 x data parallel 32; 2097152 tokens of 4096
# 238419 steps, 2000 warmup, then constant lr; ZeRO stage 1; bf16
# lr 0.000212 = 0.0003 tuned at B0 = 4,194,304 tokens, sqrt x sqrt(B/B0) (Adam), B = 2,097,152 tokens (B/B0 = 0.5)
# time limit 21-01:02:03 = budget.deadline
# run on each of the 16 nodes, with MASTER_ADDR set to the first node's address
# defaulted: launch.command: train.py (a stand-in for the training program)
# warning: the global batch exceeds B_crit
env \
  BUDGETDSL_RUN_NAME=llama-13b-h100 \
  BUDGETDSL_NODES=16 \
  BUDGETDSL_GPUS_PER_NODE=8 \
  BUDGETDSL_DATA_PARALLEL=32 \
  BUDGETDSL_TENSOR_PARALLEL=2 \
  BUDGETDSL_PIPELINE_PARALLEL=2 \
  BUDGETDSL_MICRO_BATCH=1 \
  BUDGETDSL_GRAD_ACCUM=16 \
  BUDGETDSL_GLOBAL_BATCH=512 \
  BUDGETDSL_GLOBAL_BATCH_TOKENS=2097152 \
  BUDGETDSL_SEQ_LEN=4096 \
  BUDGETDSL_STEPS=238419 \
  BUDGETDSL_LR=0.00021213203435596425 \
  BUDGETDSL_WARMUP_STEPS=2000 \
  BUDGETDSL_ZERO_STAGE=1 \
  CUDA_DEVICE_MAX_CONNECTIONS=1 \
  torchrun \
  --nnodes=16 \
  --nproc-per-node=8 \
  --rdzv-id=llama-13b-h100 \
  --rdzv-backend=c10d \
  --rdzv-endpoint="${MASTER_ADDR:?set MASTER_ADDR to the first node}:29500" \
  train.py
