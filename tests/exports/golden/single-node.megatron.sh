# shellcheck shell=bash disable=SC2034  # a file to source: MEGATRON_ARGS is used there
# budgetdsl export --to megatron: plan "tiny-run". Generated: re-export, do not edit.
# 1 node x 2 GPUs = 2 GPUs = data 2 x tensor 1 x pipeline 1 parallel
# global batch 12 sequences = micro-batch 2 x accumulation 3 x data parallel 2; 1536 tokens of 128
# 5 steps, 1 warmup, then constant lr; ZeRO stage 0; bf16
# lr 0.01 = 0.01 tuned at B0 = 1,536 tokens, none
# time limit 0-00:10:00 = budget.deadline
# flags of Megatron-LM core_r0.16.0 (megatron-core 0.16); Megatron computes data parallel = 2 GPUs / (tensor 1 x pipeline 1) = 2 and accumulation = global / (micro x data parallel) = 3
# model shape from the plan; add the data and tokenizer flags, and what the plan does not know (--ffn-hidden-size, --swiglu, --group-query-attention --num-query-groups, --position-embedding-type)
MEGATRON_ARGS=(
    --num-layers 4
    --hidden-size 256
    --num-attention-heads 8
    --max-position-embeddings 128
    --vocab-size 50304
    --tensor-model-parallel-size 1
    --pipeline-model-parallel-size 1
    --micro-batch-size 2
    --global-batch-size 12
    --seq-length 128
    --train-iters 5
    --lr 0.01
    --lr-warmup-iters 1
    --lr-decay-style constant
    --bf16
    --exit-duration-in-mins 10
)
