"""Calibration: measure the gradient noise scale B_simple on a small proxy model (PyTorch).

Modules, one concept each (the model never imports the loop):
    model        the built-in GPT proxy and its named sizes
    data         offline corpora (stdlib source, text, nanoGPT token files) and the batch sampler
    factory      `--model`/`--data` resolution, including users' own `module:function` factories
    noise        the two-batch-size estimator, smoothing and its confidence interval (no torch)
    gradients    accumulation that yields each micro-batch's squared gradient norm
    step         one optimizer step that measures (shared by the loop and bench/)
    distributed  torchrun: replicas as small batches, the all-reduced gradient as the big one
    fit          B_crit(L) = B*/L^(1/alpha) over the trajectory
    hardware     device, throughput and memory profile
    record       what a run has measured, and the calibration file it becomes
    run          the calibration loop: checkpoints, resume, interrupts
    gns          B_simple recorded inside an existing training loop (hooks, no extra pass), the
                 same file; gns_hf and gns_lightning adapt it to those Trainers (optional extras)
    config       the run's settings (no torch), progress: the progress bar

Entry point: `budgetdsl calibrate` (budgetdsl/commands/calibrate.py) or `calibrate.run.calibrate`.
"""
