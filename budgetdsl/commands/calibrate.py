"""`budgetdsl calibrate`: measure the gradient noise scale B_simple on a proxy model and write a
calibration file that plans reference (`noise: {calibration: FILE, at_loss: L}`).

torch and the `calibrate` package are imported inside the handler only: `budgetdsl check` must not
pay for them, and a core install without the extra still runs every other command.

Exit codes: 0 written; 1 the measurement failed (too many non-finite steps; a partial file is
written); 2 invalid usage or input; 130 interrupted (a partial file marked `interrupted` and a
checkpoint for --resume are written).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

EXIT_OK, EXIT_FAILED, EXIT_INVALID, EXIT_INTERRUPTED = 0, 1, 2, 130
EXTRA_HINT = "pip install 'budgetdsl[calibrate]'"
GPT_SIZES = "gpt-nano|gpt-micro|gpt-mini|gpt-small|gpt2-124m"  # calibrate.model.SIZES (a test checks)

# Flags that map one-to-one onto calibrate.config.RunConfig fields (dest == field name).
_CONFIG_FLAGS = (
    "model", "data", "steps", "batch", "micro_batch", "lr", "optimizer", "weight_decay", "warmup",
    "grad_clip", "seed", "device", "amp", "eval_every", "eval_batches", "ema_beta", "confidence",
    "max_nonfinite", "checkpoint_every", "vocab_size", "block_size", "n_layer", "n_head", "n_embd",
    "tokens_per_example",
)


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "calibrate",
        help="measure the gradient noise scale on a proxy model (needs the calibrate extra)",
        description=(
            "Train a small proxy model for a bounded number of steps, measuring the gradient noise "
            "scale B_simple = tr(Sigma)/|G|^2 at every step (McCandlish et al. 2018, appendix A), "
            "and write a calibration file with its trajectory against the loss and a fit "
            "B_crit(L) = B*/L^(1/alpha). Under torchrun the replicas' gradients are the small "
            "batches. Defaults to a CPU-sized GPT on the Python standard library's source."
        ),
    )
    a = p.add_argument
    a("--out", type=Path, default=Path("calibration.json"), help="calibration file to write (default: %(default)s)")
    a("--model", help=f"{GPT_SIZES}, or package.module:function / file.py:function returning an "
      "nn.Module whose forward(batch) is the mean loss (default: gpt-mini)")
    a("--data", help="stdlib, a text file or folder, nanoGPT train.bin/val.bin, or package.module:function / "
      "file.py:function(split) returning sampler(n, generator) (default: stdlib)")
    a("--steps", type=int, help="optimizer steps (default: 300)")
    a("--batch", type=int, help="global batch B_big in examples, over all replicas (default: 64)")
    a("--micro-batch", type=int, help="micro-batch B_small in examples per replica (default: 8)")
    a("--lr", type=float, help="peak learning rate; 0 measures at fixed weights (default: 1e-3)")
    a("--optimizer", choices=("adamw", "sgd"), help="default: adamw")
    a("--weight-decay", type=float, help="default: 0")
    a("--warmup", type=int, help="linear warmup steps (default: 10%% of --steps)")
    a("--grad-clip", type=float, help="clip the global gradient norm after measuring; 0 disables (default: 1.0)")
    a("--seed", type=int, help="seed of the model init and the data order (default: 1337)")
    a("--device", choices=("auto", "cpu", "cuda"), help="default: auto (CUDA when present)")
    a("--amp", choices=("auto", "none", "bf16", "fp16"), help="mixed precision (default: auto = bf16 on CUDA)")
    a("--eval-every", type=int, help="steps between held-out evaluations / trajectory points (default: 10)")
    a("--eval-batches", type=int, help="held-out micro-batches per evaluation (default: 8)")
    a("--ema-beta", type=float, help="smoothing of |G|^2 and tr(Sigma) (default: 0.95; 1.0 at --lr 0)")
    a("--confidence", type=float, help="level of the B_simple interval (default: 0.95)")
    a("--max-nonfinite", type=int, help="abort past this many non-finite steps (default: max(10, steps/20))")
    a("--checkpoint-every", type=int, help="steps between checkpoints for --resume (default: 50)")
    a("--data-mb", type=float, help="text corpora: megabytes to read (default: 8)")
    a("--vocab-size", type=int, help="token files: vocabulary size (default: largest token + 1, padded to 64)")
    a("--block-size", type=int, help="GPT: sequence length, tokens per example")
    a("--n-layer", type=int, help="GPT: layers")
    a("--n-head", type=int, help="GPT: attention heads")
    a("--n-embd", type=int, help="GPT: width")
    a("--tokens-per-example", type=int, help="factories: tokens per example (default: the sampler's attribute, or 1)")
    a("--quick", action="store_true", help="a seconds-long run (gpt-nano, 40 steps) to try the tool; flags still override")
    a("--resume", action="store_true", help="continue from <out>.ckpt.pt with the same settings")
    a("--quiet", action="store_true", help="no progress bar and no summary (errors still go to stderr)")
    p.set_defaults(handler=run)


def _config(args: argparse.Namespace):
    from calibrate.config import QUICK, RunConfig

    values = dict(QUICK) if args.quick else {}
    values.update({k: getattr(args, k) for k in _CONFIG_FLAGS if getattr(args, k, None) is not None})
    if getattr(args, "data_mb", None) is not None:
        values["data_bytes"] = int(args.data_mb * 1_000_000)
    if values.get("grad_clip") == 0:
        values["grad_clip"] = None
    return RunConfig(**values)


def _command(cfg) -> list[str]:
    """The resolved settings as a command line that reproduces the run: the main settings always,
    the others where they differ from the defaults."""
    from calibrate.config import RunConfig

    always = ("model", "data", "steps", "batch", "micro_batch", "lr", "seed")
    defaults = RunConfig()
    argv = ["budgetdsl", "calibrate"]
    for name, value in cfg.to_dict().items():
        if name not in always and value == getattr(defaults, name):
            continue
        if name == "grad_clip" and value is None:
            value = 0
        elif name == "data_bytes":
            name, value = "data_mb", None if value is None else value / 1e6
        if value is not None:
            argv += [f"--{name.replace('_', '-')}", f"{value:g}" if isinstance(value, float) else str(value)]
    return argv


def run(args: argparse.Namespace) -> int:
    try:
        import torch  # noqa: F401
    except ImportError:
        print(f"budgetdsl calibrate: needs PyTorch; install the extra: {EXTRA_HINT}", file=sys.stderr)
        return EXIT_INVALID
    from calibrate.run import UsageError, calibrate

    try:
        cfg = _config(args)
    except (TypeError, ValueError) as exc:
        print(f"budgetdsl calibrate: error: {exc}", file=sys.stderr)
        return EXIT_INVALID
    started = time.perf_counter()
    try:
        outcome = calibrate(cfg, args.out, resume=args.resume, quiet=args.quiet, command=_command(cfg))
    except UsageError as exc:
        print(f"budgetdsl calibrate: error: {exc}", file=sys.stderr)
        return EXIT_INVALID
    except OSError as exc:  # an unwritable --out, a full disk: say which file, no traceback
        print(f"budgetdsl calibrate: error: {exc.filename or args.out}: {exc.strerror or exc}", file=sys.stderr)
        return EXIT_INVALID
    if outcome.status == "failed":
        print(f"budgetdsl calibrate: error: {outcome.calibration.stop_reason}", file=sys.stderr)
        print(f"  a partial calibration was written to {outcome.path}", file=sys.stderr)
        return EXIT_FAILED
    if not args.quiet and _is_main():
        print(render_summary(outcome.calibration, outcome.path, time.perf_counter() - started))
    if outcome.status == "interrupted":
        print(
            f"budgetdsl calibrate: interrupted; partial file {outcome.path}, continue with --resume",
            file=sys.stderr,
        )
        return EXIT_INTERRUPTED
    return EXIT_OK


def _is_main() -> bool:
    import os

    return os.environ.get("RANK", "0") == "0"


def _fmt(x: float | None, digits: int = 3) -> str:
    if x is None:
        return "inf"
    return f"{x:,.0f}" if abs(x) >= 10**digits else f"{x:.{digits}g}"


def render_summary(cal, path: Path, seconds: float, rows: int = 12) -> str:
    """A plain-text report: the setup, a thinned trajectory table, the result and the fit."""
    p = cal.provenance
    b = p.batch
    lines = [
        f"calibrated {p.model.name} ({p.model.n_params:,} params) on {p.data.kind} data "
        f"({p.data.source}), {len(cal.raw.step)} steps of {b.global_batch_examples} examples "
        f"(B_small = {b.micro_batch_examples}, {b.tokens_per_example} tokens/example), "
        f"{p.optimizer.name} lr {p.optimizer.lr:g}, {cal.hardware.device} x{b.world_size}",
        "",
        f"{'step':>6} {'tokens':>11} {'loss':>7} {'B_simple':>10} {p.estimator.confidence:.0%} interval"
        f"{'':>11} {'B_simple tokens':>16}",
    ]
    traj = cal.trajectory
    keep = sorted({round(i * (len(traj) - 1) / max(rows - 1, 1)) for i in range(rows)}) if traj else []
    for i in keep:
        t = traj[i]
        ci = f"[{_fmt(t.ci_low)}, {_fmt(t.ci_high)}]" if t.ci_low is not None else "[unbounded]"
        lines.append(
            f"{t.step:>6} {t.tokens:>11,} {t.loss_smoothed:>7.3f} {_fmt(t.b_simple):>10} {ci:>21} "
            f"{_fmt(t.b_simple_tokens):>16}"
        )
    lines.append("")
    s = cal.summary
    if s is not None and s.b_simple is not None:
        ci = (
            f"{s.confidence:.0%} interval [{_fmt(s.ci_low)}, {_fmt(s.ci_high)}] examples"
            if s.ci_low is not None
            else "interval unbounded (|G|^2 not resolved: run longer)"
        )
        lines.append(
            f"B_simple = {_fmt(s.b_simple)} examples = {_fmt(s.b_simple_tokens)} tokens ({ci}) "
            f"at held-out loss {s.loss:.3f}"
        )
    if cal.fit is not None:
        f = cal.fit
        lines.append(
            f"fit B_crit(L) = {f.b_star_tokens:.3g} tokens / L^(1/{f.alpha:.3g}), alpha = {f.alpha:.3g} "
            f"+- {f.alpha_se:.2g}, over losses {f.loss_min:.3f}-{f.loss_max:.3f} ({f.n_points} points)"
        )
    else:
        lines.append(f"no fit: {cal.fit_error}")
    if s is not None and s.steps_skipped:
        lines.append(f"{s.steps_skipped} steps skipped (non-finite loss or gradient)")
    hw = cal.hardware
    if hw.tokens_per_s:
        lines.append(
            f"throughput {hw.tokens_per_s:,.0f} tokens/s, step {hw.step_time_s * 1000:.0f} ms "
            f"({hw.device_name})"
        )
    lines.append(f"wrote {path} in {seconds:.0f} s")
    return "\n".join(lines)
