"""B_simple recorded inside a Lightning `Trainer.fit`: a `Callback` around budgetdsl.calibrate.gns
(same hooks, estimator and file as a plain loop). Needs `budgetdsl[lightning]`.

    from budgetdsl.calibrate.gns_lightning import GradientNoiseScaleCallback
    trainer = L.Trainer(accumulate_grad_batches=4, callbacks=[
        GradientNoiseScaleCallback("calibration.json", data="my corpus, my tokenizer")])
    trainer.fit(module, datamodule)   # every process; rank 0 writes calibration.json at the end
"""

from __future__ import annotations

from pathlib import Path

from budgetdsl.calibrate.gns import GradientNoiseScale, leading_dim
from lightning.pytorch.callbacks import Callback


class GradientNoiseScaleCallback(Callback):
    """Measures B_simple at every optimizer step of `Trainer.fit` and writes a calibration file.

    out: where rank 0 writes the file when training ends. data: what the model trains on (for the
    provenance). micro_batch: examples per replica per forward (default: the first batch's
    leading dimension). tokens_per_example: 1 unless given (the length of a sequence for a
    language model). ema_beta, confidence, point_every: as GradientNoiseScale.

    From Lightning: the accumulation `accumulate_grad_batches` (Lightning divides each micro-batch's
    loss by it and skips DDP's all-reduce until the last), the replicas `world_size`, the training
    loss in `on_before_backward`, a held-out loss when `val_loss_key` (default "val_loss") is
    logged. 16-mixed's GradScaler is read from the precision plugin."""

    def __init__(self, out: str | Path, *, data: str = "user data", micro_batch: int | None = None,
                 tokens_per_example: int = 1, vocab_size: int | None = None, val_loss_key: str = "val_loss",
                 seed: int | None = None, ema_beta: float | None = None, confidence: float = 0.95,
                 point_every: int = 10):
        self.out = Path(out)
        self.data, self.micro_batch = data, micro_batch
        self.tokens_per_example, self.vocab_size = tokens_per_example, vocab_size
        self.val_loss_key, self.seed = val_loss_key, seed
        self.options = dict(ema_beta=ema_beta, confidence=confidence, point_every=point_every)
        self.gns: GradientNoiseScale | None = None
        self.calibration = None

    def on_train_start(self, trainer, pl_module) -> None:
        scaler = getattr(trainer.precision_plugin, "scaler", None)
        self.gns = GradientNoiseScale(
            pl_module, micro_batch=self.micro_batch or 1, accumulation=trainer.accumulate_grad_batches,
            world_size=trainer.world_size, tokens_per_example=self.tokens_per_example, capture_loss=False,
            grad_scale=scaler.get_scale if scaler is not None else None, **self.options)

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        size = leading_dim(batch)
        if self.micro_batch is None:
            self.micro_batch = size or 1
            self.gns.micro_batch = self.micro_batch
        if size is not None:
            self.gns.observe_micro_batch(size)

    def on_before_backward(self, trainer, pl_module, loss) -> None:
        # Lightning hands the loss divided by accumulate_grad_batches (and, under 16-mixed,
        # multiplied by the loss scale): undo both for the micro-batch's mean loss.
        scale = self.gns.grad_scale() if self.gns.grad_scale is not None else 1.0
        self.gns.observe_loss(loss.detach() * (trainer.accumulate_grad_batches / scale))

    def on_before_optimizer_step(self, trainer, pl_module, optimizer) -> None:
        # Lightning's own step boundary: after the step's last backward (the closure) and before
        # clipping and the update. An epoch's leftover micro-batches make a shorter step here.
        self.gns.observe_optimizer(optimizer)
        self.gns.end_step()

    def on_validation_end(self, trainer, pl_module) -> None:
        value = trainer.callback_metrics.get(self.val_loss_key)
        if value is not None and self.gns is not None and not trainer.sanity_checking:
            self.gns.evaluated(float(value), step=trainer.global_step)

    def on_train_end(self, trainer, pl_module) -> None:
        gns = self.gns
        optimizer = trainer.optimizers[0] if trainer.optimizers else None
        precision = str(trainer.precision)
        amp = "bf16" if "bf16" in precision else "fp16" if precision.startswith("16") else "none"
        clip = trainer.gradient_clip_val
        self.calibration = gns.write(
            self.out, model_name=f"{type(pl_module).__module__}.{type(pl_module).__qualname__}",
            data=self.data, vocab_size=self.vocab_size, seed=self.seed, optimizer=optimizer,
            grad_clip=float(clip) if clip else None, amp=amp,
            integration="budgetdsl.calibrate.gns_lightning")
        gns.close()
