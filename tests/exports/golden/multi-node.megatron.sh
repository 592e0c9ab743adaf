# shellcheck shell=bash disable=SC2034  # a file to source: MEGATRON_ARGS is used there
# budgetdsl export --to megatron: plan "llama-13b-h100". Generated: re-export, do not edit.
# 16 nodes x 8 GPUs = 128 GPUs = data 32 x tensor 2 x pipeline 2 parallel
# global batch 512 sequences = micro-batch 1 x accumulation 16 x data parallel 32; 2097152 tokens of 4096
# 238419 steps, 2000 warmup, then constant lr; ZeRO stage 1; bf16
# lr 0.000212 = 0.0003 tuned at B0 = 4,194,304 tokens, sqrt x sqrt(B/B0) (Adam), B = 2,097,152 tokens (B/B0 = 0.5)
# time limit 21-01:02:03 = budget.deadline
# flags of Megatron-LM core_r0.16.0 (megatron-core 0.16); Megatron computes data parallel = 128 GPUs / (tensor 2 x pipeline 2) = 32 and accumulation = global / (micro x data parallel) = 16
# model shape from the plan; add the data and tokenizer flags, and what the plan does not know (--ffn-hidden-size, --swiglu, --group-query-attention --num-query-groups, --position-embedding-type)
# warning: the global batch exceeds B_crit
# tensor parallelism 2: validate_args asserts this before Blackwell
export CUDA_DEVICE_MAX_CONNECTIONS=1
MEGATRON_ARGS=(
    --num-layers 40
    --hidden-size 5120
    --num-attention-heads 40
    --max-position-embeddings 4096
    --vocab-size 32000
    --recompute-granularity selective
    --tensor-model-parallel-size 2
    --pipeline-model-parallel-size 2
    --micro-batch-size 1
    --global-batch-size 512
    --seq-length 4096
    --train-iters 238419
    --lr 0.00021213203435596425
    --lr-warmup-iters 2000
    --lr-decay-style constant
    --bf16
    --use-distributed-optimizer
    --exit-duration-in-mins 30303
)
