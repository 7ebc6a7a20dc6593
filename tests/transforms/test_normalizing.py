"""softmax / sparsemax / entmax wrappers against the entmax package, and their losses."""

import entmax
import pytest
import torch
import torch.nn.functional as F

from arelu_cli.transforms import (cross_entropy_loss, entmax15, entmax15_loss, entmax_bisect,
                                  entmax_bisect_loss, log_probs, softmax, sparsemax,
                                  sparsemax_loss)

TRANSFORMS = [
    ("softmax", softmax, lambda z: torch.softmax(z, -1)),
    ("sparsemax", sparsemax, lambda z: entmax.sparsemax(z, -1)),
    ("entmax15", entmax15, lambda z: entmax.entmax15(z, -1)),
    ("entmax15-k3", lambda z: entmax15(z, k=3), lambda z: entmax.entmax15(z, -1)),
    ("bisect-1.3", lambda z: entmax_bisect(z, 1.3, n_iter=80),
     lambda z: entmax.entmax_bisect(z, 1.3, n_iter=80)),
]
LOSSES = [
    ("cross_entropy", cross_entropy_loss, lambda z: torch.softmax(z, -1)),
    ("sparsemax", sparsemax_loss, lambda z: entmax.sparsemax(z, -1)),
    ("entmax15", entmax15_loss, lambda z: entmax.entmax15(z, -1)),
    ("entmax15-k2", lambda z, y, **kw: entmax15_loss(z, y, k=2, **kw),
     lambda z: entmax.entmax15(z, -1)),
    ("bisect-1.7", lambda z, y, **kw: entmax_bisect_loss(z, y, alpha=1.7, n_iter=80, **kw),
     lambda z: entmax.entmax_bisect(z, 1.7, n_iter=80)),
]


@pytest.mark.parametrize("name, fn, reference", TRANSFORMS, ids=[t[0] for t in TRANSFORMS])
def test_outputs_match_reference_and_sum_to_one(name, fn, reference):
    z = torch.randn(6, 25, dtype=torch.float64) * 2
    probs = fn(z)
    torch.testing.assert_close(probs, reference(z))
    torch.testing.assert_close(probs.sum(-1), torch.ones(6, dtype=torch.float64))
    assert (probs >= 0).all()


@pytest.mark.parametrize("name, loss, probs", LOSSES, ids=[t[0] for t in LOSSES])
@pytest.mark.parametrize("reduction", ["none", "sum", "mean"])
def test_loss_gradcheck_float64(name, loss, probs, reduction):
    z = torch.randn(4, 7, dtype=torch.float64, requires_grad=True)
    y = torch.tensor([0, -100, 6, 2])
    assert torch.autograd.gradcheck(lambda x: loss(x, y, reduction=reduction), (z,),
                                    atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("name, loss, probs", LOSSES, ids=[t[0] for t in LOSSES])
def test_loss_gradient_is_p_minus_onehot_and_ignores_rows(name, loss, probs):
    z = torch.randn(5, 12, dtype=torch.float64, requires_grad=True)
    y = torch.tensor([3, -100, 0, 11, -100])
    (grad,) = torch.autograd.grad(loss(z, y, reduction="sum"), z)
    expected = probs(z.detach()) - F.one_hot(y.clamp_min(0), 12).double()
    expected[[1, 4]] = 0
    torch.testing.assert_close(grad, expected, atol=1e-7, rtol=1e-6)
    rows = loss(z, y, reduction="none")
    assert rows.shape == (5,) and rows[1] == 0 and rows[4] == 0


@pytest.mark.parametrize("name, loss, probs", LOSSES, ids=[t[0] for t in LOSSES])
def test_bfloat16_is_finite(name, loss, probs):
    z = (torch.randn(6, 50) * 3).bfloat16().requires_grad_(True)
    y = torch.randint(0, 50, (6,))
    value = loss(z, y)
    (grad,) = torch.autograd.grad(value, z)
    assert value.dtype == torch.float32 and torch.isfinite(value)   # a reduced loss: fp32
    assert grad.dtype == torch.bfloat16 and torch.isfinite(grad).all()


def test_log_probs_are_minus_inf_exactly_at_zeros():
    probs = sparsemax(torch.tensor([[3.0, 0.0, -2.0, 2.9]]))
    scores = log_probs(probs)
    assert torch.isneginf(scores[probs == 0]).all() and torch.isfinite(scores[probs > 0]).all()


@pytest.mark.parametrize("k", [0, -1, 2.5])
def test_bad_k_is_rejected(k):
    with pytest.raises(ValueError, match="positive integer"):
        entmax15(torch.randn(2, 5), k=k)
