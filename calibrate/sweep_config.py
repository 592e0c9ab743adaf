"""The settings of a frontier sweep (`budgetdsl calibrate sweep`), with the reason for each default.
No torch here: the CLI builds and validates a SweepConfig before paying for `import torch`."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, replace

from budgetdsl.calibrate.config import RunConfig, check_choices

from budgetdsl.theory.lr_scaling import (
    EXPONENT as LR_RULES,  # lr(B) = lr_base · (B / base)^p, one definition
)


def _default_base() -> RunConfig:
    # gpt-micro trains to a loss where B_simple is a few dozen sequences within a few hundred
    # steps on two CPU cores; 2 MB of the stdlib corpus is plenty for runs of this length.
    return RunConfig(model="gpt-micro", lr=1e-3, data_bytes=2_000_000, eval_batches=8)


@dataclass(frozen=True)
class SweepConfig:
    base: RunConfig = field(default_factory=_default_base)  # model, data, seed, optimizer, device
    # Geometric, 8 -> 512 sequences: wide enough to straddle B_crit on both sides (S ∝ 1/B at
    # the small end, S ≈ S_min at the large end), which the fit needs.
    batches: tuple[int, ...] = (8, 16, 32, 64, 128, 256, 512)
    target_loss: float | None = None  # None: the pilot run's loss after pilot_steps
    # The smallest batch needs the most steps: its run is the pilot, and the target is the loss
    # it reaches, so every larger batch (fewer steps on the frontier) reaches it within max_steps.
    pilot_steps: int = 600
    max_steps: int | None = None  # None: 1.5 × pilot_steps (or 2,000 with --target-loss)
    lr_rule: str = "sqrt"  # the usual rule for Adam (Malladi et al. 2022); linear for SGD
    lr_base_batch: int = 32  # base.lr applies at this batch (examples)
    lr_grid: tuple[float, ...] = (1.0,)  # multipliers of the rule's lr tried at each batch
    # Constant lr after a short warmup: steps-to-target then does not depend on a horizon.
    # The warmup is fixed in steps, so it adds about the same number of steps to every batch.
    warmup: int = 10
    micro_max: int = 64  # B_small = largest divisor of B up to min(micro_max, B/4) (>= 2 samples)
    eval_micro: int = 32  # held-out examples per evaluation micro-batch
    evals_per_run: int = 40  # evaluations spread over each run's expected length
    reference_batch: int | None = None  # whose B_simple trajectory the file keeps; None: smallest
    # Seeds of the model init and data order, one run per (batch, seed); the first is base.seed
    # (its smallest batch is the pilot, its held-out set every run's). Empty: base.seed alone.
    seeds: tuple[int, ...] = ()

    @property
    def seed_list(self) -> tuple[int, ...]:
        return self.seeds or (self.base.seed,)

    @property
    def steps_limit(self) -> int:
        if self.max_steps is not None:
            return self.max_steps
        return 2000 if self.target_loss is not None else math.ceil(1.5 * self.pilot_steps)

    def lr_at(self, batch: int, multiplier: float = 1.0) -> float:
        """lr_base · (B / B_base)^p: p = 1/2 (sqrt, Adam: Malladi et al. 2022), 1 (linear, SGD:
        Goyal et al. 2017), 0 (none)."""
        return self.base.lr * (batch / self.lr_base_batch) ** LR_RULES[self.lr_rule] * multiplier

    def micro_for(self, batch: int) -> int:
        cap = max(1, min(self.micro_max, batch // 4 if batch >= 8 else batch // 2))
        return max(d for d in range(1, cap + 1) if batch % d == 0)

    def split_error(self, processes: int) -> str | None:
        """Why a task's `processes` cannot share every batch's micro-batches evenly (each step's
        micro-batches are dealt out whole, so B_small and the global batch stay those of one
        process), or None."""
        bad = [f"{b} ({b // self.micro_for(b)} x {self.micro_for(b)})" for b in sorted(self.batches)
               if (b // self.micro_for(b)) % processes]
        if not bad:
            return None
        return (f"{processes} processes per task cannot share the micro-batches of batch {', '.join(bad)} "
                f"evenly: each step's micro-batches must be a multiple of {processes}; choose such batches "
                "(or --micro-max), or fewer GPUs/nodes per task")

    @property
    def reference(self) -> int:
        return self.reference_batch if self.reference_batch is not None else min(self.batches)

    def validate(self) -> None:
        """Raise ValueError naming the flag when the settings cannot run."""
        b = self.base
        if len(self.batches) < 3 or len(set(self.batches)) != len(self.batches):
            raise ValueError("--batches needs at least 3 distinct batch sizes (the fit has 2 parameters)")
        if min(self.batches) < 2:
            raise ValueError("--batches must be at least 2 examples (B_simple needs two micro-batches)")
        if self.target_loss is not None and not (math.isfinite(self.target_loss) and self.target_loss > 0):
            raise ValueError("--target-loss must be a positive number of nats")
        if self.pilot_steps < 10:
            raise ValueError("--pilot-steps must be at least 10")
        if self.steps_limit < 10:
            raise ValueError("--max-steps must be at least 10")
        if self.lr_rule not in LR_RULES:
            raise ValueError(f"--lr-rule must be one of {', '.join(LR_RULES)}, not {self.lr_rule!r}")
        if not 0 < b.lr < math.inf:  # NaN fails this too
            raise ValueError("--lr must be positive: the sweep trains (a finite number)")
        if not 0 <= b.weight_decay < math.inf:
            raise ValueError("--weight-decay must be >= 0 (a finite number)")
        if self.lr_base_batch < 1:
            raise ValueError("--lr-base-batch must be positive")
        if not self.lr_grid or any(not (m > 0 and math.isfinite(m)) for m in self.lr_grid):
            raise ValueError("--lr-grid takes positive multipliers, e.g. 0.5,1,2")
        if self.warmup < 0 or self.warmup >= self.steps_limit:
            raise ValueError("--warmup must be >= 0 and below --max-steps")
        if self.micro_max < 1 or self.eval_micro < 1 or self.evals_per_run < 4:
            raise ValueError("--micro-max and --eval-micro must be positive, --evals-per-run >= 4")
        if self.reference_batch is not None and self.reference_batch not in self.batches:
            raise ValueError(f"--reference-batch {self.reference_batch} is not one of --batches")
        if self.seeds and (self.seeds[0] != b.seed or len(set(self.seeds)) != len(self.seeds)
                           or min(self.seeds) < 0):
            raise ValueError("--seeds: distinct seeds >= 0, the first one --seed's (a count N, or a list "
                             "such as 0,5,9)")
        if len(self.seed_list) > MAX_SEEDS:
            raise ValueError(f"--seeds: at most {MAX_SEEDS} seeds")
        check_choices(b)
        if b.eval_batches < 1:
            raise ValueError("--eval-batches must be positive")
        if b.data_bytes is not None and not b.data_bytes >= 1:  # 0 read as "the default" before
            raise ValueError("--data-mb must be positive")
        if b.grad_clip is not None and not b.grad_clip > 0:  # NaN fails this too
            raise ValueError("--grad-clip must be positive (0 disables clipping)")

    def to_dict(self) -> dict:
        return asdict(self)

    def with_(self, **changes) -> SweepConfig:
        return replace(self, **changes)


MAX_SEEDS = 64  # a sweep of more seeds than this is a typo, not a measurement


# --quick: seconds, for tests and a first try: gpt-nano, 5 batches, a 150-step pilot.
QUICK_BASE = dict(model="gpt-nano", lr=3e-3, data_bytes=500_000, eval_batches=2)
QUICK = dict(batches=(4, 8, 16, 32, 64), pilot_steps=150, lr_base_batch=16, warmup=5, eval_micro=16,
             evals_per_run=25)
