"""A tiny language model trained on CPU that logs as real jobs do: TensorBoard scalars through
torch.utils.tensorboard.SummaryWriter (loss, tokens seen, learning rate) and a checkpoint every
`--checkpoint-every` steps; `--resume` continues from the checkpoint in a new event file, as a
requeued job does; `--die-at N` kills the process with SIGKILL right after step N.

`--gns PATH` trains on text with structure (a random Markov chain over the vocabulary, so the
loss falls towards the chain's entropy and the gradient noise scale grows as it does) and measures
B_simple as `budgetdsl calibrate` does: each step's batch as BATCH micro-batches of one sequence,
the two-batch estimator and its interval (budgetdsl.calibrate.noise), written every `--gns-every`
steps as a JSON line {step, tokens, loss, b_noise, b_noise_low, b_noise_high} (tokens; the loss is
smoothed with the estimator's weights).

Each step waits for its batch from an input pipeline that delivers one every `--tick` seconds (a
rate-limited stream; a late step is caught up by the next ones), so that the pace of a few-second
run is steady on a loaded machine: the forecast is judged on it.

    python proxy_train.py OUT --steps 300
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import time

import torch
from torch.utils.tensorboard import SummaryWriter

VOCAB, SEQ, BATCH = 64, 32, 8


def lm_loss(model: torch.nn.Module, batch: torch.Tensor) -> torch.Tensor:
    logits = model(batch[:, :-1])  # (B, T, VOCAB)
    return torch.nn.functional.cross_entropy(logits.reshape(-1, VOCAB), batch[:, 1:].reshape(-1))


def markov_text(sequences: int = 4096) -> torch.Tensor:
    """Sequences of a random Markov chain: each token's successors drawn from a peaked distribution
    (Dirichlet(0.1) rows), so a bigram model learns it and its loss falls well below ln VOCAB."""
    g = torch.Generator().manual_seed(1)
    rows = torch.distributions.Gamma(torch.full((VOCAB, VOCAB), 0.1), 1.0).sample()
    rows = rows / rows.sum(1, keepdim=True)
    text = torch.empty(sequences, SEQ + 1, dtype=torch.long)
    text[:, 0] = torch.randint(0, VOCAB, (sequences,), generator=g)
    for t in range(SEQ):
        text[:, t + 1] = torch.multinomial(rows[text[:, t]], 1, generator=g).squeeze(1)
    return text


class GnsLog:
    """B_simple of each step from its BATCH one-sequence micro-batches (McCandlish et al. 2018, A.2-A.3)."""

    def __init__(self, path: str, beta: float):
        from budgetdsl.calibrate.noise import BiasCorrectedEMA, NoiseScaleTracker

        self.file = open(path, "a")
        self.tracker = NoiseScaleTracker(beta)
        self.loss = BiasCorrectedEMA(beta)

    def accumulate(self, model: torch.nn.Module, batch: torch.Tensor) -> torch.Tensor:
        """Gradient accumulation over the sequences of `batch`, each micro-batch's |g|² kept."""
        params = [p for p in model.parameters()]
        total = [torch.zeros_like(p) for p in params]
        small, losses = [], []
        for sequence in batch.split(1):
            model.zero_grad()
            loss = lm_loss(model, sequence)
            loss.backward()
            small.append(sum(float(p.grad.pow(2).sum()) for p in params))
            for t, p in zip(total, params):
                t += p.grad / len(batch)
            losses.append(float(loss.detach()))
        for t, p in zip(total, params):
            p.grad = t
        big = sum(float(t.pow(2).sum()) for t in total)
        self.tracker.update(len(self.tracker), sum(small) / len(small), big, 1, len(batch))
        self.loss.update(sum(losses) / len(losses))
        return torch.tensor(sum(losses) / len(losses))

    def write(self, step: int, tokens: int) -> None:
        b = self.tracker.smoothed().b_simple
        low, high = self.tracker.interval()
        row = {"step": step, "tokens": tokens, "loss": self.loss.value,
               "b_noise": b * SEQ if b else None, "b_noise_low": low * SEQ if low else None,
               "b_noise_high": high * SEQ if high else None}
        self.file.write(json.dumps(row) + "\n")
        self.file.flush()


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("out")
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--tick", type=float, default=0.04)
    p.add_argument("--checkpoint-every", type=int, default=50)
    p.add_argument("--die-at", type=int)
    p.add_argument("--resume", action="store_true")
    p.add_argument("--gns", help="write B_simple as JSON lines to this file (module docstring)")
    p.add_argument("--gns-every", type=int, default=10)
    p.add_argument("--gns-beta", type=float, default=0.8)
    args = p.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = torch.nn.Sequential(torch.nn.Embedding(VOCAB, 32), torch.nn.Linear(32, 64), torch.nn.GELU(),
                                torch.nn.Linear(64, VOCAB))
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    step = 0
    ckpt = os.path.join(args.out, "checkpoint.pt")
    if args.resume and os.path.exists(ckpt):
        state = torch.load(ckpt)
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["opt"])
        step = state["step"]
    writer = SummaryWriter(os.path.join(args.out, "tb"), max_queue=1000, flush_secs=3600)
    data = markov_text() if args.gns else torch.randint(0, VOCAB, (4096, SEQ + 1),
                                                        generator=torch.Generator().manual_seed(1))
    gns = GnsLog(args.gns, args.gns_beta) if args.gns else None
    start, first = time.monotonic(), step
    while step < args.steps:
        time.sleep(max(0.0, start + (step - first + 1) * args.tick - time.monotonic()))
        batch = data[torch.randint(0, len(data), (BATCH,))]
        opt.zero_grad()
        if gns is None:
            loss = lm_loss(model, batch)
            loss.backward()
        else:
            loss = gns.accumulate(model, batch)
        opt.step()
        step += 1
        if gns is not None and step % args.gns_every == 0:
            gns.write(step, step * BATCH * SEQ)
        writer.add_scalar("train/loss", loss.item(), step)
        writer.add_scalar("train/num_input_tokens_seen", step * BATCH * SEQ, step)
        writer.add_scalar("train/learning_rate", opt.param_groups[0]["lr"], step)
        if step % 10 == 0:
            writer.flush()
        if step % args.checkpoint_every == 0:
            torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "step": step}, ckpt)
        if args.die_at is not None and step == args.die_at:
            os.kill(os.getpid(), signal.SIGKILL)
    writer.close()


if __name__ == "__main__":
    main()
