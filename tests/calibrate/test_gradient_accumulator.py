"""Per-micro-batch squared norms from the accumulation itself, checked against explicit backward
passes, one per micro-batch."""

import pytest

torch = pytest.importorskip("torch")

from budgetdsl.calibrate.gradients import Accumulator  # noqa: E402


class TwoLayer(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(6, 5)
        self.b = torch.nn.Linear(5, 1)
        self.unused = torch.nn.Parameter(torch.ones(3))  # trainable, never in the graph

    def forward(self, batch):
        x, y = batch
        return ((self.b(torch.tanh(self.a(x))).squeeze(-1) - y) ** 2).mean()


def _micro_batches(k=4, n=3):
    g = torch.Generator().manual_seed(0)
    return [(torch.randn(n, 6, generator=g), torch.randn(n, generator=g)) for _ in range(k)]


def _reference(model, micro):
    """Each micro-batch's gradient by its own backward, and plain accumulation's gradient."""
    per_micro = []
    for batch in micro:
        model.zero_grad(set_to_none=True)
        model(batch).backward()
        per_micro.append(torch.cat([p.grad.flatten() for p in model.parameters() if p.grad is not None]))
    model.zero_grad(set_to_none=True)
    for batch in micro:
        (model(batch) / len(micro)).backward()
    return per_micro, torch.cat([p.grad.flatten() for p in model.parameters() if p.grad is not None])


@pytest.mark.parametrize("loss_scale", [1.0, 1024.0])
def test_norms_and_accumulated_gradient_match_explicit_backward(loss_scale):
    torch.manual_seed(0)
    model = TwoLayer()
    micro = _micro_batches()
    per_micro, accumulated = _reference(model, micro)
    acc = Accumulator(list(model.parameters()))
    for _ in range(2):  # twice: the buffer must start clean at every step
        acc.begin()
        for batch in micro:
            (model(batch) * (loss_scale / len(micro))).backward()
            acc.after_backward()
            assert all(p.grad is None for p in model.parameters())  # next backward writes fresh
        norms = acc.finish()
        k = len(micro)
        expected_small = sum(float(g.square().sum()) for g in per_micro)
        assert norms.n_small == k
        assert float(norms.sq_small_sum) * (k / loss_scale) ** 2 == pytest.approx(expected_small, rel=1e-5)
        assert float(norms.sq_big) / loss_scale**2 == pytest.approx(float(accumulated.square().sum()), rel=1e-5)
        got = torch.cat([p.grad.flatten() for p in model.parameters() if p is not model.unused]) / loss_scale
        torch.testing.assert_close(got, accumulated, rtol=1e-5, atol=1e-7)
        assert torch.count_nonzero(model.unused.grad) == 0  # a zero gradient, usable by optimizers


def test_grads_are_views_of_one_flat_buffer_so_the_optimizer_and_clipping_see_them():
    model = TwoLayer()
    acc = Accumulator(list(model.parameters()))
    acc.begin()
    model(_micro_batches(1)[0]).backward()
    acc.after_backward()
    acc.finish()
    (flat,) = acc.flats()
    flat.mul_(0.0)
    assert all(float(p.grad.abs().sum()) == 0.0 for p in model.parameters())
    before = model.a.weight.detach().clone()
    flat.fill_(1.0)
    torch.optim.SGD(model.parameters(), lr=0.5).step()
    torch.testing.assert_close(model.a.weight.detach(), before - 0.5)


def test_preconditioned_norms_are_those_of_the_scaled_gradients():
    """Given a preconditioner P per parameter, the step also yields Σ|P⊙g_micro|² and |P⊙g_acc|²,
    equal to the explicit products (a parameter without P counts as 0)."""
    torch.manual_seed(0)
    model = TwoLayer()
    micro = _micro_batches()
    per_micro, accumulated = _reference(model, micro)
    params = [p for p in model.parameters() if p.grad is not None]
    pre = {p: torch.rand_like(p) + 0.5 for p in params[:-1]}  # the last used parameter has none
    mask = torch.cat([pre[p].flatten() if p in pre else torch.zeros(p.numel()) for p in params])
    acc = Accumulator(list(model.parameters()))
    acc.begin(pre)
    for batch in micro:
        (model(batch) / len(micro)).backward()
        acc.after_backward()
    norms = acc.finish()
    want_small = sum(float(((g / len(micro)) * mask).square().sum()) for g in per_micro)
    assert float(norms.sq_small_pre_sum) == pytest.approx(want_small, rel=1e-5)
    assert float(norms.sq_big_pre) == pytest.approx(float((accumulated * mask).square().sum()), rel=1e-5)
    acc.begin()  # no preconditioner: nothing of it measured
    model(micro[0]).backward()
    acc.after_backward()
    assert acc.finish().sq_big_pre is None
