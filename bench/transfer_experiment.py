"""The transfer claim, measured: is B_simple at equal loss independent of the model's size on the same
data? (Kaplan et al. 2020 section 5.1, fig. 10: B_crit depends on the loss, not on N.)

Calibrates two or three GPT proxy sizes on the same data and settings, then compares B_simple(L)
where their held-out losses overlap (trajectory points at common losses, fitted laws B*/L^(1/alpha))
in a Markdown table, a CSV and an SVG: `nice .venv/bin/python bench/transfer_experiment.py
--out-dir /tmp/transfer --svg docs/transfer-gpt-stdlib.svg --csv docs/transfer-gpt-stdlib.csv`.
"""

from __future__ import annotations

import argparse
import csv
import math
import subprocess
import sys
from pathlib import Path

import numpy as np

from budgetdsl.plan.calibration_file import load_calibration

SIZES = ("gpt-nano", "gpt-micro", "gpt-mini")


def run_calibrations(args) -> dict[str, Path]:
    out = {}
    args.out_dir.mkdir(parents=True, exist_ok=True)
    for size in args.sizes:
        path = args.out_dir / f"{size}.json"
        out[size] = path
        if args.no_run or path.exists():
            continue
        cmd = [sys.executable, "-m", "budgetdsl", "calibrate", "--model", size, "--data", "stdlib",
               "--data-mb", str(args.data_mb), "--block-size", str(args.block_size),
               "--steps", str(args.steps), "--batch", str(args.batch), "--micro-batch", str(args.micro_batch),
               "--lr", str(args.lr), "--eval-every", str(args.eval_every), "--seed", str(args.seed),
               "--device", "cpu", "--quiet", "--out", str(path)]
        print("$", " ".join(cmd[1:]), flush=True)
        subprocess.run(cmd, check=True)
    return out


def bounded_points(cal) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(loss, B_simple tokens, low, high) of the trajectory points with a bounded interval,
    after the warm-up and one EMA window (the points the fit uses)."""
    beta = cal.provenance.estimator.ema_beta
    start = cal.provenance.optimizer.warmup_steps + (1 + beta) / (1 - beta)
    tpe = cal.provenance.batch.tokens_per_example
    pts = [p for p in cal.trajectory
           if p.step >= start and p.ci_low is not None and p.ci_high is not None and p.b_simple]
    pts.sort(key=lambda p: p.loss_smoothed)
    return (np.array([p.loss_smoothed for p in pts]), np.array([p.b_simple * tpe for p in pts]),
            np.array([max(p.ci_low, 1e-9) * tpe for p in pts]), np.array([p.ci_high * tpe for p in pts]))


def compare(a, b, n_losses: int) -> list[dict]:
    """At common losses inside both fitted ranges: each size's B from its fit (with the fit's
    relative standard error) and interpolated between its measured points; [] when the ranges do
    not overlap."""
    if a.fit is None or b.fit is None:
        return []
    lo, hi = max(a.fit.loss_min, b.fit.loss_min), min(a.fit.loss_max, b.fit.loss_max)
    if lo >= hi:
        return []
    rows = []
    for loss in np.linspace(lo, hi, n_losses):
        row = {"loss": float(loss)}
        for key, cal in (("a", a), ("b", b)):
            row[f"{key}_fit"], row[f"{key}_se"] = cal.b_crit_tokens_at(float(loss))
            x, y, _, _ = bounded_points(cal)
            row[f"{key}_points"] = float(np.exp(np.interp(loss, x, np.log(y)))) if len(x) >= 2 else math.nan
        lr = math.log(row["b_fit"] / row["a_fit"])
        row["ratio"], row["z"] = math.exp(lr), lr / math.hypot(row["a_se"], row["b_se"])
        rows.append(row)
    return rows


def draw(cals: dict[str, object], path: Path) -> None:
    from budgetdsl.report.figures import new_figure, plain_log_labels, plain_number

    fig, ax = new_figure()
    ax.set_xscale("linear")  # a loss range of a few nats reads better on a linear axis
    colors = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd")
    for (size, cal), color in zip(cals.items(), colors):
        x, y, lo, hi = bounded_points(cal)
        n = cal.provenance.model.n_params
        ax.errorbar(x, y, yerr=[y - lo, hi - y], fmt="o", ms=3, color=color, alpha=0.55, elinewidth=0.8,
                    label=f"{size} ({n / 1e6:.2g}M params): B_simple, 95% interval")
        if cal.fit is not None:
            ls = np.linspace(cal.fit.loss_min, cal.fit.loss_max, 50)
            ax.plot(ls, cal.fit.b_star_tokens / ls ** (1 / cal.fit.alpha), color=color, lw=1.8,
                    label=f"{size} fit B*/L^(1/α), α = {cal.fit.alpha:.2g}")
    ax.set_xlabel("held-out loss L (nats per byte, stdlib corpus)")
    ax.set_ylabel("B_simple (tokens)")
    ax.invert_xaxis()  # training moves right: the loss falls
    ax.set_title("B_simple against the loss, three proxy sizes on the same data")
    plain_log_labels(ax.yaxis, plain_number)
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, metadata={"Date": None})


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out-dir", type=Path, default=Path("transfer-runs"))
    ap.add_argument("--sizes", nargs="+", default=list(SIZES))
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--micro-batch", type=int, default=8)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--block-size", type=int, default=64, help="the same sequence length for every size")
    ap.add_argument("--eval-every", type=int, default=10)
    ap.add_argument("--data-mb", type=float, default=2)
    ap.add_argument("--seed", type=int, default=1337)
    ap.add_argument("--losses", type=int, default=5, help="common losses compared")
    ap.add_argument("--no-run", action="store_true", help="analyse the files in --out-dir only")
    ap.add_argument("--svg", type=Path)
    ap.add_argument("--csv", type=Path)
    args = ap.parse_args(argv)

    paths = run_calibrations(args)
    cals = {size: load_calibration(p) for size, p in paths.items() if p.exists()}
    print("\n| size | params | held-out loss fitted | points | alpha | B_simple at the end (tokens) |")
    print("|---|---|---|---|---|---|")
    for size, cal in cals.items():
        f, s = cal.fit, cal.summary
        rng = f"{f.loss_min:.3f}–{f.loss_max:.3f}" if f else f"no fit ({cal.fit_error})"
        print(f"| {size} | {cal.provenance.model.n_params:,} | {rng} | {f.n_points if f else 0} | "
              f"{f'{f.alpha:.3f} ± {f.alpha_se:.3f}' if f else '—'} | {s.b_simple_tokens:,.0f} at L = {s.loss:.3f} |")
    sizes = list(cals)
    table = []
    print("\nB_simple in tokens at equal held-out loss, each pair of sizes where their fitted ranges overlap:")
    print("fit ± its relative standard error / measured points interpolated; ratio = larger model / smaller,")
    print("z = ln(ratio) / combined standard error")
    for i, a in enumerate(sizes):
        for b in sizes[i + 1:]:
            rows = compare(cals[a], cals[b], args.losses)
            if not rows:
                print(f"\n{b} against {a}: no common fitted loss range")
                continue
            print(f"\n| loss | {a} | {b} | ratio | z |")
            print("|---|---|---|---|---|")
            for r in rows:
                print(f"| {r['loss']:.3f} | {r['a_fit']:,.0f} ± {r['a_se']:.0%} / {r['a_points']:,.0f} | "
                      f"{r['b_fit']:,.0f} ± {r['b_se']:.0%} / {r['b_points']:,.0f} | {r['ratio']:.2f} | "
                      f"{r['z']:+.1f} |")
                table.append([a, b, f"{r['loss']:.4f}", *(f"{r[k]:.6g}" for k in
                              ("a_fit", "a_se", "a_points", "b_fit", "b_se", "b_points", "ratio", "z"))])
            gm = math.exp(sum(math.log(r["ratio"]) for r in rows) / len(rows))
            print(f"{b} / {a}: geometric-mean ratio {gm:.2f}, largest |z| {max(abs(r['z']) for r in rows):.1f}")
    if args.csv:
        args.csv.parent.mkdir(parents=True, exist_ok=True)
        with args.csv.open("w", newline="") as fh:
            w = csv.writer(fh)
            w.writerow(["smaller", "larger", "loss", "smaller_fit_tokens", "smaller_fit_rel_se",
                        "smaller_points_tokens", "larger_fit_tokens", "larger_fit_rel_se", "larger_points_tokens",
                        "ratio", "z"])
            w.writerows(table)
    if args.svg:
        draw(cals, args.svg)
        print(f"\nwrote {args.svg}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
