"""The 1.5-entmax loss by partial sort (arelu_cli.transforms._partial_sort) in float64 against
the entmax package's: the same loss and gradient ``p - e_y`` for every k (rows whose support
fills the top k are widened, k at or beyond V is the full sort), ties, every scale of logits;
and through entmax15_loss with its reductions, ignored rows and label smoothing."""

from __future__ import annotations

import entmax
import pytest
import torch

from arelu_cli.transforms import entmax15_loss
from arelu_cli.transforms._partial_sort import (_solve, _support_bound, _threshold,
                                                entmax15_topk_rows)


def _logits(rows: int, vocab: int, scale: float, seed: int = 0) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    z = torch.randn(rows, vocab, generator=gen, dtype=torch.float64) * scale
    z[1, : min(5, vocab)] = z[1, 0]  # ties at the top
    z[2] = z[2, 0]  # a row of equal logits: the support is everything
    return z


@pytest.mark.parametrize("vocab, k", [(50, 3), (300, 10), (300, 100), (2000, 100), (7, 10),
                                      (7, 7), (64, 1)])
@pytest.mark.parametrize("scale", [0.05, 0.5, 3.0, 10.0])
def test_loss_and_gradient_equal_the_packages_in_float64(vocab, k, scale):
    z = _logits(24, vocab, scale)
    y = torch.randint(0, vocab, (24,), generator=torch.Generator().manual_seed(1))
    theirs = z.clone().requires_grad_(True)
    rows = entmax.entmax15_loss(theirs, y, k)
    (grad,) = torch.autograd.grad(rows.sum(), theirs)
    ours = z.clone().requires_grad_(True)
    mine = entmax15_topk_rows(ours, y, k)
    (my_grad,) = torch.autograd.grad((mine * torch.arange(1.0, 25.0, dtype=z.dtype)).sum(), ours)
    torch.testing.assert_close(mine, rows, rtol=0, atol=1e-12)
    weights = torch.arange(1.0, 25.0, dtype=z.dtype)[:, None]
    torch.testing.assert_close(my_grad, grad * weights, rtol=0, atol=1e-12)
    p, target = entmax.entmax15(z, dim=-1), torch.nn.functional.one_hot(y, vocab)
    torch.testing.assert_close(my_grad / weights, p - target, rtol=0, atol=1e-12)  # p - e_y
    assert bool((my_grad[(p == 0) & (target == 0)] == 0).all())  # exactly 0 off the support


def test_gradcheck():
    z = _logits(5, 30, 2.0).requires_grad_(True)
    y = torch.tensor([0, 4, 29, 7, 3])
    assert torch.autograd.gradcheck(lambda x: entmax15_topk_rows(x, y, 4), (z,))


@pytest.mark.parametrize("reduction", ["none", "sum", "mean"])
@pytest.mark.parametrize("eps", [0.0, 0.1])
def test_entmax15_loss_with_k_is_the_exact_sorts(reduction, eps):
    """Partial sort with any k gives the full sort's loss and gradient, ignored rows and all."""
    z = _logits(12, 80, 1.5).reshape(3, 4, 80)
    y = torch.randint(0, 80, (3, 4), generator=torch.Generator().manual_seed(2))
    y[0, 1] = y[2, 3] = -100
    results = []
    for k in (None, 2, 100):
        x = z.clone().requires_grad_(True)
        loss = entmax15_loss(x, y, k=k, reduction=reduction, label_smoothing=eps)
        results.append((loss, torch.autograd.grad(loss.sum(), x)[0]))
    for loss, grad in results[1:]:
        torch.testing.assert_close(loss, results[0][0], rtol=0, atol=1e-12)
        torch.testing.assert_close(grad, results[0][1], rtol=0, atol=1e-12)
    assert bool((results[1][1][0, 1] == 0).all())


@pytest.mark.parametrize("scale", [0.01, 0.3, 1.0, 4.0])
@pytest.mark.parametrize("r", [1, 5, 40])
def test_no_support_is_wider_than_the_entries_above_the_threshold_of_its_top_r(scale, r):
    """_support_bound: where the support fills the top r, it lies within x >= tau_r."""
    z = _logits(40, 500, scale, seed=3)
    top = z.topk(r, dim=-1).values
    tau, support = _threshold((top - top[:, :1]) / 2)
    true = (entmax.entmax15(z, dim=-1) > 0).sum(-1)
    filled = (support == r).squeeze(-1)
    assert bool(filled.any())
    for row in filled.nonzero()[:, 0].tolist():
        bound = _support_bound(z[row:row + 1], top[row:row + 1, :1], tau[row:row + 1])
        assert r <= int(true[row]) <= bound


def test_rows_beyond_k_are_solved_by_one_more_topk(monkeypatch):
    """Supports hundreds wide (an untrained model's) take one widening, not a doubling per
    power of 2, and still give the package's loss and gradient."""
    z = _logits(16, 3000, 0.05, seed=4)
    z[0] *= 100  # one row with a support under k, solved by the first topk
    y = torch.randint(0, 3000, (16,), generator=torch.Generator().manual_seed(5))
    widths, topk = [], torch.Tensor.topk

    def counted(self, width, *args, **kwargs):
        widths.append(width)
        return topk(self, width, *args, **kwargs)

    monkeypatch.setattr(torch.Tensor, "topk", counted)
    blocks = _solve(z, 10)
    monkeypatch.undo()
    assert len(widths) == 2 and widths[0] == 10 and widths[1] > 160
    assert sorted(int(r) for rows, _, _ in blocks for r in rows) == list(range(16))
    theirs = z.clone().requires_grad_(True)
    (grad,) = torch.autograd.grad(entmax.entmax15_loss(theirs, y).sum(), theirs)
    ours = z.clone().requires_grad_(True)
    rows = entmax15_topk_rows(ours, y, 10)
    (my_grad,) = torch.autograd.grad(rows.sum(), ours)
    torch.testing.assert_close(rows, entmax.entmax15_loss(z, y), rtol=0, atol=1e-12)
    torch.testing.assert_close(my_grad, grad, rtol=0, atol=1e-12)


def test_when_no_row_fits_in_k_the_widening_reads_every_row_in_place(monkeypatch):
    """Every support wider than k (early training): the second topk runs on the logits
    themselves, not on a copy of their rows, and one block covers all rows in order."""
    z = _logits(16, 3000, 0.05, seed=4)
    y = torch.randint(0, 3000, (16,), generator=torch.Generator().manual_seed(5))
    sources, topk = [], torch.Tensor.topk

    def counted(self, width, *args, **kwargs):
        sources.append(self.data_ptr())
        return topk(self, width, *args, **kwargs)

    monkeypatch.setattr(torch.Tensor, "topk", counted)
    blocks = _solve(z, 10)
    monkeypatch.undo()
    assert sources == [z.data_ptr()] * 2
    assert len(blocks) == 1 and blocks[0][0] is None
    ours = z.clone().requires_grad_(True)
    rows = entmax15_topk_rows(ours, y, 10)
    theirs = z.clone().requires_grad_(True)
    (grad,) = torch.autograd.grad(entmax.entmax15_loss(theirs, y).sum(), theirs)
    (my_grad,) = torch.autograd.grad(rows.sum(), ours)
    torch.testing.assert_close(rows, entmax.entmax15_loss(z, y), rtol=0, atol=1e-12)
    torch.testing.assert_close(my_grad, grad, rtol=0, atol=1e-12)
