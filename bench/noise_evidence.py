"""Which noise scale tracks B_crit: the raw B_simple or that of Adam's preconditioned gradient?
And how does B_crit (in tokens) move with the context (tokens per example)?

For each proxy × context × seed, `budgetdsl calibrate sweep` trains the proxy at several batch sizes
to one held-out loss (the same for both contexts of a proxy), fits S = S_min + E_min/B and writes
B_crit = E_min/S_min beside the raw and the preconditioned B_simple pooled over the same runs near
that loss (`calibrate/sweep.py`, `compare`). This script only runs the sweeps and reads their files:

    nice .venv/bin/python bench/noise_evidence.py --out-dir /tmp/noise-evidence \\
        --csv docs/noise-evidence.csv --svg docs/noise-evidence.svg

It prints the per-cell table, the geometric-mean ratio B_crit/B_simple and the rms log error of each
estimator, and the exponent γ of B_crit(tokens) ∝ context^γ (`budgetdsl.theory.context_scaling`).
"""

from __future__ import annotations

import argparse
import csv
import math
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from budgetdsl.plan.calibration_file import load_calibration
from budgetdsl.theory.context_scaling import fit_context_exponent
from budgetdsl.theory.noise_scale import DEFAULT_NOISE_SCALE, agreement, preferred


@dataclass(frozen=True)
class Proxy:
    """A proxy's sweep settings: its lr at `lr_base_batch` (sqrt rule), batches, target loss."""

    name: str
    lr: float
    lr_base_batch: int
    batches: str
    target_loss: float
    max_steps: int


# gpt-nano trains at the lr of `calibrate sweep --quick`; gpt-micro at the sweep's default. Each
# target is a loss the smallest batch reaches within max_steps at the shorter context; the longer
# context reaches it sooner (more tokens of context per predicted token).
PROXIES = {
    "gpt-nano": Proxy("gpt-nano", 3e-3, 16, "4,8,16,32,64", 2.65, 600),
    "gpt-micro": Proxy("gpt-micro", 1e-3, 32, "8,16,32,64,128", 2.45, 600),
}


def sweep_file(out_dir: Path, proxy: str, context: int, seed: int) -> Path:
    return out_dir / f"{proxy}-ctx{context}-seed{seed}.json"


def run_sweeps(args) -> None:
    args.out_dir.mkdir(parents=True, exist_ok=True)
    # One torch thread: the proxies are tiny, and on a shared machine a second thread spin-waits
    # (tests/calibrate/conftest.py). Seeds outermost, so a stopped run leaves whole seeds.
    env = {**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}
    for seed in args.seeds:
        for name in args.proxies:
            p = PROXIES[name]
            for context in args.contexts:
                path = sweep_file(args.out_dir, name, context, seed)
                if path.exists():
                    continue
                cmd = [sys.executable, "-m", "budgetdsl", "calibrate", "sweep", "--model", name,
                       "--block-size", str(context), "--batches", p.batches, "--target-loss", str(p.target_loss),
                       "--max-steps", str(p.max_steps), "--lr", str(p.lr), "--lr-base-batch", str(p.lr_base_batch),
                       "--seed", str(seed), "--data-mb", str(args.data_mb), "--eval-batches", "4",
                       "--device", "cpu", "--quiet", "--out", str(path)]
                print("$", " ".join(cmd[1:]), flush=True)
                subprocess.run(cmd, check=False, env=env)  # a sweep without a fit still writes its file


def rows(args) -> list[dict]:
    out = []
    for name in args.proxies:
        for context in args.contexts:
            for seed in args.seeds:
                path = sweep_file(args.out_dir, name, context, seed)
                if not path.exists():
                    continue
                sw = load_calibration(path).sweep
                assert sw is not None
                cmp, fit, tpe = sw.comparison, sw.fit, sw.tokens_per_example
                row = {"proxy": name, "context": context, "seed": seed, "target_loss": sw.target_loss,
                       "b_crit_tokens": fit.b_crit_tokens if fit else None,
                       "b_crit_rel_se": fit.b_crit_rel_se if fit else None,
                       "b_raw_tokens": None, "b_pre_tokens": None,
                       "ratio_raw": None, "ratio_pre": None, "seconds": sw.seconds}
                if cmp is not None:
                    if cmp.b_simple_examples:
                        row["b_raw_tokens"] = cmp.b_simple_examples * tpe
                    if cmp.b_simple_pre_examples:
                        row["b_pre_tokens"] = cmp.b_simple_pre_examples * tpe
                    row["ratio_raw"], row["ratio_pre"] = cmp.ratio, cmp.ratio_pre
                out.append(row)
    return out


def draw(table: list[dict], path: Path) -> None:
    from budgetdsl.report.figures import new_figure, plain_log_labels, plain_number

    fig, ax = new_figure()
    ax.set_yscale("log")
    markers = {"gpt-nano": "o", "gpt-micro": "s"}
    for key, color, label in (("b_raw_tokens", "#1f77b4", "raw B_simple"),
                              ("b_pre_tokens", "#d62728", "preconditioned B_simple (Adam P⊙g)")):
        for r in table:
            if r[key] and r["b_crit_tokens"]:
                ax.scatter(r["b_crit_tokens"], r[key], color=color, marker=markers.get(r["proxy"], "^"),
                           s=16 if r["context"] == min(x["context"] for x in table) else 36,
                           alpha=0.75, label=label)
                label = None
    lims = [x for r in table for x in (r["b_crit_tokens"], r["b_raw_tokens"], r["b_pre_tokens"]) if x]
    lo, hi = min(lims) / 1.5, max(lims) * 1.5
    ax.plot([lo, hi], [lo, hi], color="#555555", lw=1, ls="--", label="B_simple = B_crit")
    ax.set_xlim(lo, hi)
    ax.set_ylim(lo, hi)
    ax.set_xlabel("B_crit measured by the frontier sweep (tokens)")
    ax.set_ylabel("B_simple near the same loss (tokens)")
    ax.set_title("Raw and preconditioned B_simple against B_crit\n"
                 "circles gpt-nano, squares gpt-micro; small 64, large 128 tokens/example")
    plain_log_labels(ax.xaxis, plain_number)
    plain_log_labels(ax.yaxis, plain_number)
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, metadata={"Date": None})


def _f(x: float | None, fmt: str = "{:,.0f}") -> str:
    return "—" if x is None else fmt.format(x)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out-dir", type=Path, default=Path("noise-evidence"))
    ap.add_argument("--proxies", nargs="+", default=list(PROXIES), choices=list(PROXIES))
    ap.add_argument("--contexts", nargs="+", type=int, default=[64, 128])
    ap.add_argument("--seeds", nargs="+", type=int, default=[1, 2, 3])
    ap.add_argument("--data-mb", type=float, default=2)
    ap.add_argument("--no-run", action="store_true", help="analyse the files in --out-dir only")
    ap.add_argument("--csv", type=Path)
    ap.add_argument("--svg", type=Path)
    args = ap.parse_args(argv)
    if not args.no_run:
        run_sweeps(args)
    table = rows(args)
    if not table:
        print("no sweep files", file=sys.stderr)
        return 1
    print("| proxy | context | seed | loss | B_crit (sweep) | ±se | raw B_simple | B_crit/raw "
          "| preconditioned | B_crit/pre |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in table:
        print(f"| {r['proxy']} | {r['context']} | {r['seed']} | {r['target_loss']:.3g} | "
              f"{_f(r['b_crit_tokens'])} | {_f(r['b_crit_rel_se'], '{:.0%}')} | {_f(r['b_raw_tokens'])} | "
              f"{_f(r['ratio_raw'], '{:.2f}')} | {_f(r['b_pre_tokens'])} | {_f(r['ratio_pre'], '{:.3g}')} |")
    print()
    ratios = {"raw": [r["ratio_raw"] for r in table], "preconditioned": [r["ratio_pre"] for r in table]}
    for label, values in ratios.items():
        a = agreement(values)
        print(f"{label}: geometric-mean B_crit/B_simple {a.geo_mean:.3g}, rms ln error {a.rms_log:.2f} "
              f"(a factor {math.exp(a.rms_log):.2f}), sd of ln {a.sd_log:.2f}, {a.n} sweeps")
    print(f"closer to B_crit (smaller rms ln error): {preferred(ratios)}; the planner's default "
          f"(budgetdsl.theory.noise_scale): {DEFAULT_NOISE_SCALE}")
    print()
    print("| proxy | context | seeds | B_crit/raw, geometric mean (range) | rms ln | "
          "B_crit/preconditioned (range) | rms ln |")
    print("|---|---|---|---|---|---|---|")
    for name in args.proxies:
        for context in args.contexts:
            cell = [r for r in table if r["proxy"] == name and r["context"] == context]
            parts = []
            for key in ("ratio_raw", "ratio_pre"):
                values = [r[key] for r in cell if r[key]]
                a = agreement(values)
                span = f"{min(values):.2g}–{max(values):.2g}" if values else "—"
                parts += [f"{a.geo_mean:.2f} ({span})", f"{a.rms_log:.2f}"]
            print(f"| {name} | {context} | {len(cell)} | {' | '.join(parts)} |")
    pairs = []
    for name in args.proxies:
        for seed in args.seeds:
            by_ctx = {r["context"]: r for r in table if r["proxy"] == name and r["seed"] == seed
                      and r["b_crit_tokens"]}
            if len(by_ctx) >= 2:
                pairs.append([(c, by_ctx[c]["b_crit_tokens"], by_ctx[c]["b_crit_rel_se"]) for c in sorted(by_ctx)])
    if pairs:
        print()
        print("| proxy | seed | B_crit at " + " | at ".join(f"{c}" for c in args.contexts) + " (tokens) | γ |")
        print("|---|---|" + "---|" * len(args.contexts) + "---|")
        fit = fit_context_exponent(pairs)
        keys = [(name, seed) for name in args.proxies for seed in args.seeds
                if len({r["context"] for r in table if r["proxy"] == name and r["seed"] == seed
                        and r["b_crit_tokens"]}) >= 2]
        for (name, seed), group, g in zip(keys, pairs, fit.per_pair):
            cells = " | ".join(f"{b:,.0f} ± {se:.0%}" for _, b, se in group)
            print(f"| {name} | {seed} | {cells} | {g:.2f} |")
        print(f"context exponent: B_crit(tokens) ∝ context^γ, γ = {fit.gamma:.3f} ± {fit.sigma:.3f} "
              f"(standard error of the mean {fit.se_mean:.3f}, spread {fit.spread:.3f} over "
              f"{fit.n} proxy-seed pairs: {', '.join(f'{g:.2f}' for g in fit.per_pair)})")
    if args.csv:
        args.csv.parent.mkdir(parents=True, exist_ok=True)
        with args.csv.open("w", newline="") as fh:
            w = csv.DictWriter(fh, fieldnames=list(table[0]), lineterminator="\n")
            w.writeheader()
            for r in table:
                w.writerow({k: (f"{v:.6g}" if isinstance(v, float) else v) for k, v in r.items()})
        print(f"wrote {args.csv}")
    if args.svg:
        draw(table, args.svg)
        print(f"wrote {args.svg}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
