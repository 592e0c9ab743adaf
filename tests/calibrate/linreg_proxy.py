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


def finite_truth(x: torch.Tensor, y: torch.Tensor) -> float:
    """B_simple that the two-batch estimator measures on average when the micro-batches are drawn
    without replacement from the finite set (x, y) at w = w* + δ (epochs over a data set).

    With per-example gradients g_i, G = mean g_i and T = tr of their covariance (ddof 0), a batch
    of b drawn without replacement has E|g_b|² = |G|² + (T/b)(N−b)/(N−1), so McCandlish's A.2 and
    A.3 give tr Σ = T·N/(N−1) and |G|² − tr Σ/N: the unbiased estimates of the population's own
    values from this sample. Their ratio is the truth of a run on this set; it differs from
    `truth()` by the set's own sampling error (about 9 % for 1,600 examples)."""
    w = LinearRegression().w.detach().double()
    x, y = x.double(), y.double()
    g = x * (x @ w - y)[:, None]  # per-example gradient of ½(x·w − y)²
    n = g.shape[0]
    G = g.mean(0)
    trace = float(((g - G) ** 2).sum(1).mean()) * n / (n - 1)
    return trace / (float(G @ G) - trace / n)


class LinearRegression(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        delta = torch.zeros(D)
        delta[0] = DELTA_NORM
        self.w = torch.nn.Parameter(W_STAR + delta)

    def forward(self, batch):
        x, y = batch
        return 0.5 * ((x @ self.w - y) ** 2).mean()


class CheckpointedLinearRegression(torch.nn.Module):
    """The same problem with its weights in two halves, the first half's product recomputed in a
    reentrant activation checkpoint (torch.utils.checkpoint with use_reentrant=True): its
    gradient arrives in a backward nested in the step's own. Concatenated, the halves are
    LinearRegression's w, so the closed form is unchanged. shared=True also uses the second half
    inside the checkpoint: that parameter then gets its gradient in two pieces."""

    def __init__(self, shared: bool = False) -> None:
        super().__init__()
        w = LinearRegression().w.detach()
        self.a = torch.nn.Parameter(w[: D // 2].clone())
        self.b = torch.nn.Parameter(w[D // 2:].clone())
        self.shared = shared

    def _first_half(self, x, outside):
        inside = x[:, : D // 2] @ self.a
        if self.shared:
            inside = inside + 0.0 * (x[:, D // 2:] @ self.b)
        return inside + outside

    def forward(self, batch):
        from torch.utils.checkpoint import checkpoint

        x, y = batch
        outside = x[:, D // 2:] @ self.b  # requires grad: the reentrant checkpoint backpropagates
        pred = checkpoint(self._first_half, x, outside, use_reentrant=True)
        return 0.5 * ((pred - y) ** 2).mean()


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
