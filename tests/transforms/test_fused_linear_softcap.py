"""The fused layer's soft-cap (``softcap=c``: the loss of the capped logits ``c tanh(z / c)``):
the loss and every gradient equal the unfused loss of the capped logits in float64 over a
table of tilings, ignored rows, label smoothing, every reduction, both loops and both
gradient paths of the CPU loop; zero skipping still never changes a result; bad caps."""

import math

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from arelu_cli.transforms import (LinearAlphaReLULoss, alpha_relu_loss, linear_alpha_relu_loss,
                                  set_engine)
from arelu_cli.transforms import _torch_linear

from .test_fused_linear import assert_same, loss_and_grads, problem, sparse_tiles  # noqa: F401

# Logits of problem() spread about one unit and tau 0.3 puts alpha-ReLU's threshold at 0.6:
# a cap of 1.5 bends the support's logits well away from z.
CAP = 1.5


def fused_and_unfused(hidden, weight, b, target, reduction, alpha=1.5, tau=0.3, eps=0.0,
                      cap=CAP, **kwargs):
    fused = loss_and_grads(lambda: linear_alpha_relu_loss(
        hidden, weight, target, alpha, tau, bias=b, reduction=reduction, label_smoothing=eps,
        softcap=cap, **kwargs), hidden, weight, b)
    counted = max(int((target != -100).sum()), 1) if reduction == "mean" else 1

    def unfused():
        capped = cap * torch.tanh(F.linear(hidden, weight, b) / cap)
        return alpha_relu_loss(capped, target, alpha, tau,
                               reduction="sum" if reduction == "mean" else reduction,
                               label_smoothing=eps) / counted
    return fused, loss_and_grads(unfused, hidden, weight, b)


# name -> (problem arguments, loss arguments): V = 50 columns.
SHAPES = {
    "V not a multiple of the block": (dict(), dict(vocab_chunk=16)),
    "2-D tiles": (dict(), dict(vocab_chunk=16, chunk=4)),
    "the default rule": (dict(), dict()),
    "all tokens ignored": (dict(ignored=range(21)), dict(vocab_chunk=16)),
    "half ignored": (dict(ignored=range(0, 21, 2)), dict(vocab_chunk=16, chunk=5)),
    "label smoothing": (dict(), dict(vocab_chunk=16, eps=0.1)),
    "smoothing, 2-D, ignored": (dict(ignored=(0, 4, 20)), dict(vocab_chunk=7, chunk=3, eps=0.3)),
    "no bias": (dict(bias=False), dict(vocab_chunk=16)),
    "no bias, smoothing": (dict(bias=False), dict(vocab_chunk=16, eps=0.1)),
    "dense products": (dict(), dict(vocab_chunk=16, skip_zeros=False)),
    "alpha 2, wide support": (dict(), dict(vocab_chunk=16, alpha=2.0, tau=-0.5)),
    "alpha 1.3, general power": (dict(), dict(vocab_chunk=16, alpha=1.3, tau=0.1, eps=0.2)),
    "a cap below most logits": (dict(), dict(vocab_chunk=16, tau=0.1, cap=0.4)),
    "token loop": (dict(), dict(loop="tokens", chunk=4)),
    "token loop, smoothing": (dict(bias=False), dict(loop="tokens", chunk=8, eps=0.1)),
}


@pytest.mark.parametrize("sparse_share, engine", [(_torch_linear.SPARSE_SHARE, "auto"),
                                                   (1.0, "auto"), (1.0, "eager")])
@pytest.mark.parametrize("reduction", ["none", "sum", "mean"])
@pytest.mark.parametrize("shape", list(SHAPES))
def test_equals_the_unfused_capped_loss_in_float64(shape, reduction, sparse_share, engine,
                                                   monkeypatch):
    """As the uncapped table (``test_fused_linear``): ``SPARSE_SHARE = 1`` runs every tile's
    products on its nonzeros, the cap's derivative taken at each of them."""
    monkeypatch.setattr(_torch_linear, "SPARSE_SHARE", sparse_share)
    set_engine(engine)
    made, kwargs = SHAPES[shape]
    hidden, weight, b, target = problem(3, **made)
    fused, unfused = fused_and_unfused(hidden, weight, b, target, reduction, **kwargs)
    assert_same(fused, unfused)


def test_the_cap_changes_the_loss():
    """The table above would pass for a cap that did nothing if the logits were too small
    to bend: they are not."""
    hidden, weight, b, target = problem(3)
    capped = linear_alpha_relu_loss(hidden, weight, target, 1.5, 0.3, bias=b, softcap=CAP)
    plain = linear_alpha_relu_loss(hidden, weight, target, 1.5, 0.3, bias=b)
    assert abs(float((capped - plain).detach())) > 1e-2


@settings(max_examples=20, deadline=None)
@given(alpha=st.floats(1.05, 2.0), tau=st.floats(-0.5, 1.0), eps=st.sampled_from([0.0, 0.1]),
       cap=st.floats(0.5, 20.0), reduction=st.sampled_from(["none", "sum", "mean"]),
       loop=st.sampled_from(["vocab", "tokens"]), chunk=st.sampled_from([3, None]),
       cols=st.sampled_from([4, 17, None]), skip=st.booleans(), seed=st.integers(0, 2**16))
def test_any_tiling_equals_the_unfused_capped_loss(alpha, tau, eps, cap, reduction, loop, chunk,
                                                   cols, skip, seed):
    hidden, weight, b, target = problem(seed)
    fused, unfused = fused_and_unfused(
        hidden, weight, b, target, reduction, alpha, tau, eps, cap, chunk=chunk,
        skip_zeros=skip, loop=loop, vocab_chunk=cols if loop == "vocab" else None)
    assert_same(fused, unfused, tol=1e-10)


def test_capped_tiles_still_skip_their_zeros(sparse_tiles):
    """A zero of ``p - q`` stays zero times the cap's derivative: tiles of logits far below
    the threshold run sparse (the default) and give the dense result."""
    hidden, weight, b, target = problem(11, tokens=(40,), d=8, vocab=300, ignored=(3,))
    with torch.no_grad():
        weight[100:] *= 0.01
    runs = [loss_and_grads(lambda: linear_alpha_relu_loss(
        hidden, weight, target, 1.5, 2.0, bias=b, reduction="sum", vocab_chunk=100,
        skip_zeros=skip, softcap=5.0), hidden, weight, b) for skip in (None, False)]
    assert_same(runs[0], runs[1], tol=1e-12)
    assert sparse_tiles == [True, True, True]


def test_capped_smoothed_tiles_run_dense(sparse_tiles):
    """With label smoothing the capped gradient is nonzero everywhere: no tile looks for a
    support to skip to."""
    hidden, weight, b, target = problem(11, tokens=(40,), d=8, vocab=300, ignored=(3,))
    loss = linear_alpha_relu_loss(hidden, weight, target, 1.5, 2.0, bias=b, vocab_chunk=100,
                                  label_smoothing=0.1, softcap=5.0)
    loss.backward()
    assert sparse_tiles == [] and bool((weight.grad != 0).all())


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_low_precision_is_close_to_float32(dtype):
    hidden, weight, b, target = problem(2, tokens=(64,), d=32, vocab=500, dtype=torch.float32)
    kwargs = dict(label_smoothing=0.1, softcap=2.0)
    ref = loss_and_grads(lambda: linear_alpha_relu_loss(hidden, weight, target, 1.5, 0.3,
                                                        bias=b, **kwargs), hidden, weight, b)
    low = [x.detach().to(dtype).requires_grad_(True) for x in (hidden, weight, b)]
    loss, grads = loss_and_grads(lambda: linear_alpha_relu_loss(
        low[0], low[1], target, 1.5, 0.3, bias=low[2], chunk=10, vocab_chunk=128, **kwargs),
        *low)
    torch.testing.assert_close(loss.float(), ref[0], rtol=3e-2, atol=3e-2)
    for g, r in zip(grads, ref[1]):
        assert g.dtype == dtype
        torch.testing.assert_close(g.float(), r, rtol=5e-2, atol=2e-2)


def test_module_matches_function():
    hidden, weight, b, target = problem(9)
    module = LinearAlphaReLULoss(alpha=1.3, tau=0.2, reduction="sum", softcap=2)
    assert module.softcap == 2.0
    torch.testing.assert_close(module(hidden, weight, target, b),
                               linear_alpha_relu_loss(hidden, weight, target, 1.3, 0.2, b,
                                                      reduction="sum", softcap=2.0))


@pytest.mark.parametrize("cap", [0.0, -1.0, math.nan, math.inf, "30", True])
def test_a_cap_that_is_not_positive_and_finite_is_refused(cap):
    hidden, weight, b, target = problem(10)
    with pytest.raises(ValueError, match="softcap must be None .* or a positive finite number"):
        linear_alpha_relu_loss(hidden, weight, target, bias=b, softcap=cap)
    with pytest.raises(ValueError, match="softcap must be None"):
        LinearAlphaReLULoss(softcap=cap)
