"""`budgetdsl calibrate` end to end, in-process through the real CLI: files, exit codes, resume,
interrupts, determinism, data formats, non-finite steps, quiet output."""

import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from budgetdsl.calibrate.config import QUICK, RunConfig  # noqa: E402
from budgetdsl.calibrate.run import calibrate, checkpoint_path  # noqa: E402

from budgetdsl.plan.calibration_file import load_calibration  # noqa: E402

HERE = Path(__file__).parent
FLAKY = HERE / "flaky_proxy.py"
REPO = HERE.parent.parent


def test_quick_run_writes_a_complete_calibration(cli, tmp_path, capsys):
    out = tmp_path / "cal" / "quick.json"
    out.parent.mkdir()  # --out's folder must exist, as for export -o
    assert cli(["calibrate", "--quick", "--out", str(out)]) == 0
    cal = load_calibration(out)
    assert not cal.interrupted and cal.stop_reason is None
    assert sorted(p.name for p in out.parent.iterdir()) == ["quick.json"]  # no checkpoint, no temp
    p = cal.provenance
    assert p.model.name == "gpt-nano" and p.model.kind == "gpt" and p.model.n_params > 10_000
    assert p.data.kind == "stdlib" and len(p.data.sha256) == 64 and p.data.heldout
    assert p.batch.micro_batch_examples == 4 and p.batch.global_batch_examples == 16
    assert p.batch.accumulation == 4 and p.batch.tokens_per_example == 32
    assert p.optimizer.name == "adamw" and p.seed == 1337 and p.torch_version == torch.__version__
    assert p.command[:2] == ["budgetdsl", "calibrate"] and "--model" in p.command
    assert len(cal.raw.step) == QUICK["steps"] and cal.raw.skipped_steps == []
    s = cal.summary
    assert s.b_simple > 0 and s.b_simple_tokens == pytest.approx(s.b_simple * 32)
    assert s.steps_measured == QUICK["steps"]
    losses = [t.loss for t in cal.trajectory]
    assert losses[0] == pytest.approx(math.log(256), abs=0.2)  # byte-level model at init
    assert losses[-1] < losses[0] - 1.0  # it trained
    # B_simple grows as the loss falls (several-fold over this run)
    b = [t.b_simple for t in cal.trajectory if t.b_simple is not None]
    assert b[-1] > 3 * min(b)
    assert cal.hardware.device == "cpu" and cal.hardware.tokens_per_s > 0
    printed = capsys.readouterr().out  # not a TTY: no progress bar, but the summary
    assert "B_simple =" in printed and f"wrote {out}" in printed and "\x1b[" not in printed


def test_quiet_prints_nothing(cli, tmp_path, capsys, linreg_args):
    argv = ["calibrate", *linreg_args, "--steps", "6", "--batch", "8", "--micro-batch", "2",
            "--quiet", "--out", str(tmp_path / "q.json")]
    assert cli(argv) == 0
    assert capsys.readouterr() == ("", "")


def _quick(tmp_path, name, **changes):
    cfg = RunConfig(**{**QUICK, "steps": 24, "checkpoint_every": 10, **changes})
    return cfg, tmp_path / name


@pytest.fixture(scope="module")
def quick24(tmp_path_factory):
    """One uninterrupted 24-step quick run, shared by the tests that compare other runs with it."""
    cfg, out = _quick(tmp_path_factory.mktemp("quick24"), "full.json")
    return calibrate(cfg, out).calibration


def test_same_seed_same_result_other_seed_other_result(tmp_path, quick24):
    cfg, _ = _quick(tmp_path, "a.json")
    a = quick24
    b = calibrate(cfg, tmp_path / "b.json").calibration
    c = calibrate(cfg.with_(seed=7), tmp_path / "c.json").calibration
    assert a.raw == b.raw and a.trajectory == b.trajectory
    assert a.raw.grad_sq != c.raw.grad_sq


@pytest.mark.slow
def test_interrupt_writes_partial_file_and_resume_continues_bit_for_bit(tmp_path, cli, quick24):
    cfg, out = _quick(tmp_path, "r.json")
    full = quick24

    def ctrl_c(step):
        if step == 12:
            os.kill(os.getpid(), signal.SIGINT)  # as the terminal does; the run finishes step 13

    outcome = calibrate(cfg, out, on_step=ctrl_c)
    assert outcome.status == "interrupted"
    partial = load_calibration(out)
    assert partial.interrupted and "interrupted" in partial.stop_reason
    assert partial.raw.step == list(range(14)) and partial.summary.step == 13
    assert partial.trajectory[-1].step == 13  # a final point at the last measured step
    assert checkpoint_path(out).exists()
    # resume through the CLI; settings given again, and a resumable one (steps) may change
    argv = ["calibrate", "--quick", "--steps", "24", "--checkpoint-every", "10", "--resume", "--quiet",
            "--out", str(out)]
    assert cli(argv) == 0
    resumed = load_calibration(out)
    assert not resumed.interrupted and not checkpoint_path(out).exists()
    assert resumed.raw == full.raw
    assert [t.model_dump() for t in resumed.trajectory] == [t.model_dump() for t in full.trajectory]


def test_resume_refuses_different_settings_or_a_missing_checkpoint(cli, tmp_path, capsys):
    cfg, out = _quick(tmp_path, "m.json")
    calibrate(cfg, out, on_step=lambda step: os.kill(os.getpid(), signal.SIGINT) if step == 3 else None)
    argv = ["calibrate", "--quick", "--lr", "0.01", "--resume", "--quiet", "--out", str(out)]
    assert cli(argv) == 2
    assert "settings differ from the checkpoint's (lr: 0.003 -> 0.01" in capsys.readouterr().err
    assert cli(["calibrate", "--quick", "--resume", "--quiet", "--out", str(tmp_path / "none.json")]) == 2
    assert "no checkpoint at" in capsys.readouterr().err


@pytest.mark.slow
def test_ctrl_c_on_a_real_process(tmp_path):
    out = tmp_path / "sig.json"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "budgetdsl", "calibrate", "--quick", "--steps", "100000",
         "--checkpoint-every", "5", "--out", str(out)],
        cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    ckpt = checkpoint_path(out)
    try:
        for _ in range(600):  # wait (at most 60 s) until training is under way
            if ckpt.exists() or proc.poll() is not None:
                break
            time.sleep(0.1)
        assert ckpt.exists(), proc.stderr.read() if proc.poll() is not None else "no checkpoint"
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 130
    assert "continue with --resume" in err
    cal = load_calibration(out)
    assert cal.interrupted and len(cal.raw.step) >= 5 and cal.summary is not None


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--batch", "10", "--micro-batch", "4"], "--batch 10 must be a multiple of --micro-batch 4"),
        (["--batch", "4", "--micro-batch", "4"], "must exceed --micro-batch 4"),
        (["--lr", "-1"], "--lr must be >= 0"),
        (["--data", "no/such/dir"], "data path 'no/such/dir' does not exist"),
        (["--model", "gpt-huge"], "unknown model 'gpt-huge'"),
        (["--model", "nosuchmodule_xyz:make", "--data", "nosuchmodule_xyz:data"], "cannot import 'nosuchmodule_xyz'"),
        (["--model", f"{FLAKY}:make_always_nan"], "a --model factory needs a --data factory"),
        (["--data", f"{FLAKY}:make_data"], "the built-in gpt-nano needs token data"),
        (["--model", f"{FLAKY}:no_such_function", "--data", f"{FLAKY}:make_data"],
         "has no attribute 'no_such_function'"),
        (["--block-size", "100000"], "too few for sequences of 100000"),
    ],
)
def test_invalid_usage_exits_2_with_a_message(cli, tmp_path, capsys, argv, message):
    out = tmp_path / "bad.json"
    assert cli(["calibrate", "--quick", "--quiet", "--out", str(out), *argv]) == 2
    assert message in capsys.readouterr().err
    assert not out.exists()


def test_missing_torch_names_the_extra(monkeypatch, cli, tmp_path, capsys):
    monkeypatch.setitem(sys.modules, "torch", None)  # `import torch` now raises ImportError
    assert cli(["calibrate", "--quick", "--out", str(tmp_path / "x.json")]) == 2
    assert "pip install '.[calibrate]'" in capsys.readouterr().err


def test_non_finite_steps_are_skipped_and_counted(cli, tmp_path):
    out = tmp_path / "flaky.json"
    argv = ["calibrate", "--model", f"{FLAKY}:make_sometimes_nan", "--data", f"{FLAKY}:make_data",
            "--steps", "40", "--batch", "16", "--micro-batch", "4", "--lr", "0.01", "--quiet", "--out", str(out)]
    assert cli(argv) == 0
    cal = load_calibration(out)
    skipped = cal.raw.skipped_steps
    assert 3 <= len(skipped) <= 10 and cal.summary.steps_skipped == len(skipped)
    assert len(cal.raw.step) + len(skipped) == 40 and not set(skipped) & set(cal.raw.step)
    assert all(math.isfinite(x) for x in cal.raw.grad_sq + cal.raw.train_loss)  # never recorded
    assert all(math.isfinite(t.loss) for t in cal.trajectory)  # and never applied to the weights


def test_too_many_non_finite_steps_abort_with_exit_1(cli, tmp_path, capsys):
    out = tmp_path / "nan.json"
    argv = ["calibrate", "--model", f"{FLAKY}:make_always_nan", "--data", f"{FLAKY}:make_data",
            "--steps", "40", "--batch", "8", "--micro-batch", "4", "--max-nonfinite", "3", "--quiet", "--out", str(out)]
    assert cli(argv) == 1
    err = capsys.readouterr().err
    assert "aborted at step 3: 4 steps with a non-finite loss or gradient (limit 3)" in err
    assert "partial calibration was written" in err
    cal = load_calibration(out)
    assert cal.interrupted and cal.raw.skipped_steps == [0, 1, 2, 3] and cal.summary is None


def test_lr_zero_measures_at_fixed_weights(cli, tmp_path):
    out = tmp_path / "lr0.json"
    argv = ["calibrate", "--quick", "--lr", "0", "--steps", "12", "--eval-every", "4", "--quiet", "--out", str(out)]
    assert cli(argv) == 0
    cal = load_calibration(out)
    assert len({t.loss for t in cal.trajectory}) == 1  # the held-out loss never moved
    assert cal.fit is None and "whole run" in cal.fit_error
    assert cal.provenance.estimator.ema_beta == 1.0


def test_fp16_loss_scale_is_divided_out(cli, tmp_path, linreg_args):
    """With a GradScaler (2^12) the raw .grad is 4096x larger; the file must not be."""
    results = {}
    for amp in ("none", "fp16"):
        out = tmp_path / f"{amp}.json"
        argv = ["calibrate", *linreg_args, "--lr", "0", "--steps", "20", "--batch", "32", "--micro-batch", "4",
                "--amp", amp, "--quiet", "--out", str(out)]
        assert cli(argv) == 0
        results[amp] = load_calibration(out)
    assert results["fp16"].provenance.amp == "fp16"
    for key in ("grad_sq_small", "grad_sq_big"):
        np.testing.assert_allclose(getattr(results["fp16"].raw, key), getattr(results["none"].raw, key), rtol=2e-2)


def test_text_folder_and_token_files(cli, tmp_path):
    texts = tmp_path / "texts"
    texts.mkdir()
    for i in range(12):
        (texts / f"doc{i:02d}.txt").write_text(f"document {i}: " + "the quick brown fox jumps. " * 200)
    (texts / "blob.bin.dat").write_bytes(b"\0\1\2" * 100)  # binary: skipped
    tokens = tmp_path / "tok"
    tokens.mkdir()
    rng = np.random.default_rng(0)
    rng.integers(0, 1000, 20000, dtype=np.uint16).tofile(tokens / "train.bin")
    rng.integers(0, 1000, 3000, dtype=np.uint16).tofile(tokens / "val.bin")
    for data, kind, vocab in ((texts, "text", 256), (tokens, "tokens", 1024)):
        out = tmp_path / f"{kind}.json"
        argv = ["calibrate", "--quick", "--steps", "4", "--data", str(data), "--quiet", "--out", str(out)]
        assert cli(argv) == 0
        cal = load_calibration(out)
        assert cal.provenance.data.kind == kind and cal.provenance.data.vocab_size == vocab
        assert cal.provenance.model.config["vocab_size"] == vocab
    assert json.loads((tmp_path / "text.json").read_text())["provenance"]["data"]["files"] == 12


def test_recorded_command_reproduces_the_run(cli, tmp_path):
    first = tmp_path / "first.json"
    argv = ["calibrate", "--quick", "--steps", "6", "--lr", "0.01", "--grad-clip", "0", "--data-mb", "0.5",
            "--quiet", "--out", str(first)]
    assert cli(argv) == 0
    cal = load_calibration(first)
    command = cal.provenance.command
    assert command[:2] == ["budgetdsl", "calibrate"]
    assert "--grad-clip" in command and "--data-mb" in command and "--quick" not in command
    again = tmp_path / "again.json"
    assert cli([*command[1:], "--quiet", "--out", str(again)]) == 0
    assert load_calibration(again).raw == cal.raw


def test_unwritable_output_is_reported_without_a_traceback(cli, tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    assert cli(["calibrate", "--quick", "--steps", "2", "--quiet", "--out", str(blocker / "x.json")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("budgetdsl calibrate: error: ") and "Traceback" not in err


def _context_plan(tmp_path, seq_len: int) -> Path:
    plan = tmp_path / "plan.yaml"
    plan.write_text(f"name: ctx\nmodel: {{params: 25M, layers: 6, d_model: 512, heads: 8, seq_len: {seq_len}}}\n"
                    "hardware: {gpu: H100-SXM5-80GB, gpus: 8}\ntarget: {min_tokens: 2B}\nnoise: {b_crit: 1M}\n")
    return plan


def test_calibrate_for_a_plan_runs_at_its_seq_len_and_records_the_context(cli, tmp_path, capsys):
    """Issue 25 item 3: --plan calibrates at the plan's seq_len (48 here, gpt-nano's own is 32),
    says so on stderr, and the file records the context a planner compares with seq_len."""
    out = tmp_path / "cal.json"
    assert cli(["calibrate", "--quick", "--steps", "6", "--plan", str(_context_plan(tmp_path, 48)),
                "--out", str(out)]) == 0
    assert "calibrating at the plan's seq_len, 48 tokens per example" in capsys.readouterr().err
    cal = load_calibration(out)
    assert cal.schema_version == 2
    assert cal.provenance.batch.tokens_per_example == 48 == cal.provenance.batch.context == cal.context
    assert cal.provenance.model.config["block_size"] == 48


def test_calibrate_for_a_plan_halves_the_context_until_a_micro_batch_fits(cli, tmp_path, capsys, monkeypatch):
    """Where one micro-batch at seq_len needs more than half the free memory, the longest
    seq_len/2^k that fits is used and stderr says which and why. The bytes are Korthikanti et al.'s
    s·d·(34 + 5·a·s/d) per layer (doubled for fp32) plus the fp32 logits and their gradient."""
    from budgetdsl.calibrate import hardware

    def need(s, micro=4, layers=1, d=32, heads=2, vocab=256):  # gpt-nano, --quick's micro-batch
        return micro * (2 * layers * s * d * (34 + 5 * heads * s / d) + 8 * s * vocab)

    assert hardware.micro_batch_bytes(1, 32, 2, 256, 96, 4) == pytest.approx(need(96))
    free = int(2 * need(48)) + 1  # 48 fits in half of it, 96 does not
    monkeypatch.setattr(hardware, "free_memory", lambda device: free)
    out = tmp_path / "cal.json"
    assert cli(["calibrate", "--quick", "--steps", "6", "--plan", str(_context_plan(tmp_path, 96)),
                "--out", str(out)]) == 0
    err = capsys.readouterr().err
    assert "calibrating at 48 tokens per example: one micro-batch of 4 at the plan's seq_len 96 needs" in err
    assert "the planner scales B_crit from 48 to 96" in err
    assert load_calibration(out).context == 48
    # an explicit --block-size wins over the plan, and says so
    assert cli(["calibrate", "--quick", "--steps", "6", "--block-size", "16", "--plan",
                str(_context_plan(tmp_path, 96)), "--out", str(out)]) == 0
    assert "--block-size 16 tokens per example, not the plan's seq_len 96" in capsys.readouterr().err
    assert load_calibration(out).context == 16
