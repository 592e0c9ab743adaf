"""Accelerator presets and how a layout (tensor x pipeline x data parallel) maps onto GPUs and nodes."""
