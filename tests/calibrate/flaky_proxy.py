"""A model whose loss is NaN on some forward passes: the calibration must skip and count those
steps, never apply them, and abort past its threshold."""

import torch
from linreg_proxy import LinearRegression, make_data  # noqa: F401  (make_data is the data factory)


class Flaky(LinearRegression):
    def __init__(self, every: int):
        super().__init__()
        self.every = every
        self.calls = 0

    def forward(self, batch):
        self.calls += 1
        loss = super().forward(batch)
        return loss * float("nan") if self.every and self.calls % self.every == 0 else loss


def make_sometimes_nan() -> torch.nn.Module:
    return Flaky(every=23)


def make_always_nan() -> torch.nn.Module:
    return Flaky(every=1)
