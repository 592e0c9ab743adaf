"""The Lightning Callback (issue 15 item 1) with the real `lightning` Trainer on CPU, on the
linear-regression proxy whose B_simple is known in closed form.

Lightning is fed the micro-batches a plain loop (gns_loops.linreg_loop) and `budgetdsl calibrate`
draw, in the same order, so all three must measure the same per-step numbers. Under CI=true a
missing library fails the test instead of skipping it (the `lightning` extra, .ci/validators.txt).
"""

import os

import numpy as np
import pytest


def _require(name):
    if os.environ.get("CI") == "true":
        return __import__(name)
    return pytest.importorskip(name)


torch = _require("torch")
_require("lightning")

import lightning.pytorch as L  # noqa: E402
import linreg_proxy  # noqa: E402
from budgetdsl.calibrate.gns_lightning import GradientNoiseScaleCallback  # noqa: E402
from gns_loops import linreg_loop  # noqa: E402

from budgetdsl.plan.calibration_file import load_calibration  # noqa: E402

STEPS, MICRO, ACCUM, SEED = 120, 4, 16, 3
G2, TRACE, B_TRUE = linreg_proxy.truth()


class MicroBatches(torch.utils.data.Dataset):
    """The micro-batches linreg_loop draws, in its order: one item is one micro-batch."""

    def __init__(self):
        sampler, gen = linreg_proxy.make_data("train"), torch.Generator().manual_seed(SEED)
        self.items = [sampler(MICRO, gen) for _ in range(STEPS * ACCUM)]

    def __len__(self):
        return len(self.items)

    def __getitem__(self, i):
        return self.items[i]


class LinReg(L.LightningModule):
    def __init__(self):
        super().__init__()
        torch.manual_seed(SEED)
        self.model = linreg_proxy.make_model()

    def training_step(self, batch, batch_idx):
        return self.model(batch)

    def configure_optimizers(self):
        return torch.optim.AdamW(self.parameters(), lr=0.0, betas=(0.9, 0.95), weight_decay=0.0)


def test_the_callback_measures_what_a_plain_loop_measures_and_the_closed_form(tmp_path):
    out = tmp_path / "cal.json"
    callback = GradientNoiseScaleCallback(out, data="linreg_proxy gaussian", ema_beta=1.0, point_every=40)
    trainer = L.Trainer(accelerator="cpu", devices=1, max_steps=STEPS, accumulate_grad_batches=ACCUM,
                        gradient_clip_val=0.5, logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False, default_root_dir=tmp_path,
                        callbacks=[callback])
    trainer.fit(LinReg(), torch.utils.data.DataLoader(MicroBatches(), batch_size=None, shuffle=False))
    cal = load_calibration(out)
    b = cal.provenance.batch
    assert (b.micro_batch_examples, b.accumulation, b.world_size) == (MICRO, ACCUM, 1)
    assert cal.provenance.optimizer.grad_clip == 0.5 and cal.summary.steps_measured == STEPS
    ref = linreg_loop(None, steps=STEPS, batch=MICRO * ACCUM, micro=MICRO, seed=SEED)
    # The norms are read before Lightning clips to 0.5 (|g_big| is about 1.2 here).
    assert min(cal.raw.grad_sq_big) > 0.5**2
    for key in ("grad_sq_small", "grad_sq_big", "train_loss"):
        np.testing.assert_allclose(getattr(cal.raw, key), getattr(ref.raw, key), rtol=1e-5, err_msg=key)
    assert ref.summary.ci_low <= cal.summary.b_simple <= ref.summary.ci_high
    assert cal.summary.ci_low <= B_TRUE <= cal.summary.ci_high
    # A fixed-weights file (lr 0) has no fit by design: the planner reads it at its one loss.
    from budgetdsl.plan.loader import load_plan
    from budgetdsl.solve.solver import solve

    plan = tmp_path / "p.yaml"
    plan.write_text(f"""name: from-lightning
model: {{params: 1e6, layers: 2, d_model: 64, heads: 2, seq_len: 1}}
hardware: {{gpu: H100-SXM5-80GB, gpus: 1, mfu: 0.3}}
target: {{min_tokens: 1e7}}
noise: {{calibration: cal.json, at_loss: {cal.summary.loss:.6f}}}
""")
    sol = solve(load_plan(plan))
    assert sol.frontier.b_crit_tokens == pytest.approx(cal.summary.b_simple_tokens)


class Examples(torch.utils.data.Dataset):
    """A finite set of linear-regression examples, one item each (the DataLoader makes micro-batches)."""

    def __init__(self, n: int):
        self.x, self.y = linreg_proxy.make_data("train")(n, torch.Generator().manual_seed(SEED))

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        return self.x[i], self.y[i]


@pytest.mark.parametrize("examples", [1608, 1624])
def test_epochs_ending_on_a_short_step_are_measured_at_that_steps_size(tmp_path, examples):
    """402 or 406 micro-batches of 4 per epoch at accumulate_grad_batches 4: Lightning steps on the
    2 left over at each epoch's end. Its own step event marks the boundary, so that step is a batch
    of 8 and the next epoch's steps are whole again; the closed form stays inside the interval."""
    steps = 300
    out = tmp_path / "cal.json"
    callback = GradientNoiseScaleCallback(out, data="linreg_proxy gaussian", point_every=50)
    trainer = L.Trainer(accelerator="cpu", devices=1, max_steps=steps, accumulate_grad_batches=4,
                        logger=False, enable_checkpointing=False, enable_progress_bar=False,
                        enable_model_summary=False, default_root_dir=tmp_path, callbacks=[callback])
    trainer.fit(LinReg(), torch.utils.data.DataLoader(Examples(examples), batch_size=4, shuffle=True))
    cal = load_calibration(out)
    s = cal.summary
    assert s.steps_measured == steps and s.steps_skipped == 0
    assert cal.provenance.estimator.ema_beta == 1.0  # lr 0: the one policy, not 0.95
    truth = linreg_proxy.finite_truth(*linreg_proxy.make_data("train")(examples, torch.Generator().manual_seed(SEED)))
    assert abs(truth / B_TRUE - 1) < 0.25  # the set's own B_simple: the closed form, up to sampling
    assert s.b_simple is not None and s.ci_low <= truth <= s.ci_high, (truth, s.b_simple, s.ci_low, s.ci_high)


def _fit_ddp(out):
    """Under torchrun: two replicas, each accumulating half of a step's micro-batches (Lightning's
    DistributedSampler deals them, in its own order)."""
    callback = GradientNoiseScaleCallback(out, data="linreg_proxy gaussian", ema_beta=1.0, point_every=40)
    trainer = L.Trainer(accelerator="cpu", devices=2, strategy="ddp", max_steps=STEPS,
                        accumulate_grad_batches=ACCUM // 2, logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False, callbacks=[callback])
    trainer.fit(LinReg(), torch.utils.data.DataLoader(MicroBatches(), batch_size=None, shuffle=False))


@pytest.mark.slow
def test_two_gloo_replicas_under_lightning_ddp_measure_the_single_process_numbers(tmp_path):
    from pathlib import Path

    from ddp_launch import gloo_env, two_replicas_beside

    here = Path(__file__).parent
    out = tmp_path / "ddp.json"
    # the single-process reference, here while the launcher starts the replicas
    ref = two_replicas_beside([__file__, str(out)],
                              lambda: linreg_loop(None, steps=STEPS, batch=MICRO * ACCUM, micro=MICRO, seed=SEED),
                              env=gloo_env(here, here.parents[1]), cwd=tmp_path, timeout=600)
    cal = load_calibration(out)
    assert (cal.provenance.batch.world_size, cal.provenance.batch.accumulation) == (2, ACCUM // 2)
    assert cal.summary.steps_measured == STEPS
    # Lightning deals the micro-batches in another order than the plain loop, so the per-step
    # numbers differ; what must agree is what they estimate. The replicas' micro-batch norms are
    # averaged and the all-reduced gradient is the big batch: |G|^2 and tr(Sigma) unbiased, the
    # estimate inside the single process's interval, the closed form inside its own.
    for key, truth in (("grad_sq", G2), ("trace_sigma", TRACE)):
        xs = np.asarray(getattr(cal.raw, key))
        assert abs(xs.mean() - truth) < 4 * xs.std(ddof=1) / np.sqrt(xs.size), key
    assert ref.summary.ci_low <= cal.summary.b_simple <= ref.summary.ci_high
    assert cal.summary.ci_low <= B_TRUE <= cal.summary.ci_high


if __name__ == "__main__":
    import sys

    _fit_ddp(sys.argv[1])
