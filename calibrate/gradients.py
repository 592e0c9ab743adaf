"""Gradient accumulation that also yields each micro-batch's squared gradient norm, at the cost of
one extra read of the gradients per micro-batch: no second backward, no snapshot copies.

Each micro-batch's backward writes a fresh `.grad`; its norm is read (`_foreach_norm`), it is added
into a flat buffer and `.grad` is dropped. At the end `.grad` becomes views of the buffer, so the
optimizer, clipping, GradScaler and an all-reduce see an ordinary accumulated gradient.
(Differencing `.grad` around each backward would need a copy of every gradient per micro-batch.)
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class StepNorms:
    """Squared norms of one optimizer step, in the units of the raw `.grad` (scaled by the loss
    scale and 1/accumulation; `Accumulator.finish` divides those out)."""

    sq_small_sum: torch.Tensor  # Σ over micro-batches of |g_micro|², 0-d, on device
    n_small: int  # number of micro-batches summed
    sq_big: torch.Tensor  # |g_accumulated|², 0-d
    # The same of P⊙g, P the optimizer's preconditioner (Adam: 1/(√v̂ + ε)); None without one.
    sq_small_pre_sum: torch.Tensor | None = None
    sq_big_pre: torch.Tensor | None = None


class Accumulator:
    """Owns the flat gradient buffer of a list of parameters (one buffer per device and dtype)."""

    def __init__(self, params: list[torch.nn.Parameter]):
        self.params = [p for p in params if p.requires_grad]
        groups: dict[tuple, list[torch.nn.Parameter]] = {}
        for p in self.params:
            groups.setdefault((p.device, p.dtype), []).append(p)
        self.groups: list[tuple[list[torch.nn.Parameter], torch.Tensor, list[torch.Tensor]]] = []
        for (device, dtype), ps in groups.items():
            flat = torch.zeros(sum(p.numel() for p in ps), device=device, dtype=dtype)
            views, offset = [], 0
            for p in ps:
                views.append(flat[offset : offset + p.numel()].view_as(p))
                offset += p.numel()
            self.groups.append((ps, flat, views))
        self.device = self.params[0].device
        self._sq_small: torch.Tensor | None = None
        self._sq_small_pre: torch.Tensor | None = None
        self._pre: list[dict[int, torch.Tensor]] | None = None
        self._n = 0

    def begin(self, preconditioner: dict[torch.nn.Parameter, torch.Tensor] | None = None) -> None:
        """Start a step: no `.grad` anywhere, so the next backward writes fresh gradients.
        `preconditioner`: a tensor per parameter (Adam's 1/(√v̂ + ε), fixed for the step) whose
        elementwise product with each gradient is also measured; parameters without one count as 0."""
        for p in self.params:
            p.grad = None
        self._sq_small = torch.zeros((), device=self.device, dtype=torch.float64)
        self._pre = None
        if preconditioner:
            self._pre = [{i: preconditioner[p] for i, p in enumerate(ps) if p in preconditioner}
                         for ps, _, _ in self.groups]
            self._sq_small_pre = torch.zeros((), device=self.device, dtype=torch.float64)
        self._n = 0

    def _pre_sq(self, k: int, grads_of: list[tuple[int, torch.Tensor]]) -> torch.Tensor | None:
        """Σ |P⊙g|² over group k's (index, gradient) pairs that have a preconditioner."""
        assert self._pre is not None
        pre = self._pre[k]
        pairs = [(g, pre[i]) for i, g in grads_of if i in pre]
        if not pairs:
            return None
        scaled = torch._foreach_mul([g for g, _ in pairs], [q for _, q in pairs])
        return torch.stack(torch._foreach_norm(scaled)).to(self.device, torch.float64).square().sum()

    def after_backward(self) -> None:
        """Fold the micro-batch gradient now in `.grad` into the buffer, keeping its squared norm."""
        first = self._n == 0
        for k, (ps, flat, views) in enumerate(self.groups):
            pairs = [(p.grad, v) for p, v in zip(ps, views) if p.grad is not None]
            grads = [g for g, _ in pairs]
            if grads:
                norms = torch._foreach_norm(grads)
                sq = torch.stack(norms).to(self.device, torch.float64).square().sum()
                self._sq_small += sq
                if self._pre is not None:
                    pre_sq = self._pre_sq(k, [(i, p.grad) for i, p in enumerate(ps) if p.grad is not None])
                    if pre_sq is not None:
                        self._sq_small_pre += pre_sq
            if first:  # copy instead of zero + add: one pass fewer
                if len(pairs) < len(ps):
                    flat.zero_()
                if grads:
                    torch._foreach_copy_([v for _, v in pairs], grads)
            elif grads:
                torch._foreach_add_([v for _, v in pairs], grads)
        for p in self.params:
            p.grad = None
        self._n += 1

    def flats(self) -> list[torch.Tensor]:
        return [flat for _, flat, _ in self.groups]

    def finish(self) -> StepNorms:
        """Install the accumulated gradient as `.grad` and return the step's squared norms. A
        caller that all-reduces the buffers does so before calling this."""
        for ps, _, views in self.groups:
            for p, v in zip(ps, views):
                p.grad = v
        sq_big = sum(torch.dot(flat, flat).to(self.device, torch.float64) for flat in self.flats())
        sq_big_pre = None
        if self._pre is not None:
            sq_big_pre = torch.zeros((), device=self.device, dtype=torch.float64)
            for k, (_, _, views) in enumerate(self.groups):
                part = self._pre_sq(k, list(enumerate(views)))
                if part is not None:
                    sq_big_pre = sq_big_pre + part
        return StepNorms(self._sq_small, self._n, sq_big, self._sq_small_pre if self._pre else None, sq_big_pre)
