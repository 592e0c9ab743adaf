"""B_simple recorded inside a Hugging Face `Trainer` run: a `TrainerCallback` around
budgetdsl.calibrate.gns (same hooks, estimator and file as a plain loop). Needs `budgetdsl[hf]`.

    from budgetdsl.calibrate.gns_hf import GradientNoiseScaleCallback
    trainer = Trainer(model, args, train_dataset=..., callbacks=[
        GradientNoiseScaleCallback("calibration.json", data="my corpus, my tokenizer")])
    trainer.train()          # every process; rank 0 writes calibration.json at the end
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from budgetdsl.calibrate.gns import GradientNoiseScale
from transformers import TrainerCallback


class GradientNoiseScaleCallback(TrainerCallback):
    """Measures B_simple at every optimizer step of the Trainer and writes a calibration file.

    out: where rank 0 writes the file at the end of training. data: what the model trains on
    (corpus and tokenizer, for the file's provenance; the planner compares losses only on the same
    data). tokens_per_example, vocab_size: as the file records them (default: from the first
    batch and the model's config). ema_beta, confidence, point_every: as GradientNoiseScale.

    From the Trainer: the micro-batch is `per_device_train_batch_size`, the accumulation
    `gradient_accumulation_steps`, the replicas `world_size`; it divides each micro-batch's loss by
    the accumulation (or by the batch's token count, the same for equal-length sequences); its
    `no_sync` keeps DDP from reducing before the last micro-batch. The big batch's norm is read at
    the end of the last backward, before `max_grad_norm` clips it. The loss axis: `eval_loss` when
    the run evaluates, else the logged training `loss` (each B point takes the latest loss logged at
    or before its step; none before the first log). A model that takes `num_items_in_batch` weighs
    each micro-batch by its label count: steps whose micro-batches' counts differ are skipped and
    counted (a `compute_loss_func` is not seen: its weighting is assumed equal). Tokens per
    example: the `input_ids` length of the first batch, unless given."""

    def __init__(self, out: str | Path, *, data: str = "user data", tokens_per_example: int | None = None,
                 vocab_size: int | None = None, ema_beta: float | None = None, confidence: float = 0.95,
                 point_every: int = 10):
        self.out = Path(out)
        self.data = data
        self.tokens_per_example = tokens_per_example
        self.vocab_size = vocab_size
        self.options = dict(ema_beta=ema_beta, confidence=confidence, point_every=point_every)
        self.gns: GradientNoiseScale | None = None
        self.calibration = None
        self._probe = None

    def on_train_begin(self, args, state, control, model=None, optimizer=None, **kwargs: Any):
        scaler = getattr(optimizer, "scaler", None)  # accelerate's AcceleratedOptimizer under fp16
        self.gns = GradientNoiseScale(
            model, micro_batch=args.per_device_train_batch_size,
            accumulation=args.gradient_accumulation_steps, world_size=args.world_size,
            tokens_per_example=self.tokens_per_example or 1, capture_loss=False,
            # The Trainer divides each micro-batch's loss by the step's own number of micro-batches
            # (`current_gradient_accumulation_steps`: fewer in the leftover step of an epoch).
            loss_divisor=float,
            grad_scale=scaler.get_scale if scaler is not None else None, **self.options)
        if self.tokens_per_example is None:
            self._probe = model.register_forward_pre_hook(self._tokens_from_batch, with_kwargs=True)
        self._items_hook = model.register_forward_pre_hook(self._items_of_batch, with_kwargs=True)
        if self.vocab_size is None:
            self.vocab_size = getattr(getattr(model, "config", None), "vocab_size", None)

    def _tokens_from_batch(self, module, args, kwargs):
        ids = kwargs.get("input_ids", args[0] if args else None)
        if ids is not None and getattr(ids, "dim", lambda: 0)() == 2:
            self.gns.tokens_per_example = int(ids.shape[-1])
        self._probe.remove()

    def _items_of_batch(self, module, args, kwargs):
        # A model that takes `num_items_in_batch` (the Trainer passes it when the model accepts
        # loss kwargs) divides each micro-batch's summed loss by the step's total count, so the
        # micro-batches weigh by their own counts: the recorder checks they are equal. The
        # Trainer counts labels[..., 1:] of a causal LM and labels otherwise: both are counted.
        labels = kwargs.get("labels")
        if "num_items_in_batch" not in kwargs or not isinstance(labels, torch.Tensor) or not module.training:
            return
        counts = [labels.ne(-100).sum()]
        if labels.dim() >= 2:
            counts.append(labels[..., 1:].ne(-100).sum())
        self.gns.observe_items(torch.stack(counts))

    def on_pre_optimizer_step(self, args, state, control, **kwargs: Any):
        # The Trainer's own step boundary: after the step's last backward (and clipping, which
        # the recorder's norms, read at the end of each backward, come before).
        self.gns.end_step()

    def on_step_end(self, args, state, control, optimizer=None, **kwargs: Any):
        if optimizer is not None:
            self.gns.observe_optimizer(getattr(optimizer, "optimizer", optimizer))

    def on_log(self, args, state, control, logs=None, **kwargs: Any):
        if logs and "loss" in logs and self.gns is not None:
            self.gns.logged_loss(logs["loss"], step=max(state.global_step - 1, 0))

    def on_evaluate(self, args, state, control, metrics=None, **kwargs: Any):
        if metrics and "eval_loss" in metrics and self.gns is not None:
            self.gns.evaluated(metrics["eval_loss"], step=state.global_step)

    def on_train_end(self, args, state, control, optimizer=None, **kwargs: Any):
        gns = self.gns
        inner = getattr(optimizer, "optimizer", optimizer)
        amp = "bf16" if args.bf16 else "fp16" if args.fp16 else "none"
        self.calibration = gns.write(
            self.out, model_name=_model_name(gns.model), data=self.data, vocab_size=self.vocab_size,
            seed=args.seed, optimizer=inner, warmup_steps=args.get_warmup_steps(state.max_steps),
            grad_clip=args.max_grad_norm or None, amp=amp,
            integration="budgetdsl.calibrate.gns_hf")
        gns.close()
        self._items_hook.remove()


def _model_name(model) -> str:
    config = getattr(model, "config", None)
    name = getattr(config, "_name_or_path", "") or getattr(config, "model_type", "")
    return f"{type(model).__name__} {name}".strip()
