"""`budgetdsl calibrate sweep` as tasks of a sweep folder: `--executor slurm`, `--collect DIR
[--retry-failed]`, `--emit kubeflow|pytorchjob`, and a local sweep of several seeds (or with
`--sweep-dir`), whose tasks run here one after another. Imported by `calibrate` only for these; the
Slurm side needs the `cluster` extra (submitit), the rest the `calibrate` extra.

Exit codes: 0 submitted (--no-wait) or every task collected and fitted; 1 tasks failed or no fit
(the file written says which batches it rests on); 2 bad input, no Slurm, a refused budget, another
collector on the folder.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from budgetdsl.commands._common import extra_hint, load_or_report
from budgetdsl.io.exit_codes import ExitCode
from budgetdsl.io.terminal_text import tell

PROG = "budgetdsl calibrate sweep"


@dataclass(frozen=True)
class SweepHelpers:
    """What the local sweep's command module lends this one (passed in: no import circle)."""

    config: Callable  # argparse.Namespace -> SweepConfig
    command: Callable  # SweepConfig -> the reproducing command line
    writable: Callable  # (path) -> None, ValueError when --out cannot be written
    render: Callable  # (calibration, path, seconds, plot=None) -> the report


def _options(args: argparse.Namespace, plan):
    from budgetdsl.calibrate.cluster import SlurmOptions, parse_time

    launch = plan.launch if plan is not None and plan.launch is not None else None
    return SlurmOptions(
        partition=args.partition if args.partition is not None else (launch.partition if launch else None),
        account=args.account if args.account is not None else (launch.account if launch else None),
        time_min=parse_time(args.time) if args.time is not None else 60,
        gpus_per_task=args.gpus_per_task if args.gpus_per_task is not None else 0,
        nodes_per_task=args.nodes_per_task if args.nodes_per_task is not None else 1,
        cpus_per_task=args.cpus_per_task if args.cpus_per_task is not None else 1)


def _price(cfg, opts, args, plan, say) -> tuple[float, int]:
    """Print the tasks' budget (GPU-hours each and in all, from the cost model) and return the total
    the --max-gpu-hours guard compares (the model's estimate, or GPUs × --time without a GPU preset)
    with the proxy's tokens per example."""
    from budgetdsl.calibrate.cluster import task_costs
    from budgetdsl.calibrate.factory import build_proxy
    from budgetdsl.cost.flops import training_flops_per_token
    from budgetdsl.hardware.gpus import find_preset
    from budgetdsl.quantities.humanize import si

    b = cfg.base
    proxy = build_proxy(b.model, b.data, block_size=b.block_size, n_layer=b.n_layer, n_head=b.n_head,
                        n_embd=b.n_embd, vocab_size=b.vocab_size, data_bytes=b.data_bytes,
                        tokens_per_example=b.tokens_per_example)
    info, tpe = proxy.model_info, proxy.tokens_per_example
    conf = info.get("config") or {}
    f = training_flops_per_token(info["n_params"], conf.get("n_layer"), conf.get("n_embd"), tpe)
    gpu = args.gpu or (plan.hardware.gpu if plan is not None else None)
    preset = find_preset(gpu) if gpu else None
    if gpu and preset is None:
        raise ValueError(f"--gpu {gpu}: no such GPU preset (see `budgetdsl plan --list-gpus`)")
    mfu = args.mfu if args.mfu is not None else (plan.hardware.mfu if plan is not None else None)
    mfu_from = "--mfu" if args.mfu is not None else "hardware.mfu"
    if mfu is None and preset is not None:
        mfu, mfu_from = preset.kernel_efficiency, f"{preset.name}'s fitted kernel efficiency"
    if mfu is not None and not 0 < mfu <= 1:
        raise ValueError("--mfu must be in (0, 1]")
    costs = task_costs(cfg, opts, f, tpe, preset.peak_flops if preset else None, mfu)
    say(f"budget: {len(costs)} tasks of {info['name']} ({info['n_params']:,} params, {si(f)} FLOP/token), "
        f"{opts.gpus_per_task} GPU(s) x {opts.nodes_per_task} node(s) ({opts.processes} process(es)) and at most "
        f"{opts.time_min} min each")
    for c in costs:
        est = f"{c.gpu_hours:.3g} GPU-h" if c.gpu_hours is not None else "—"
        say(f"  {c.key:<12} {si(c.tokens):>7} tokens {si(c.flops):>7} FLOP  {est:>12}  "
            f"(limit {c.limit_gpu_hours:.3g} GPU-h)")
    limit = sum(c.limit_gpu_hours for c in costs)
    if opts.gpus_per_task and preset is not None and mfu is not None:
        total = sum(c.gpu_hours or 0.0 for c in costs)
        say(f"  total {total:.3g} GPU-hours on {preset.name} at MFU {mfu:.2g} ({mfu_from}); "
            f"the time limits allow {limit:.3g}")
        return total, tpe
    if opts.gpus_per_task:
        say(f"  total: at most {limit:.3g} GPU-hours (GPUs x --time; name --gpu or a plan's hardware.gpu "
            "for the cost model's estimate)")
        return limit, tpe
    say("  total 0 GPU-hours: CPU tasks (--gpus-per-task 0)")
    return 0.0, tpe


def run_cluster(args: argparse.Namespace, helpers: SweepHelpers) -> int:
    try:
        import budgetdsl.calibrate.cluster as cl
        from budgetdsl.calibrate.run import UsageError
    except ImportError as exc:  # pragma: no cover - torch is there (checked before)
        tell(f"{PROG}: needs {exc.name}; {extra_hint('calibrate')}")
        return ExitCode.INVALID
    say = (lambda _m: None) if args.quiet else (lambda m: tell(m, flush=True))
    try:
        if args.collect is not None:
            return _collect(args, cl, helpers, say)
        if args.retry_failed:
            raise ValueError("--retry-failed goes with --collect DIR")
        if args.executor == "local" and args.emit is None:
            return _local(args, cl, helpers, say)
        if args.sweep_dir is None:
            raise ValueError("--executor slurm and --emit need --sweep-dir DIR (the sweep's own folder)")
        return _start(args, cl, helpers, say)
    except cl.ClusterError as exc:
        tell(f"{PROG}: error: {exc}")
        return ExitCode.INVALID
    except (TypeError, ValueError, UsageError) as exc:
        tell(f"{PROG}: error: {exc}")
        return ExitCode.INVALID
    except OSError as exc:
        tell(f"{PROG}: error: {exc.filename or ''}: {exc.strerror or exc}")
        return ExitCode.INVALID


def _need_submitit() -> bool:
    try:
        import submitit  # noqa: F401
    except ImportError:
        tell(f"{PROG}: --executor slurm needs submitit; {extra_hint('cluster')}")
        return False
    return True


def _start(args, cl, helpers: SweepHelpers, say) -> int:
    plan = None
    if args.plan is not None:
        plan = load_or_report(args.plan)
        if plan is None:
            return ExitCode.INVALID
    cfg = helpers.config(args)
    cfg.validate()
    opts = _options(args, plan)
    opts.validate()
    opts.check_split(cfg)  # the task's processes share each step's micro-batches evenly
    folder = cl.safe_folder(args.sweep_dir)
    out = args.out if args.out != Path("sweep.json") else folder / "calibration.json"
    if out.parent.exists() or out.parent == folder:
        if out.parent.exists():
            helpers.writable(out)
    else:
        raise ValueError(f"--out {out}: no such folder {out.parent}; make it first (mkdir -p {out.parent})")
    if args.emit is None and not _need_submitit():
        return ExitCode.INVALID
    total, tpe = _price(cfg, opts, args, plan, say)
    if args.max_gpu_hours is not None and total > args.max_gpu_hours:
        tell(f"{PROG}: error: the sweep costs {total:.3g} GPU-hours, above --max-gpu-hours "
             f"{args.max_gpu_hours:g}; nothing was submitted (fewer or smaller batches, fewer steps, or raise "
             "--max-gpu-hours)")
        return ExitCode.INVALID
    if args.emit is not None:
        return _emit(args, cl, cfg, opts, folder, out, plan, tpe, say)
    cl.check_slurm(opts)  # before the folder is made: no Slurm, nothing left behind
    manifest = cl.prepare(folder, cfg, out, opts, helpers.command(cfg), tpe)
    cl.submit(folder, manifest, [t["key"] for t in manifest["tasks"]], say)
    if args.no_wait:
        say(f"follow it with: budgetdsl calibrate sweep --collect {folder}")
        return ExitCode.OK
    return _follow(args, cl, helpers, folder, say)


def _local(args, cl, helpers: SweepHelpers, say) -> int:
    """Several seeds (or --sweep-dir) here: every (batch, seed) is a task of a sweep folder, run one
    after another in this process, so that --collect and --retry-failed work as on a cluster."""
    import os

    cfg = helpers.config(args)
    cfg.validate()
    helpers.writable(args.out)
    if args.plot is not None:
        if args.plot.suffix.lower() not in (".svg", ".png"):
            raise ValueError(f"--plot {args.plot}: the picture is .svg or .png")
        helpers.writable(args.plot, "--plot")
    folder = Path(os.path.abspath(args.sweep_dir if args.sweep_dir is not None else args.out.with_suffix(".tasks")))
    if (folder / cl.MANIFEST).exists():
        raise ValueError(f"--sweep-dir {folder} already holds a sweep; finish it with `budgetdsl calibrate sweep "
                         f"--collect {folder} --retry-failed`, or choose a new folder")
    started = time.perf_counter()
    manifest = cl.prepare(folder, cfg, args.out, cl.SlurmOptions(), helpers.command(cfg), executor="local")
    say(f"{len(manifest['tasks'])} tasks (batch, seed) in {folder}, run here one after another")
    got, interrupted = cl.run_local(folder, min_batches=args.min_batches or cl.MIN_BATCHES, say=say)
    if interrupted:
        tell(f"{PROG}: interrupted; what was measured is in {args.out}; continue with: budgetdsl calibrate sweep "
             f"--collect {folder} --retry-failed")
        return ExitCode.INTERRUPTED
    return _report(args, cl, helpers, folder, got, started)


def _collect(args, cl, helpers: SweepHelpers, say) -> int:
    folder = Path(args.collect)
    if cl.read_manifest(folder).get("executor") == "local":
        started = time.perf_counter()
        if not args.retry_failed:
            got = cl.collect(folder, wait=False, min_batches=args.min_batches or cl.MIN_BATCHES, say=say)
            return _report(args, cl, helpers, folder, got, started)
        got, interrupted = cl.run_local(folder, min_batches=args.min_batches or cl.MIN_BATCHES, say=say)
        if interrupted:
            tell(f"{PROG}: interrupted; continue with: budgetdsl calibrate sweep --collect {folder} --retry-failed")
            return ExitCode.INTERRUPTED
        return _report(args, cl, helpers, folder, got, started)
    if args.retry_failed:
        if not _need_submitit():
            return ExitCode.INVALID
        before = cl.retry_failed(folder, say)
        failed = [s for s in before if s.state == "failed"]
        if not failed:
            say("no failed task to resubmit")
        else:
            say("resubmitted " + "; ".join(f"{s.key} (was {s.slurm or s.state}: {s.reason}"
                                          + (f"; log {s.log})" if s.log else ")") for s in failed))
        if args.no_wait:
            return ExitCode.OK
    return _follow(args, cl, helpers, folder, say)


def _follow(args, cl, helpers: SweepHelpers, folder: Path, say) -> int:
    started = time.perf_counter()
    if not args.poll > 0:
        raise ValueError("--poll must be a positive number of seconds")
    got = cl.collect(folder, wait=not args.no_wait, poll_s=args.poll,
                     min_batches=args.min_batches or cl.MIN_BATCHES, say=say)
    return _report(args, cl, helpers, folder, got, started)


def _report(args, cl, helpers: SweepHelpers, folder: Path, got, started: float) -> int:
    manifest = cl.read_manifest(folder)
    local = manifest.get("executor") == "local"
    failed = [s for s in got.states if s.state == "failed"]
    for s in failed:
        if local:
            tell(f"{PROG}: task {s.key} failed: {s.reason}")
            continue
        tell(f"{PROG}: task {s.key} failed: Slurm {s.slurm or 'state unknown'}, {s.reason}; "
             + (f"log {s.log}" if s.log else "no log (it never started)"))
    if failed:
        tell(f"{PROG}: " + ("run them and the tasks not run yet here" if local else "resubmit them alone")
             + f" with: budgetdsl calibrate sweep --collect {folder} --retry-failed")
    cal = got.calibration
    if cal is None:
        if not args.quiet:
            tell(f"no task finished yet; {cl.progress_line(got.states)}")
        return ExitCode.OK if args.no_wait and not failed else ExitCode.NO
    plot = args.plot if local and args.collect is None else None  # checked by _local before the runs
    if plot is not None:
        try:
            from budgetdsl.report.sweep_plot import draw

            draw(cal.sweep, str(plot))
        except ImportError:
            tell(f"{PROG}: --plot needs matplotlib; {extra_hint('plot')}")
            return ExitCode.INVALID
    if not args.quiet:
        print(helpers.render(cal, Path(manifest["out"]), time.perf_counter() - started, plot=plot))
        if cal.interrupted:
            print(f"{cal.stop_reason}")
    if cal.sweep.fit is None:
        tell(f"{PROG}: no frontier fit: {cal.sweep.fit_error}")
        return ExitCode.NO if not (args.no_wait and not failed) else ExitCode.OK
    if failed:
        return ExitCode.NO
    return ExitCode.OK


def _emit(args, cl, cfg, opts, folder: Path, out: Path, plan, tpe: int, say) -> int:
    from budgetdsl.calibrate.cluster_kubernetes import emit_manifests

    manifest = cl.prepare(folder, cfg, out, opts, ["budgetdsl", "calibrate", "sweep", "--emit", args.emit], tpe)
    paths = emit_manifests(folder, manifest, args.emit, plan)
    for p in paths:
        say(f"wrote {p}")
    say(f"each task writes {folder}/tasks/<task>/result.json: mount {folder} at the same path in every pod; "
        f"then collect with: budgetdsl calibrate sweep --collect {folder} --no-wait")
    return ExitCode.OK
