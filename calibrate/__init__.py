"""Calibration: measure the gradient noise scale B_simple on a small proxy model (PyTorch).

One concept per module: model, data, factory (the proxy; the model never imports the loop); noise
(no torch), gradients, step, distributed (the measurement); run and sweep (the loops of `budgetdsl
calibrate` and its `sweep`); record, fit, hardware (the file); gns, gns_hf, gns_lightning
(B_simple inside a user's own training loop); config, progress.
"""
