"""A tiny language model trained on CPU that logs as real jobs do: TensorBoard scalars through
torch.utils.tensorboard.SummaryWriter (loss, tokens seen, learning rate) and a checkpoint every
`--checkpoint-every` steps; `--resume` continues from the checkpoint in a new event file, as a
requeued job does; `--die-at N` kills the process with SIGKILL right after step N.

Each step waits for its batch from an input pipeline that delivers one every `--tick` seconds (a
rate-limited stream; a late step is caught up by the next ones), so that the pace of a few-second
run is steady on a loaded machine: the forecast is judged on it.

    python proxy_train.py OUT --steps 300
"""

from __future__ import annotations

import argparse
import os
import signal
import time

import torch
from torch.utils.tensorboard import SummaryWriter

VOCAB, SEQ, BATCH = 64, 32, 8


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("out")
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--tick", type=float, default=0.04)
    p.add_argument("--checkpoint-every", type=int, default=50)
    p.add_argument("--die-at", type=int)
    p.add_argument("--resume", action="store_true")
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
    data = torch.randint(0, VOCAB, (4096, SEQ + 1), generator=torch.Generator().manual_seed(1))
    start, first = time.monotonic(), step
    while step < args.steps:
        time.sleep(max(0.0, start + (step - first + 1) * args.tick - time.monotonic()))
        batch = data[torch.randint(0, len(data), (BATCH,))]
        logits = model(batch[:, :-1])
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, VOCAB), batch[:, 1:].reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        step += 1
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
