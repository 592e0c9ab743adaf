"""The settings of one calibration run, with defaults and the reason for each non-obvious one.
No torch here: the CLI builds and validates a RunConfig before paying for `import torch`."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields, replace


def check_choices(cfg: RunConfig) -> None:
    """The named choices a run takes: optimizer, device, mixed precision (ValueError naming the flag)."""
    if cfg.optimizer not in ("adamw", "sgd"):
        raise ValueError(f"--optimizer must be adamw or sgd, not {cfg.optimizer!r}")
    if cfg.device not in ("auto", "cpu", "cuda"):
        raise ValueError(f"--device must be auto, cpu or cuda, not {cfg.device!r}")
    if cfg.amp not in ("auto", "none", "bf16", "fp16"):
        raise ValueError(f"--amp must be auto, none, bf16 or fp16, not {cfg.amp!r}")


# The EMA of |G|² and tr Σ while the weights move: an effective window of (1+β)/(1−β) ≈ 39 steps.
TRAINING_EMA_BETA = 0.95


def default_ema_beta(lr: float | None) -> float:
    """The one β policy of every measurement (the CLI, the sweep, the integrations): 1.0, the plain
    mean over all steps, at fixed weights (lr 0: every step measures the same B_simple); else
    TRAINING_EMA_BETA. An unknown learning rate (None) is not assumed to be 0."""
    return 1.0 if lr == 0 else TRAINING_EMA_BETA


@dataclass(frozen=True)
class RunConfig:
    model: str = "gpt-mini"  # a named GPT size (calibrate.model.SIZES) or package.module:function
    data: str = "stdlib"  # "stdlib", a text file/folder, nanoGPT .bin token files, or a factory
    # Sized so the default run finishes in a few minutes on two CPU cores, long enough for the
    # loss to fall by more than a nat, so B_simple visibly grows.
    steps: int = 300
    batch: int = 64  # global batch B_big, examples (sequences), over all replicas
    micro_batch: int = 8  # B_small, examples per forward/backward on one replica
    # Peak; B_noise depends on it (and on the optimizer), so it is recorded. 3e-3 trains gpt-mini
    # faster but spikes during warmup, and one spike dominates the EMA for a hundred steps.
    lr: float = 1e-3
    optimizer: str = "adamw"  # adamw | sgd (momentum 0.9)
    weight_decay: float = 0.0
    warmup: int | None = None  # linear warmup steps; None: 10% of the steps
    grad_clip: float | None = 1.0  # applied after the norms are measured (they are pre-clipping)
    seed: int = 1337
    device: str = "auto"  # auto | cpu | cuda
    amp: str = "auto"  # auto | none | bf16 | fp16; auto is bf16 on CUDA that supports it, else none
    eval_every: int = 10  # steps between held-out evaluations (one trajectory point each)
    eval_batches: int = 8  # micro-batches of held-out data per evaluation, fixed for the run
    # EMA of |G|² and tr Σ. None: 0.95 (an effective window of ~39 steps) while training, and 1.0
    # (the plain mean over all steps) at --lr 0, where every step measures the same weights.
    ema_beta: float | None = None
    confidence: float = 0.95
    max_nonfinite: int | None = None  # abort past this many skipped steps; None: max(10, steps/20)
    checkpoint_every: int = 50
    data_bytes: int | None = 8_000_000  # text corpora: bytes read (stdlib: ~350 files)
    vocab_size: int | None = None  # token files: None means largest token + 1, padded to 64
    block_size: int | None = None  # GPT overrides of the named size
    n_layer: int | None = None
    n_head: int | None = None
    n_embd: int | None = None
    tokens_per_example: int | None = None  # factories: overrides the sampler's attribute

    # Fields that may differ between a run and its --resume (all others must match).
    RESUMABLE = ("steps", "device", "checkpoint_every", "max_nonfinite")

    @property
    def beta(self) -> float:
        if self.ema_beta is not None:
            return self.ema_beta
        return default_ema_beta(self.lr)

    @property
    def warmup_steps(self) -> int:
        if self.warmup is not None:
            return self.warmup
        return round(0.1 * self.steps) if self.lr > 0 else 0

    @property
    def nonfinite_limit(self) -> int:
        return self.max_nonfinite if self.max_nonfinite is not None else max(10, self.steps // 20)

    def accumulation(self, world_size: int) -> int:
        return self.batch // (self.micro_batch * world_size)

    def validate(self, world_size: int = 1) -> None:
        """Raise ValueError naming the flag when the settings cannot run."""
        if self.steps < 1:
            raise ValueError("--steps must be at least 1")
        if self.micro_batch < 1 or self.batch < 1:
            raise ValueError("--batch and --micro-batch must be positive")
        per_step = self.micro_batch * world_size
        if self.batch % per_step:
            raise ValueError(
                f"--batch {self.batch} must be a multiple of --micro-batch {self.micro_batch}"
                + (f" x {world_size} replicas" if world_size > 1 else "")
            )
        if self.batch <= self.micro_batch:
            raise ValueError(
                f"--batch {self.batch} must exceed --micro-batch {self.micro_batch}: the estimator "
                "compares two batch sizes at the same weights (use at least 2 micro-batches)"
            )
        if not 0 <= self.lr < math.inf:  # NaN fails this too
            raise ValueError("--lr must be >= 0 (a finite number)")
        if not 0 <= self.weight_decay < math.inf:
            raise ValueError("--weight-decay must be >= 0 (a finite number)")
        for flag, value, least in (("--warmup", self.warmup, 0), ("--max-nonfinite", self.max_nonfinite, 0),
                                   ("--block-size", self.block_size, 1), ("--n-layer", self.n_layer, 1),
                                   ("--n-head", self.n_head, 1), ("--n-embd", self.n_embd, 1),
                                   ("--vocab-size", self.vocab_size, 1),
                                   ("--tokens-per-example", self.tokens_per_example, 1)):
            if value is not None and value < least:
                raise ValueError(f"{flag} must be at least {least}")
        if self.data_bytes is not None and self.data_bytes < 1:
            raise ValueError("--data-mb must be positive")
        check_choices(self)
        if self.ema_beta is not None and not 0.0 <= self.ema_beta <= 1.0:
            raise ValueError("--ema-beta must lie in [0, 1]")
        if not 0.0 < self.confidence < 1.0:
            raise ValueError("--confidence must lie in (0, 1)")
        if self.eval_every < 1 or self.eval_batches < 1:
            raise ValueError("--eval-every and --eval-batches must be positive")
        if self.grad_clip is not None and not self.grad_clip > 0:  # NaN fails this too
            raise ValueError("--grad-clip must be positive (omit it to disable clipping)")

    def to_dict(self) -> dict:
        return asdict(self)

    def mismatches(self, other: dict) -> list[str]:
        """Fields (other than the resumable ones) whose value differs from a checkpoint's."""
        return [
            f.name
            for f in fields(self)
            if f.name not in self.RESUMABLE and other.get(f.name) != getattr(self, f.name)
        ]

    def with_(self, **changes) -> RunConfig:
        return replace(self, **changes)


# --quick: seconds, for tests and a first try. The tiny gpt-nano is stable at a higher lr, which
# lets 40 steps show B_simple growing.
QUICK = dict(model="gpt-nano", steps=40, batch=16, micro_batch=4, lr=3e-3, eval_every=5,
             eval_batches=2, data_bytes=1_000_000, checkpoint_every=20)
