"""A proxy whose gradient noise scale is known in closed form, for the analytic tests. It implements
the documented `--model/--data` factory interface, so it runs through the same calibration code path
as the GPT proxy.

Linear regression y = x·w* + ε with x ~ N(0, I_d), ε ~ N(0, σ²) and the per-example loss
ℓ = ½(x·w − y)². At weights w = w* + δ the per-example gradient is g = x(x·δ − ε), so
    G = E[g] = δ                                   |G|² = |δ|²
    E[g gᵀ] = |δ|² I + 2 δδᵀ + σ² I                (Isserlis: E[x_i x_j x_k x_l] for Gaussians)
    Σ = E[g gᵀ] − G Gᵀ = (|δ|² + σ²) I + δδᵀ        tr Σ = d(|δ|² + σ²) + |δ|²
    B_simple = tr Σ / |G|² = d + 1 + d σ² / |δ|²
"""

import torch

D = 16
SIGMA = 1.0
DELTA_NORM = 1.0
W_STAR = torch.linspace(-1.0, 1.0, D)


def truth() -> tuple[float, float, float]:
    """(|G|², tr Σ, B_simple) at w = w* + δ."""
    g2 = DELTA_NORM**2
    trace = D * (DELTA_NORM**2 + SIGMA**2) + DELTA_NORM**2
    return g2, trace, trace / g2


class LinearRegression(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        delta = torch.zeros(D)
        delta[0] = DELTA_NORM
        self.w = torch.nn.Parameter(W_STAR + delta)

    def forward(self, batch):
        x, y = batch
        return 0.5 * ((x @ self.w - y) ** 2).mean()


def make_model() -> torch.nn.Module:
    return LinearRegression()


class Sampler:
    tokens_per_example = 1

    def __call__(self, n: int, generator: torch.Generator):
        x = torch.randn(n, D, generator=generator)
        y = x @ W_STAR + SIGMA * torch.randn(n, generator=generator)
        return x, y


def make_data(split: str):
    return Sampler()
