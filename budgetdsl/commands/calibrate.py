"""`budgetdsl calibrate`: measure the gradient noise scale B_simple on a proxy model and write a
calibration file that plans reference (`noise: {calibration: FILE, at_loss: L}`).

torch and the `calibrate` package are imported in the handler only, so a core install runs
every other command without them. Exit codes: 0 written; 1 the measurement failed (a partial file
is written); 2 invalid usage or input, or another run writing the same --out (calibrate.out_lock);
130 interrupted (a partial file marked `interrupted` and a checkpoint for --resume are written).
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

from budgetdsl.commands._common import extra_hint
from budgetdsl.io.exit_codes import ExitCode
from budgetdsl.io.terminal_text import tell

GPT_SIZES = "gpt-nano|gpt-micro|gpt-mini|gpt-small|gpt2-124m"  # calibrate.model.SIZES (a test checks)

# Flags that map one-to-one onto calibrate.config.RunConfig fields (dest == field name).
_CONFIG_FLAGS = (
    "model", "data", "steps", "batch", "micro_batch", "lr", "optimizer", "weight_decay", "warmup",
    "grad_clip", "seed", "device", "amp", "eval_every", "eval_batches", "ema_beta", "confidence",
    "max_nonfinite", "checkpoint_every", "vocab_size", "block_size", "n_layer", "n_head", "n_embd",
    "tokens_per_example",
)


def _add_training_flags(a) -> None:
    """Flags that `calibrate` and `calibrate sweep` share: optimizer, seed, device, precision."""
    a("--optimizer", choices=("adamw", "sgd"), help="default: adamw")
    a("--weight-decay", type=float, help="default: 0")
    a("--grad-clip", type=float, help="clip the global gradient norm after measuring; 0 disables (default: 1.0)")
    a("--seed", type=int, help="seed of the model init and the data order, shared by every run of a "
      "sweep (default: 1337)")
    a("--device", choices=("auto", "cpu", "cuda"), help="default: auto (CUDA when present)")
    a("--amp", choices=("auto", "none", "bf16", "fp16"), help="mixed precision (default: auto = bf16 on CUDA)")
    a("--eval-batches", type=int, help="held-out micro-batches per evaluation (default: 8)")


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
    _add_training_flags(a)
    a("--steps", type=int, help="optimizer steps (default: 300)")
    a("--batch", type=int, help="global batch B_big in examples, over all replicas (default: 64)")
    a("--micro-batch", type=int, help="micro-batch B_small in examples per replica (default: 8)")
    a("--lr", type=float, help="peak learning rate; 0 measures at fixed weights (default: 1e-3)")
    a("--warmup", type=int, help="linear warmup steps (default: 10%% of --steps)")
    a("--eval-every", type=int, help="steps between held-out evaluations / trajectory points (default: 10)")
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
    a("--tokens-per-example", type=int,
      help="factories: tokens per example (default: the sampler's attribute, or 1)")
    a("--plan", help="calibrate for this plan: a GPT proxy runs at the plan's model.seq_len (the longest "
      "seq_len/2^k whose micro-batch fits, if that one does not); --block-size overrides")
    a("--quick", action="store_true",
      help="a seconds-long run (gpt-nano, 40 steps) to try the tool; flags still override")
    a("--resume", action="store_true", help="continue from <out>.ckpt.pt with the same settings")
    a("--quiet", action="store_true", help="no progress bar and no summary (errors still go to stderr)")
    p.set_defaults(handler=run)
    sub = p.add_subparsers(dest="calibrate_command", metavar="{sweep}", required=False,
                           title="measure the frontier directly")
    _register_sweep(sub)


def _batches(text: str) -> tuple[int, ...]:
    try:
        values = tuple(int(v) for v in text.split(",") if v.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, e.g. 8,16,32, not {text!r}") from None
    if not values:
        raise argparse.ArgumentTypeError("no batch sizes given")
    return values


def _seeds(text: str) -> tuple[str, tuple[int, ...]]:
    """`--seeds N` (N seeds counted from --seed) or `--seeds 0,5,9` (these seeds)."""
    try:
        values = tuple(int(v) for v in text.split(",") if v.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected a count (3) or comma-separated seeds (0,5,9), not {text!r}") from None
    if not values:
        raise argparse.ArgumentTypeError("no seeds given")
    if "," not in text:
        if values[0] < 1:
            raise argparse.ArgumentTypeError(f"a count of seeds is at least 1, not {values[0]}")
        return "count", values
    return "list", values


def _floats(text: str) -> tuple[float, ...]:
    try:
        return tuple(float(v) for v in text.split(",") if v.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated numbers, e.g. 0.5,1,2, not {text!r}") from None


def _register_sweep(sub) -> None:
    p = sub.add_parser(
        "sweep",
        help="train the proxy at several batch sizes to one loss and fit S = S_min + E_min/B",
        description=(
            "Measure the critical batch directly (McCandlish et al. 2018, eq. 2.11): train the proxy "
            "from one start (seed, data order, held-out set) at several constant batch sizes until "
            "its held-out loss reaches one target, fit S = S_min + E_min/B to the steps each needed, "
            "and report B_crit = E_min/S_min beside the B_simple measured in the same runs. Writes a "
            "calibration file whose `sweep` section plans read with `noise: {calibration: FILE, "
            "source: sweep}`; the smallest batch's run is its B_simple calibration."),
    )
    a = p.add_argument
    a("--out", type=Path, default=Path("sweep.json"), help="calibration file to write (default: %(default)s)")
    a("--model", help=f"{GPT_SIZES} or a factory, as for `calibrate` (default: gpt-micro)")
    a("--data", help="as for `calibrate` (default: stdlib)")
    _add_training_flags(a)
    a("--batches", type=_batches, help="global batch sizes in examples (default: 8,16,32,64,128,256,512)")
    a("--seeds", type=_seeds, help="N seeds counted from --seed, or a list such as 0,5,9: one run per (batch, "
      "seed), all pooled in one fit; several seeds run as tasks in --sweep-dir (default: --seed alone)")
    a("--target-loss", type=float, help="held-out loss every run trains to (default: what the pilot reaches)")
    a("--pilot-steps", type=int, help="steps of the smallest batch's run that sets the target (default: 600)")
    a("--max-steps", type=int, help="bound on every run (default: 1.5 x --pilot-steps, or 2000 with --target-loss)")
    a("--lr", type=float, help="learning rate at --lr-base-batch (default: 1e-3)")
    a("--lr-rule", choices=("sqrt", "linear", "none"),
      help="lr(B) = lr (B/base)^p, p = 1/2, 1, 0 (default: sqrt, for Adam)")
    a("--lr-base-batch", type=int, help="batch (examples) at which --lr applies (default: 32)")
    a("--lr-grid", type=_floats, help="multipliers of the rule's lr tried at every batch; the fewest "
      "steps to the target wins (default: 1, the rule alone)")
    a("--warmup", type=int, help="linear warmup steps, then constant lr (default: 10)")
    a("--eval-micro", type=int, help="examples per held-out micro-batch (default: 32)")
    a("--micro-max", type=int, help="largest B_small, examples (default: 64; B_small <= B/4)")
    a("--reference-batch", type=int,
      help="the run whose B_simple trajectory the file keeps (default: the smallest batch)")
    a("--data-mb", type=float, help="text corpora: megabytes to read (default: 2)")
    a("--block-size", type=int, help="GPT: sequence length, tokens per example (default: the size's)")
    a("--plot", type=Path, help="also draw the picture to this .svg or .png (needs the plot extra)")
    a("--quick", action="store_true", help="a seconds-long sweep (gpt-nano, batches 4-64) to try the tool")
    a("--quiet", action="store_true", help="print nothing but errors")
    c = p.add_argument_group("on a cluster (needs the cluster extra: submitit)").add_argument
    c("--executor", choices=("local", "slurm"), default="local",
      help="local: one run after another here (default); slurm: one array task per batch size")
    c("--sweep-dir", type=Path, help="the folder of a cluster sweep: its tasks, results, checkpoints, logs")
    c("--collect", type=Path, metavar="DIR", help="gather a cluster sweep's finished tasks, refit, and "
      "follow the rest (after the submitting process has gone)")
    c("--retry-failed", action="store_true", help="with --collect: resubmit the failed tasks, which resume "
      "from their checkpoints")
    c("--no-wait", action="store_true", help="submit (or look once) and return; follow with --collect DIR")
    c("--poll", type=float, default=10.0, help="seconds between looks at the tasks while collecting "
      "(default: %(default)s)")
    c("--min-batches", type=int, help="fit only over at least this many batches that reached the target "
      "(default: 3, the fit's own minimum)")
    c("--emit", choices=("kubeflow", "pytorchjob"), help="write one Kubeflow TrainJob (or PyTorchJob) per "
      "task into --sweep-dir instead of submitting")
    c("--plan", help="a plan whose launch section (partition, account, image, namespace) and hardware "
      "(gpu, mfu) the cluster sweep uses; flags override it")
    c("--partition", help="Slurm partition (default: launch.partition, else the cluster's default)")
    c("--account", help="Slurm account (default: launch.account)")
    c("--time", help="time limit of each task: minutes, 2h, 1d or HH:MM:SS (default: 60)")
    c("--gpus-per-task", type=int, help="GPUs per node each task holds, one process each under torchrun "
      "(nccl; default: 0, a CPU task of one process)")
    c("--nodes-per-task", type=int, help="nodes each task spans, its processes sharing each step's "
      "micro-batches (default: 1)")
    c("--cpus-per-task", type=int, help="CPU cores each task holds (default: 1)")
    c("--gpu", help="GPU preset that prices the tasks (default: the plan's hardware.gpu)")
    c("--mfu", type=float, help="model FLOPs utilisation of the tasks (default: the plan's hardware.mfu, "
      "else the preset's fitted kernel efficiency)")
    c("--max-gpu-hours", type=float, help="refuse to submit a sweep whose tasks the cost model prices "
      "above this many GPU-hours")
    p.set_defaults(handler=run_sweep)


_SWEEP_FIELDS = ("batches", "target_loss", "pilot_steps", "max_steps", "lr_rule", "lr_base_batch",
                 "lr_grid", "warmup", "eval_micro", "micro_max", "reference_batch")
_SWEEP_BASE_FIELDS = ("model", "data", "lr", "optimizer", "weight_decay", "grad_clip", "seed", "device",
                      "amp", "eval_batches", "block_size")


def _sweep_config(args: argparse.Namespace):
    from budgetdsl.calibrate.sweep_config import QUICK, QUICK_BASE, SweepConfig

    cfg = SweepConfig()
    base = dict(QUICK_BASE) if args.quick else {}
    base.update({k: getattr(args, k) for k in _SWEEP_BASE_FIELDS if getattr(args, k, None) is not None})
    if args.data_mb is not None:
        base["data_bytes"] = int(args.data_mb * 1_000_000)
    if base.get("grad_clip") == 0:
        base["grad_clip"] = None
    values = dict(QUICK) if args.quick else {}
    values.update({k: getattr(args, k) for k in _SWEEP_FIELDS if getattr(args, k, None) is not None})
    if getattr(args, "seeds", None) is not None:
        kind, given = args.seeds
        first = base.get("seed", cfg.base.seed)
        if kind == "list":
            if args.seed is not None and args.seed != given[0]:
                raise ValueError(f"--seed {args.seed} and --seeds {','.join(map(str, given))}: the list's first "
                                 "seed is the pilot's; give one or the other")
            first = base["seed"] = given[0]
            seeds = given
        else:
            seeds = tuple(first + i for i in range(given[0]))
        values["seeds"] = seeds if len(seeds) > 1 else ()
    return cfg.with_(base=cfg.base.with_(**base), **values)


def _several_seeds(args: argparse.Namespace) -> bool:
    kind, given = args.seeds if getattr(args, "seeds", None) is not None else ("count", (1,))
    return (given[0] if kind == "count" else len(given)) > 1


def _sweep_command(cfg) -> list[str]:
    """The resolved settings as a command line that reproduces the sweep."""
    b = cfg.base
    argv = ["budgetdsl", "calibrate", "sweep", "--model", b.model, "--data", b.data,
            "--batches", ",".join(map(str, cfg.batches))]
    if cfg.target_loss is not None:
        argv += ["--target-loss", f"{cfg.target_loss:g}"]
    else:
        argv += ["--pilot-steps", str(cfg.pilot_steps)]
    argv += ["--max-steps", str(cfg.steps_limit), "--lr", f"{b.lr:g}", "--lr-rule", cfg.lr_rule,
             "--lr-base-batch", str(cfg.lr_base_batch), "--warmup", str(cfg.warmup), "--seed", str(b.seed)]
    if cfg.lr_grid != (1.0,):
        argv += ["--lr-grid", ",".join(f"{m:g}" for m in cfg.lr_grid)]
    if len(cfg.seed_list) > 1:
        argv += ["--seeds", ",".join(map(str, cfg.seed_list))]
    if b.data_bytes is not None:
        argv += ["--data-mb", f"{b.data_bytes / 1e6:g}"]
    argv += ["--eval-batches", str(b.eval_batches), "--eval-micro", str(cfg.eval_micro)]
    if b.block_size is not None:
        argv += ["--block-size", str(b.block_size)]
    if b.optimizer != "adamw":
        argv += ["--optimizer", b.optimizer]
    return argv


def _torch_missing(prog: str, quiet: bool = False) -> bool:
    """True (after saying which extra to install) when PyTorch cannot be imported. Importing it
    takes seconds, so a first line on stderr says what the wait is (not under --quiet, and on
    rank 0 only)."""
    if not quiet and _is_main():
        tell(f"{prog}: loading torch...", flush=True)
    try:
        import torch  # noqa: F401
    except ImportError:
        tell(f"{prog}: needs PyTorch; {extra_hint('calibrate')}")
        return True
    return False


def run_sweep(args: argparse.Namespace) -> int:
    if _torch_missing("budgetdsl calibrate sweep", args.quiet):
        return ExitCode.INVALID
    if args.executor == "local" and args.emit is None and args.collect is None and (
            (args.gpus_per_task or 0) > 0 or (args.nodes_per_task or 1) != 1):
        tell("budgetdsl calibrate sweep: error: --gpus-per-task and --nodes-per-task shape the tasks of "
             "--executor slurm or --emit; here, run `torchrun ... -m budgetdsl.calibrate.cluster DIR TASK` yourself")
        return ExitCode.INVALID
    folder_sweep = args.executor == "local" and (_several_seeds(args) or args.sweep_dir is not None)
    if args.collect is not None or args.executor == "slurm" or args.emit is not None or folder_sweep:
        from budgetdsl.commands.calibrate_cluster import SweepHelpers, run_cluster

        return run_cluster(args, SweepHelpers(_sweep_config, _sweep_command, _writable, render_sweep))
    if args.retry_failed or args.no_wait:
        flag = "--retry-failed" if args.retry_failed else "--no-wait"
        tell(f"budgetdsl calibrate sweep: error: {flag} is for a sweep of tasks "
             "(--executor slurm, --collect DIR, --emit, or --seeds / --sweep-dir here)")
        return ExitCode.INVALID
    from budgetdsl.calibrate.run import UsageError
    from budgetdsl.calibrate.sweep import sweep

    prog = "budgetdsl calibrate sweep"
    try:
        cfg = _sweep_config(args)
        cfg.validate()
        _writable(args.out)
        if args.plot is not None:
            _writable(args.plot, "--plot")
    except (TypeError, ValueError) as exc:
        tell(f"{prog}: error: {exc}")
        return ExitCode.INVALID
    if args.plot is not None and args.plot.suffix.lower() not in (".svg", ".png"):
        tell(f"{prog}: error: --plot {args.plot}: the picture is .svg or .png")
        return ExitCode.INVALID
    started = time.perf_counter()
    log = None if args.quiet else (lambda msg: tell(f"  {msg}", flush=True))
    try:
        outcome = sweep(cfg, args.out, command=tuple(_sweep_command(cfg)), log=log)
    except UsageError as exc:
        tell(f"{prog}: error: {exc}")
        return ExitCode.INVALID
    except OSError as exc:
        tell(f"{prog}: error: {exc.filename or args.out}: {exc.strerror or exc}")
        return ExitCode.INVALID
    sw = outcome.calibration.sweep
    if args.plot is not None:
        try:
            from budgetdsl.report.sweep_plot import draw

            draw(sw, str(args.plot))
        except ImportError:
            tell(f"{prog}: --plot needs matplotlib; {extra_hint('plot')}")
            return ExitCode.INVALID
        except OSError as exc:  # checked before the runs; the folder can still go away meanwhile
            tell(f"{prog}: error: --plot {args.plot}: {exc.strerror or exc}")
            return ExitCode.INVALID
    if not args.quiet:
        print(render_sweep(outcome.calibration, outcome.path, time.perf_counter() - started,
                           plot=args.plot))
    if outcome.status == "interrupted":
        tell(f"{prog}: interrupted; the runs measured so far are in {outcome.path}")
        return ExitCode.INTERRUPTED
    if sw.fit is None:
        tell(f"{prog}: no frontier fit: {sw.fit_error}")
        return ExitCode.NO
    return ExitCode.OK


def render_sweep(cal, path: Path, seconds: float, plot: Path | None = None) -> str:
    """A plain-text report of a sweep: the runs, the fit, B_crit beside B_simple, the picture."""
    from budgetdsl.quantities.humanize import si
    from budgetdsl.report.sweep_plot import render_text

    sw, p = cal.sweep, cal.provenance
    tpe = sw.tokens_per_example
    grid = "" if sw.lr_grid == [1.0] else f", best of lr x {', '.join(f'{m:g}' for m in sw.lr_grid)}"
    several = len(sw.seeds) > 1
    seeds = f"seeds {', '.join(map(str, sw.seeds))}" if several else f"seed {p.seed}"
    seed_col = f"{'seed':>6} " if several else ""
    lines = [
        f"frontier sweep of {p.model.name} ({p.model.n_params:,} params) on {p.data.kind} data, "
        f"{tpe} tokens/example, {seeds}: {len(sw.batches)} batches to held-out loss "
        f"{sw.target_loss:.4f} ({'given' if sw.target_from == 'given' else 'set by the pilot run'}), "
        f"{p.optimizer.name} lr {sw.lr_base:g} at {sw.lr_base_batch} x {sw.lr_rule} rule{grid}, "
        f"constant after {sw.warmup_steps} warmup steps, at most {sw.max_steps} steps",
        "",
        f"{seed_col}{'batch':>6} {'lr':>9} {'steps':>8} {'tokens':>9} {'B_simple':>9} {'time':>6}  note",
    ]
    for r in sorted(sw.runs, key=lambda r: (r.seed or 0, r.batch_examples, r.lr)):
        if not r.best and len(sw.lr_grid) > 1:
            mark = " "
        else:
            mark = "*" if len(sw.lr_grid) > 1 else " "
        steps = f"{r.steps_to_target:.1f}" if r.steps_to_target is not None else f">{r.steps_run}"
        tokens = si(r.tokens_to_target) if r.tokens_to_target is not None else "—"
        b = f"{r.b_simple:.3g}" if r.b_simple is not None else "—"
        seed = f"{r.seed:>6} " if several else ""
        lines.append(f"{seed}{r.batch_examples:>6} {r.lr:>9.3g} {steps:>8} {tokens:>9} {b:>9} "
                     f"{r.seconds:>5.0f}s{mark} {r.note or ''}".rstrip())
    lines.append("")
    f = sw.fit
    if f is not None:
        lo, hi = f.b_crit_ci_low_tokens, f.b_crit_ci_high_tokens
        points = f"{f.n_points} runs ({len(sw.seeds)} seeds)" if several else f"{f.n_points} batches"
        lines += [
            f"fit S = S_min + E_min/B over {points}: S_min = {f.s_min:.1f} steps "
            f"(±{math.sqrt(f.cov[0][0]):.0%}), E_min = {si(f.e_min_tokens)} tokens "
            f"(±{math.sqrt(f.cov[1][1]):.0%}), rms residual {f.rms_residual:.1%}",
            f"B_crit = E_min/S_min = {f.b_crit_examples:.3g} examples = {si(f.b_crit_tokens)} tokens "
            f"(±{f.b_crit_rel_se:.0%}; {f.confidence:.0%} interval {si(lo)}–{si(hi)} tokens)",
        ]
    else:
        lines.append(f"no fit: {sw.fit_error}")
    lines += sw.seed_lines()
    c = sw.comparison
    if c is not None and c.b_simple_examples is not None:
        ci = (f" ({p.estimator.confidence:.0%} interval {c.b_simple_ci_low:.3g}–{c.b_simple_ci_high:.3g})"
              if c.b_simple_ci_low is not None and c.b_simple_ci_high is not None else "")
        lines.append(f"B_simple in the same runs near the target = {c.b_simple_examples:.3g} examples = "
                     f"{si(c.b_simple_tokens)} tokens{ci}")
        if c.ratio is not None:
            mean = (f"; against B_simple averaged over training ({c.b_simple_run_mean_examples:.3g} "
                    f"examples) {c.ratio_run_mean:.2f}" if c.ratio_run_mean is not None else "")
            lines.append(f"B_crit / B_simple = {c.ratio:.2f}{mean}")
    if c is not None and c.b_simple_pre_examples is not None:
        ci = (f" ({p.estimator.confidence:.0%} interval {c.b_simple_pre_ci_low:.3g}–{c.b_simple_pre_ci_high:.3g})"
              if c.b_simple_pre_ci_low is not None and c.b_simple_pre_ci_high is not None else "")
        ratio = f"; B_crit / it = {c.ratio_pre:.3g}" if c.ratio_pre is not None else ""
        lines.append(f"B_simple of Adam's preconditioned gradient there = {c.b_simple_pre_examples:.3g} "
                     f"examples{ci}{ratio}")
    lines += ["", render_text(sw).rstrip(), ""]
    if plot is not None:
        lines.append(f"drew {plot}")
    lines.append(f"wrote {path} in {seconds:.0f} s")
    return "\n".join(lines)


def _config(args: argparse.Namespace):
    from budgetdsl.calibrate.config import QUICK, RunConfig

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
    from budgetdsl.calibrate.config import RunConfig

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
    if _torch_missing("budgetdsl calibrate", args.quiet):
        return ExitCode.INVALID
    from budgetdsl.calibrate.run import UsageError, calibrate

    try:
        cfg = _config(args)
        cfg.validate()
        _writable(args.out)
    except (TypeError, ValueError) as exc:
        tell(f"budgetdsl calibrate: error: {exc}")
        return ExitCode.INVALID
    if getattr(args, "plan", None) is not None:
        cfg = _at_plan_context(cfg, args.plan, args.quiet)
        if cfg is None:
            return ExitCode.INVALID
    started = time.perf_counter()
    try:
        outcome = calibrate(cfg, args.out, resume=args.resume, quiet=args.quiet, command=_command(cfg))
    except UsageError as exc:
        tell(f"budgetdsl calibrate: error: {exc}")
        return ExitCode.INVALID
    except OSError as exc:  # an unwritable --out, a full disk: say which file, no traceback
        tell(f"budgetdsl calibrate: error: {exc.filename or args.out}: {exc.strerror or exc}")
        return ExitCode.INVALID
    if outcome.status == "failed":
        tell(f"budgetdsl calibrate: error: {outcome.calibration.stop_reason}")
        tell(f"  a partial calibration was written to {outcome.path}")
        return ExitCode.NO
    if not args.quiet and _is_main():
        print(render_summary(outcome.calibration, outcome.path, time.perf_counter() - started))
    if outcome.status == "interrupted":
        print(
            f"budgetdsl calibrate: interrupted; partial file {outcome.path}, continue with --resume",
            file=sys.stderr,
        )
        return ExitCode.INTERRUPTED
    return ExitCode.OK


def _at_plan_context(cfg, plan_path: str, quiet: bool):
    """`cfg` at the plan's seq_len (B_crit in tokens moves with the context,
    budgetdsl.theory.context_scaling), or the longest seq_len/2^k whose micro-batch fits the free
    memory; it says on stderr which context it chose and why. None after a plan's diagnostics."""
    from budgetdsl.calibrate.hardware import context_that_fits, free_memory, resolve_device
    from budgetdsl.calibrate.model import SIZES, gpt_config
    from budgetdsl.commands._common import load_or_report
    from budgetdsl.quantities.humanize import human

    plan = load_or_report(plan_path)
    if plan is None:
        return None
    seq_len = int(plan.model.seq_len)
    prog = "budgetdsl calibrate"
    say = (lambda _m: None) if quiet or not _is_main() else tell
    if cfg.block_size is not None:
        say(f"{prog}: calibrating at --block-size {cfg.block_size} tokens per example"
            + ("" if cfg.block_size == seq_len else f", not the plan's seq_len {seq_len}; the planner scales "
               "B_crit between them"))
        return cfg
    if cfg.model not in SIZES:
        say(f"{prog}: the model {cfg.model} sets its own tokens per example; the planner scales B_crit "
            f"from them to the plan's seq_len {seq_len}")
        return cfg
    g = gpt_config(cfg.model, n_layer=cfg.n_layer, n_head=cfg.n_head, n_embd=cfg.n_embd)
    device = resolve_device(cfg.device)
    free = free_memory(device)
    context, need = context_that_fits(g.n_layer, g.n_embd, g.n_head, cfg.vocab_size or g.vocab_size, seq_len,
                                      cfg.micro_batch, free)
    if context == seq_len:
        say(f"{prog}: calibrating at the plan's seq_len, {seq_len} tokens per example")
    else:
        say(f"{prog}: calibrating at {context} tokens per example: one micro-batch of {cfg.micro_batch} at the "
            f"plan's seq_len {seq_len} needs about {human('B', need)} of activations, more than half the "
            f"{human('B', free)} free on {device.type}; the planner scales B_crit from {context} to {seq_len}")
    return cfg.with_(block_size=context)


def _writable(out, flag: str = "--out") -> None:
    """ValueError naming --out when the calibration (and its checkpoints beside it) cannot be
    written there: found before minutes of training, not at the first checkpoint (torch.save
    raised RuntimeError in /proc) or at the end (a folder as --out)."""
    import os
    import tempfile
    from pathlib import Path

    path = Path(out)
    if path.is_dir():
        example = path / ("frontier.svg" if flag == "--plot" else "calibration.json")
        raise ValueError(f"{flag} {out} is a folder; name the file, e.g. {flag} {example}")
    folder = path.parent
    if not folder.exists():  # one rule with export -o: a missing folder is refused, not made
        raise ValueError(f"{flag} {out}: no such folder {folder}; make it first (mkdir -p {folder})")
    try:
        with tempfile.NamedTemporaryFile(dir=folder, prefix=f".{path.name}.{os.getpid()}.", suffix=".probe"):
            pass
    except OSError as exc:
        raise ValueError(f"{flag} {out}: cannot write in {folder}: {exc.strerror or exc}") from None


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
        ci = (f"[{_fmt(t.ci_low)}, {_fmt(t.ci_high)}]" if t.ci_low is not None and t.ci_high is not None
              else f"[{_fmt(t.ci_low)}, unbounded)" if t.ci_low is not None else "[unbounded]")
        lines.append(
            f"{t.step:>6} {t.tokens:>11,} {t.loss_smoothed:>7.3f} {_fmt(t.b_simple):>10} {ci:>21} "
            f"{_fmt(t.b_simple_tokens):>16}"
        )
    lines.append("")
    s = cal.summary
    if s is not None and s.b_simple is not None:
        n_eff = f", {s.n_eff:.0f} effective steps" if s.n_eff is not None else ""
        ci = (
            f"{s.confidence:.0%} interval [{_fmt(s.ci_low)}, {_fmt(s.ci_high)}] examples{n_eff}"
            if s.ci_low is not None and s.ci_high is not None
            else f"{s.confidence:.0%} interval [{_fmt(s.ci_low)}, unbounded) examples{n_eff}: |G|^2 not "
            "resolved, run longer" if s.ci_low is not None
            else f"interval unbounded{n_eff} (|G|^2 not resolved: run longer)"
        )
        lines.append(
            f"B_simple = {_fmt(s.b_simple)} examples = {_fmt(s.b_simple_tokens)} tokens ({ci}) "
            f"at held-out loss {s.loss:.3f}"
        )
    if cal.fit is not None:
        f = cal.fit
        lines.append(
            f"fit B_crit(L) = {f.b_star_tokens:.3g} tokens / L^(1/{f.alpha:.3g}), alpha = {f.alpha:.3g} "
            f"+- {f.alpha_se:.2g}, over losses {f.loss_min:.3f}-{f.loss_max:.3f} ({f.n_points} points"
            + (f", {f.n_censored} of them bounds" if f.n_censored else "")
            + (f"; slope {f.slope_z:.1f} standard errors from 0" if f.slope_z is not None else "") + ")"
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
