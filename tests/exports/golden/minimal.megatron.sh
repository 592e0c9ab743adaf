# shellcheck shell=bash disable=SC2034  # a file to source: MEGATRON_ARGS is used there
# budgetdsl export --to megatron: plan "Smoke Test #1". Generated: re-export, do not edit.
# 1 node x 1 GPU = 1 GPU = data 1 x tensor 1 x pipeline 1 parallel
# global batch 4 sequences = micro-batch 4 x accumulation 1 x data parallel 1; 2048 tokens of 512
# 100 steps, 0 warmup, then constant lr; ZeRO stage 3; fp16
# flags of Megatron-LM core_r0.16.0 (megatron-core 0.16); Megatron computes data parallel = 1 GPUs / (tensor 1 x pipeline 1) = 1 and accumulation = global / (micro x data parallel) = 1
# warning: Megatron's distributed optimizer shards optimizer state and gradients (ZeRO-2); the plan's ZeRO-3 parameter sharding has no flag here, so parameters stay replicated and need more memory than planned
# defaulted: optimizer.lr: the training program's own (no optimizer section)
MEGATRON_ARGS=(
    --tensor-model-parallel-size 1
    --pipeline-model-parallel-size 1
    --micro-batch-size 4
    --global-batch-size 4
    --seq-length 512
    --train-iters 100
    --fp16
    --use-distributed-optimizer
)
