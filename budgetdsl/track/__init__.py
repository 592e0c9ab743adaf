"""Plan versus actual: read what a running job logs (TensorBoard, Hugging Face Trainer, Megatron-LM,
the gns recorder, a documented CSV/JSONL), build one run record, forecast its finish, GPU-hours and
cost, and say which limit of the plan breaks and when (docs/track.md).
"""
