# budgetdsl export --to torchrun: plan "tiny-run". Generated: re-export, do not edit.
# 1 node x 2 GPUs = 2 GPUs = data 2 x tensor 1 x pipeline 1 parallel
# global batch 12 sequences = micro-batch 2 x accumulation 3 x data parallel 2; 1536 tokens of 128
# 5 steps, 1 warmup, then constant lr; ZeRO stage 0; bf16
# lr 0.01 = 0.01 tuned at B0 = 1,536 tokens, none
# time limit 0-00:10:00 = budget.deadline
env \
  BUDGETDSL_RUN_NAME=tiny-run \
  BUDGETDSL_NODES=1 \
  BUDGETDSL_GPUS_PER_NODE=2 \
  BUDGETDSL_DATA_PARALLEL=2 \
  BUDGETDSL_TENSOR_PARALLEL=1 \
  BUDGETDSL_PIPELINE_PARALLEL=1 \
  BUDGETDSL_MICRO_BATCH=2 \
  BUDGETDSL_GRAD_ACCUM=3 \
  BUDGETDSL_GLOBAL_BATCH=12 \
  BUDGETDSL_GLOBAL_BATCH_TOKENS=1536 \
  BUDGETDSL_SEQ_LEN=128 \
  BUDGETDSL_STEPS=5 \
  BUDGETDSL_LR=0.01 \
  BUDGETDSL_WARMUP_STEPS=1 \
  BUDGETDSL_ZERO_STAGE=0 \
  NCCL_DEBUG=WARN \
  torchrun \
  --nnodes=1 \
  --nproc-per-node=2 \
  --standalone \
  train.py --config cfg.yaml
