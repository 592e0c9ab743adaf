"""The cost model: FLOPs per token, step time, memory per GPU, on one plan and layout."""
