"""Several seeds per batch (`calibrate sweep --seeds`): one task per (batch, seed), one pilot, one
fit over every point of every seed (the seeds' scatter widens its interval), the steps of each
batch by seed and each seed's own B_crit in the file, the report and a plan citing the file; the
local multi-seed sweep keeps its tasks in a folder, so --collect and --retry-failed work here."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from budgetdsl.calibrate import cluster as cl  # noqa: E402
from budgetdsl.calibrate.sweep import fit_sweep, seed_spread  # noqa: E402
from budgetdsl.calibrate.sweep_config import QUICK, QUICK_BASE, SweepConfig  # noqa: E402

from budgetdsl.plan.calibration_file import SweepRun, load_calibration  # noqa: E402
from budgetdsl.theory.frontier_fit import fit_frontier  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
# gpt-nano, three batches, a short pilot: each task is a few seconds at one thread.
TINY = ["calibrate", "sweep", "--quick", "--batches", "4,8,16", "--pilot-steps", "60"]


def _cfg(**changes) -> SweepConfig:
    c = SweepConfig()
    return c.with_(base=c.base.with_(**QUICK_BASE), **{**QUICK, "batches": (4, 8, 16), **changes})


def _run(batch: int, seed: int, steps: float) -> SweepRun:
    return SweepRun(batch_examples=batch, batch_tokens=batch * 32, micro_batch_examples=1, lr=1e-3,
                    lr_multiplier=1.0, best=True, reached=True, steps_run=int(steps) + 1, steps_to_target=steps,
                    examples_to_target=steps * batch, tokens_to_target=steps * batch * 32, final_loss=2.0,
                    eval_steps=[0], eval_losses=[2.0], grad_sq=None, trace_sigma=None, b_simple=None,
                    b_simple_run_mean=None, seconds=1.0, seed=seed)


# --- the tasks, the seeds, the cost ----------------------------------------------------------

def test_one_task_per_batch_and_seed_and_one_pilot():
    tasks = cl.tasks_of(_cfg(seeds=(1337, 1338)))
    assert [t.key for t in tasks] == ["b4-s1337", "b8-s1337", "b16-s1337", "b4-s1338", "b8-s1338", "b16-s1338"]
    assert [t.key for t in tasks if t.pilot] == ["b4-s1337"]  # the first seed's smallest batch
    assert not any(t.pilot for t in cl.tasks_of(_cfg(seeds=(1337, 1338), target_loss=2.5)))


def test_the_cost_counts_every_batch_and_seed():
    one, two = (cl.task_costs(_cfg(seeds=s), cl.SlurmOptions(gpus_per_task=1), 1e5, 32, 1e15, 0.5)
                for s in ((), (1337, 1338)))
    assert len(two) == 2 * len(one) == 6
    # the second seed's smallest batch is no pilot: it may train to --max-steps
    by_key = {c.key: c for c in two}
    cfg = _cfg()
    assert by_key["b4-s1338"].tokens == by_key["b4-s1337"].tokens * cfg.steps_limit / cfg.pilot_steps
    assert sum(c.gpu_hours for c in two) > 2 * sum(c.gpu_hours for c in one) - 1e-12


@pytest.mark.parametrize("args, message", [
    (["--seeds", "0"], "a count of seeds is at least 1"),
    (["--seeds", "3,3"], "distinct seeds"),
    (["--seeds", "a,b"], "a count (3) or comma-separated seeds"),
    (["--seed", "7", "--seeds", "0,5"], "--seed 7 and --seeds 0,5"),
])
def test_bad_seeds_are_refused_before_anything_is_made(cli, tmp_path, capsys, args, message):
    try:
        code = cli([*TINY, *args, "--out", str(tmp_path / "s.json")])
    except SystemExit as exc:  # argparse's usage error
        code = exc.code
    assert code == 2
    assert message in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []  # nothing half-written


def test_a_seed_list_names_the_pilots_seed_and_the_count_counts_from_seed():
    from budgetdsl.cli import build_parser
    from budgetdsl.commands.calibrate import _sweep_config

    parse = build_parser().parse_args
    cfg = _sweep_config(parse([*TINY, "--seeds", "0,5,9"]))
    assert cfg.seed_list == (0, 5, 9) and cfg.base.seed == 0
    cfg = _sweep_config(parse([*TINY, "--seed", "40", "--seeds", "3"]))
    assert cfg.seed_list == (40, 41, 42)
    assert _sweep_config(parse([*TINY, "--seeds", "1"])).seeds == ()  # one seed: today's sweep


# --- the pooled fit and the seeds' scatter ----------------------------------------------------

def test_the_fit_pools_every_point_and_the_seeds_scatter_widens_its_interval():
    batches = (4, 8, 16, 32)
    truth = [(b, 50 + 400 / b) for b in batches]  # S_min 50, E_min 400: B_crit 8
    quiet = [_run(b, seed, s * (1 + 0.01 * (-1) ** i)) for seed in (1, 2) for i, (b, s) in enumerate(truth)]
    noisy = [_run(b, seed, s * (1 + (0.01 if seed == 1 else 0.15) * (-1) ** i))
             for seed in (1, 2) for i, (b, s) in enumerate(truth)]
    f_quiet, _ = fit_sweep(quiet, 32, 0.95)
    f_noisy, _ = fit_sweep(noisy, 32, 0.95)
    # the one fit over all eight points, as fit_frontier gives it
    ref = fit_frontier(sorted((r.batch_examples, r.steps_to_target) for r in noisy))
    assert f_noisy.n_points == 8 and f_noisy.b_crit_examples == pytest.approx(ref.b_crit)
    width = lambda f: math.log(f.b_crit_ci_high_tokens / f.b_crit_ci_low_tokens)  # noqa: E731
    assert width(f_noisy) > 3 * width(f_quiet)
    seeds, by_batch, fits = seed_spread(noisy, 32, 0.95)
    assert seeds == [1, 2]
    assert [(b.batch_examples, b.seeds, b.low, b.high) for b in by_batch][0] == \
        (4, [1, 2], min(noisy[0].steps_to_target, noisy[4].steps_to_target),
         max(noisy[0].steps_to_target, noisy[4].steps_to_target))
    assert by_batch[0].median == pytest.approx((noisy[0].steps_to_target + noisy[4].steps_to_target) / 2)
    alone = fit_frontier([(r.batch_examples, r.steps_to_target) for r in noisy if r.seed == 1])
    assert fits[0].seed == 1 and fits[0].b_crit_examples == pytest.approx(alone.b_crit)
    assert seed_spread(quiet[:4], 32, 0.95) == ([], [], [])  # one seed: nothing to spread


# --- a local multi-seed sweep: a task folder, --collect, --retry-failed, the plan ------------

@pytest.fixture(scope="module")
def two_seeds(tmp_path_factory):
    from budgetdsl.cli import main

    root = tmp_path_factory.mktemp("seeds")
    out = root / "two.json"
    code = main([*TINY, "--seeds", "2", "--out", str(out), "--plot", str(root / "two.svg"), "--quiet"])
    return root, out, code


def test_a_local_multi_seed_sweep_keeps_its_tasks_and_pools_them(two_seeds):
    root, out, code = two_seeds
    assert code == 0
    folder = root / "two.tasks"
    keys = sorted(p.name for p in (folder / "tasks").iterdir())
    assert keys == sorted(["b4-s1337", "b8-s1337", "b16-s1337", "b4-s1338", "b8-s1338", "b16-s1338"])
    sw = load_calibration(out).sweep
    assert sw.seeds == [1337, 1338] and sw.fit.n_points == 6
    assert (root / "two.svg").read_text().count("<svg") == 1  # the picture of every seed's runs
    assert sorted({(r.batch_examples, r.seed) for r in sw.runs}) == sorted(
        (b, s) for b in (4, 8, 16) for s in (1337, 1338))
    # both seeds train to the pilot's target on the one held-out set; different starts, different steps
    steps = {(r.batch_examples, r.seed): r.steps_to_target for r in sw.runs}
    assert steps[(4, 1337)] != steps[(4, 1338)]
    assert [b.batch_examples for b in sw.steps_by_batch] == [4, 8, 16]
    assert all(b.low <= b.median <= b.high and b.seeds == [1337, 1338] for b in sw.steps_by_batch)
    assert [f.seed for f in sw.seed_fits] == [1337, 1338]
    manifest = json.loads((folder / "sweep.json").read_text())
    assert manifest["executor"] == "local" and "--seeds" in manifest["command"]
    task = json.loads((folder / "tasks" / "b4-s1338" / "result.json").read_text())
    assert task["calibration"]["provenance"]["seed"] == 1338  # each task's calibration names its seed
    assert load_calibration(out).provenance.seed == 1337  # the file's: the first seed's reference run


def test_the_report_and_a_plan_citing_the_file_show_the_seeds(two_seeds, cli, capsys, tmp_path):
    root, out, _ = two_seeds
    assert cli(["calibrate", "sweep", "--collect", str(root / "two.tasks")]) == 0
    report = capsys.readouterr().out
    assert "seeds 1337, 1338" in report and "over 6 runs (2 seeds)" in report
    assert "B_crit of each seed alone: seed 1337:" in report
    assert "steps to the target by batch, median (range over seeds): 4:" in report
    sw = load_calibration(out).sweep
    plan = tmp_path / "p.yaml"
    plan.write_text("name: seeds\nmodel: {params: 20M, layers: 4, d_model: 512, heads: 8, seq_len: 32}\n"
                    "hardware: {gpu: H100-SXM5-80GB, gpus: 8}\ntarget: {min_tokens: 500M}\n"
                    f"noise: {{calibration: {out}, at_loss: {sw.target_loss:.6f}, source: sweep}}\n")
    cli(["plan", str(plan)])
    text = capsys.readouterr().out
    assert "2 seeds (1337, 1338) pooled" in text
    assert "B_crit of each seed alone: seed 1337:" in text and "median (range over seeds)" in text


def test_a_failed_local_task_is_listed_and_rerun_alone_to_the_same_file(two_seeds, cli, capsys, tmp_path):
    root, out, _ = two_seeds
    folder = tmp_path / "copy"
    shutil.copytree(root / "two.tasks", folder)
    manifest = json.loads((folder / "sweep.json").read_text())
    manifest["out"] = str(tmp_path / "again.json")
    (folder / "sweep.json").write_text(json.dumps(manifest))
    task = folder / "tasks" / "b8-s1338"
    (task / "result.json").unlink()
    (task / "error.json").write_text('{"error": "RuntimeError: the node went away"}\n')
    assert cli(["calibrate", "sweep", "--collect", str(folder)]) == 1
    err = capsys.readouterr().err
    assert "task b8-s1338 failed: RuntimeError: the node went away" in err
    assert f"run them and the tasks not run yet here with: budgetdsl calibrate sweep --collect {folder} " \
           "--retry-failed" in err
    partial = load_calibration(tmp_path / "again.json")
    assert partial.interrupted and "missing b8-s1338 (failed)" in partial.stop_reason
    mtimes = {p.parent.name: p.stat().st_mtime_ns for p in folder.glob("tasks/*/result.json")}
    assert cli(["calibrate", "sweep", "--collect", str(folder), "--retry-failed", "--quiet"]) == 0
    assert {p.parent.name: p.stat().st_mtime_ns for p in folder.glob("tasks/*/result.json")
            if p.parent.name != "b8-s1338"} == mtimes  # only the failed task ran again
    again, first = load_calibration(tmp_path / "again.json").sweep, load_calibration(out).sweep
    assert not load_calibration(tmp_path / "again.json").interrupted
    assert [(r.batch_examples, r.seed, r.steps_to_target) for r in again.runs] == \
        [(r.batch_examples, r.seed, r.steps_to_target) for r in first.runs]
    assert again.fit.b_crit_tokens == first.fit.b_crit_tokens


def test_kubeflow_manifests_per_batch_and_seed_and_the_budget_counts_them(cli, tmp_path, capsys):
    import sys

    import yaml

    sys.path.insert(0, str(REPO / "tests" / "exports"))
    from export_validators import TRAINJOB_CRD, kubeflow_errors, trainjob_webhook_errors

    folder = tmp_path / "k"
    assert cli([*TINY, "--seeds", "0,5", "--emit", "kubeflow", "--sweep-dir", str(folder)]) == 0
    assert "budget: 6 tasks of gpt-nano" in capsys.readouterr().err
    names = sorted(p.name for p in (folder / "kubeflow").glob("*.yaml"))
    assert names == sorted(f"b{b}-s{s}.yaml" for b in (4, 8, 16) for s in (0, 5))
    for p in (folder / "kubeflow").glob("*.yaml"):
        doc = yaml.safe_load(p.read_text())
        assert kubeflow_errors(doc, TRAINJOB_CRD) == [] and trainjob_webhook_errors(doc) == []


def test_on_slurm_the_pilot_goes_alone_and_every_other_batch_and_seed_waits_for_it(cli, tmp_path, monkeypatch):
    import os
    import sys

    bin_dir = tmp_path / "fake-bin"
    bin_dir.mkdir()
    for name, body in {
        "sbatch": f'[ "$1" = --test-only ] && exit 0; n=$(ls {bin_dir}/*.sh 2>/dev/null | wc -l); '
                  f'cp "$1" {bin_dir}/got-$n.sh; echo "Submitted batch job $((100 + n))"',
        "squeue": "exit 0", "scontrol": 'echo "Slurmctld(primary) at vm is UP"', "sinfo": "echo 'local|up'",
    }.items():
        (bin_dir / name).write_text(f"#!/bin/sh\n{body}\n")
        (bin_dir / name).chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.path.dirname(sys.executable)}:/usr/bin:/bin")
    folder = tmp_path / "s"
    assert cli([*TINY, "--seeds", "2", "--executor", "slurm", "--sweep-dir", str(folder), "--no-wait", "--quiet"]) == 0
    pilot, array = (p.read_text() for p in sorted(bin_dir.glob("got-*.sh")))
    assert "--array" not in pilot
    assert "#SBATCH --array=0-4%5" in array and "#SBATCH --dependency=afterok:100" in array
    jobs = json.loads((folder / "sweep.json").read_text())["jobs"]
    assert jobs["b4-s1337"]["id"] == "100"
    assert sorted(jobs[k]["id"] for k in ("b8-s1337", "b16-s1337", "b4-s1338", "b8-s1338", "b16-s1338")) == \
        [f"101_{i}" for i in range(5)]
