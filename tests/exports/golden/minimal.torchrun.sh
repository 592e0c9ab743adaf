# budgetdsl export --to torchrun: plan "Smoke Test #1". Generated: re-export, do not edit.
# 1 node x 1 GPU = 1 GPU = data 1 x tensor 1 x pipeline 1 parallel
# global batch 4 sequences = micro-batch 4 x accumulation 1 x data parallel 1; 2048 tokens of 512
# 100 steps, 0 warmup, then constant lr; ZeRO stage 3; fp16
# defaulted: optimizer.lr: the training program's own (no optimizer section)
env \
  BUDGETDSL_RUN_NAME='Smoke Test #1' \
  BUDGETDSL_NODES=1 \
  BUDGETDSL_GPUS_PER_NODE=1 \
  BUDGETDSL_DATA_PARALLEL=1 \
  BUDGETDSL_TENSOR_PARALLEL=1 \
  BUDGETDSL_PIPELINE_PARALLEL=1 \
  BUDGETDSL_MICRO_BATCH=4 \
  BUDGETDSL_GRAD_ACCUM=1 \
  BUDGETDSL_GLOBAL_BATCH=4 \
  BUDGETDSL_GLOBAL_BATCH_TOKENS=2048 \
  BUDGETDSL_SEQ_LEN=512 \
  BUDGETDSL_STEPS=100 \
  BUDGETDSL_WARMUP_STEPS=0 \
  BUDGETDSL_ZERO_STAGE=3 \
  torchrun \
  --nnodes=1 \
  --nproc-per-node=1 \
  --standalone \
  -m trainer
