"""alpha-ReLU and its loss: closed forms, Lemma 1, gradcheck, ignore_index, dtypes, engines."""

import math
import subprocess
import sys

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from arelu_cli.transforms import (AlphaReLULoss, alpha_relu, alpha_relu_log_scores,
                                  alpha_relu_loss)
from arelu_cli.transforms import alpha_relu_kernels as kernels
from arelu_cli.transforms import set_engine

ALPHAS = [1.1, 1.25, 4 / 3, 1.5, 1.75, 2.0]


def direct_probs(z, alpha, tau):
    """The definition, term by term, in float64."""
    return torch.clamp((alpha - 1) * z.double() - tau, min=0) ** (1 / (alpha - 1))


def direct_loss_rows(z, y, alpha, tau):
    """Paper eq. (sp_loss): (p - e_y)^T (z - tau/(alpha-1) 1) + H_alpha(p)."""
    z = z.double()
    p = direct_probs(z, alpha, tau)
    onehot = F.one_hot(y, z.shape[-1]).double()
    tsallis = (1 - (p ** alpha).sum(-1)) / (alpha * (alpha - 1))
    return ((p - onehot) * (z - tau / (alpha - 1))).sum(-1) + tsallis


@pytest.fixture(params=["eager", "compiled", "cpp"])
def engine(request, monkeypatch):
    set_engine(request.param)
    return request.param


def test_two_relu_with_zero_tau_is_relu():
    z = torch.randn(7, 11)
    assert torch.equal(alpha_relu(z, alpha=2.0, tau=0.0), torch.relu(z))


def test_one_point_five_relu_closed_form():
    z = torch.tensor([[-1.0, 0.0, 0.5, 1.0, 3.0]])
    expected = torch.clamp(z / 2 - 0.25, min=0) ** 2
    torch.testing.assert_close(alpha_relu(z, 1.5, 0.25), expected)


@settings(max_examples=40, deadline=None)
@given(alpha=st.floats(1.05, 2.0), tau=st.floats(-1.0, 1.0), rows=st.integers(1, 5),
       vocab=st.integers(1, 40), seed=st.integers(0, 2**16))
def test_transform_and_loss_match_the_definitions(alpha, tau, rows, vocab, seed):
    gen = torch.Generator().manual_seed(seed)
    z = torch.randn(rows, vocab, generator=gen, dtype=torch.float64) * 3
    y = torch.randint(0, vocab, (rows,), generator=gen)
    torch.testing.assert_close(alpha_relu(z, alpha, tau), direct_probs(z, alpha, tau))
    torch.testing.assert_close(alpha_relu_loss(z, y, alpha, tau, reduction="none"),
                               direct_loss_rows(z, y, alpha, tau))


@pytest.mark.parametrize("alpha", ALPHAS)
def test_gradient_is_exactly_p_minus_onehot(alpha, engine):
    """Lemma 1: d loss / d z = alpha_relu(z) - e_y, for any tau."""
    z = torch.randn(6, 50, dtype=torch.float32, requires_grad=True)
    y = torch.randint(0, 50, (6,))
    tau = 0.3
    (grad,) = torch.autograd.grad(alpha_relu_loss(z, y, alpha, tau, reduction="sum"), z)
    expected = alpha_relu(z.detach(), alpha, tau) - F.one_hot(y, 50).float()
    torch.testing.assert_close(grad, expected, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("alpha", ALPHAS)
@pytest.mark.parametrize("reduction", ["none", "sum", "mean"])
def test_gradcheck_float64(alpha, reduction):
    gen = torch.Generator().manual_seed(3)
    z = torch.randn(4, 9, dtype=torch.float64, generator=gen, requires_grad=True)
    y = torch.tensor([0, -100, 8, 3])
    assert torch.autograd.gradcheck(
        lambda x: alpha_relu_loss(x, y, alpha, 0.1, reduction=reduction), (z,))


@pytest.mark.parametrize("alpha", [1.25, 1.5, 2.0])
def test_transform_gradcheck_float64(alpha):
    z = torch.randn(3, 8, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda x: alpha_relu(x, alpha, -0.2), (z,))


def test_ignored_rows_contribute_nothing(engine):
    z = torch.randn(5, 30, requires_grad=True)
    y = torch.tensor([1, -100, 2, -100, 29])
    loss = alpha_relu_loss(z, y, 1.5, 0.2, reduction="mean")
    (grad,) = torch.autograd.grad(loss, z)
    assert torch.all(grad[[1, 3]] == 0)
    kept = torch.tensor([0, 2, 4])
    expected = alpha_relu_loss(z.detach()[kept], y[kept], 1.5, 0.2, reduction="mean")
    torch.testing.assert_close(loss.detach(), expected)
    rows = alpha_relu_loss(z, y, 1.5, 0.2, reduction="none")
    assert rows[1] == 0 and rows[3] == 0


def test_reductions_agree():
    z, y = torch.randn(2, 3, 17), torch.randint(0, 17, (2, 3))
    rows = alpha_relu_loss(z, y, reduction="none")
    assert rows.shape == (2, 3)
    torch.testing.assert_close(alpha_relu_loss(z, y, reduction="sum"), rows.sum())
    torch.testing.assert_close(alpha_relu_loss(z, y, reduction="mean"), rows.mean())


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_low_precision_is_finite_and_close_to_float32(dtype, engine):
    z = (torch.randn(8, 300) * 4).to(dtype).requires_grad_(True)
    y = torch.randint(0, 300, (8,))
    loss = alpha_relu_loss(z, y, 1.5, 0.1)
    (grad,) = torch.autograd.grad(loss, z)
    assert loss.dtype == torch.float32 and grad.dtype == dtype   # a reduced loss: fp32
    assert alpha_relu_loss(z, y, 1.5, 0.1, reduction="none").dtype == dtype
    assert torch.isfinite(loss) and torch.isfinite(grad).all()
    ref = alpha_relu_loss(z.detach().float(), y, 1.5, 0.1)
    torch.testing.assert_close(loss.float(), ref, rtol=2e-2, atol=2e-2)


def test_reuse_logits_gives_the_same_gradient_and_spares_leaves(engine):
    h = torch.randn(6, 16, requires_grad=True)
    w = torch.randn(40, 16, requires_grad=True)
    y = torch.randint(0, 40, (6,))
    grads = []
    for reuse in (False, True):
        logits = h @ w.T
        loss = alpha_relu_loss(logits, y, 1.5, 0.1, reuse_logits=reuse)
        grads.append(torch.autograd.grad(loss, (h, w)))
    for a, b in zip(*grads):
        torch.testing.assert_close(a, b)
    leaf = torch.randn(6, 40, requires_grad=True)
    before = leaf.detach().clone()
    alpha_relu_loss(leaf, y, reuse_logits=True).backward()
    assert torch.equal(leaf.detach(), before) and leaf.grad is not None


@pytest.mark.parametrize("first", ["ours", "theirs"])
def test_reuse_logits_is_never_silently_wrong_when_another_op_saved_them(first):
    """Autograd's version counter either catches the overwrite or it came too late to matter."""
    h = torch.randn(4, 8, requires_grad=True)
    w = torch.randn(8, 20)
    y = torch.randint(0, 20, (4,))

    def total(reuse):
        logits = h @ w
        ours = alpha_relu_loss(logits, y, reuse_logits=reuse)
        theirs = (logits * logits).sum()
        return ours + theirs if first == "ours" else theirs + ours

    (expected,) = torch.autograd.grad(total(False), h)
    try:
        (got,) = torch.autograd.grad(total(True), h)
    except RuntimeError as err:
        assert "modified by an inplace operation" in str(err)
    else:
        torch.testing.assert_close(got, expected)


def test_log_scores_are_log_probs_with_minus_inf_outside_support():
    z = torch.tensor([[-2.0, 0.1, 0.7, 3.0]], dtype=torch.float64)
    scores = alpha_relu_log_scores(z, 1.5, 0.1)
    probs = alpha_relu(z, 1.5, 0.1)
    assert torch.isneginf(scores[probs == 0]).all()
    torch.testing.assert_close(scores[probs > 0], probs[probs > 0].log())


@pytest.mark.parametrize("alpha", [1.5, 2.0, 1.3])
def test_engines_agree_on_a_large_input(monkeypatch, alpha):
    z = torch.randn(64, 3000, requires_grad=True)
    y = torch.randint(0, 3000, (64,))
    out = {}
    for name in ("eager", "compiled", "cpp"):
        set_engine(name)
        loss = alpha_relu_loss(z, y, alpha, 0.05)
        out[name] = (loss, torch.autograd.grad(loss, z)[0], alpha_relu(z.detach(), alpha, 0.05))
    for name in ("compiled", "cpp"):
        for ours, eager in zip(out[name], out["eager"]):
            torch.testing.assert_close(ours, eager)


def test_works_inside_a_users_torch_compile():
    layer = torch.nn.Linear(8, 30)
    x, y = torch.randn(5, 8), torch.randint(0, 30, (5,))

    def step(x):
        return alpha_relu_loss(layer(x), y, 1.5, 0.1)

    eager = step(x)
    (g_eager,) = torch.autograd.grad(eager, layer.weight)
    compiled = torch.compile(step)(x)
    (g_compiled,) = torch.autograd.grad(compiled, layer.weight)
    torch.testing.assert_close(compiled, eager)
    torch.testing.assert_close(g_compiled, g_eager)


def test_module_matches_function():
    z, y = torch.randn(3, 12), torch.randint(0, 12, (3,))
    module = AlphaReLULoss(alpha=1.3, tau=0.2, reduction="sum")
    torch.testing.assert_close(module(z, y), alpha_relu_loss(z, y, 1.3, 0.2, reduction="sum"))


@pytest.mark.parametrize("alpha", [1.0, 0.5, 2.5, math.nan, "x"])
def test_alpha_outside_range_is_rejected(alpha):
    with pytest.raises(ValueError, match=r"is outside \[1.05, 2\]"):
        alpha_relu_loss(torch.randn(2, 3), torch.tensor([0, 1]), alpha=alpha)


@pytest.mark.parametrize("kwargs, match", [
    (dict(reduction="avg"), "reduction must be one of"),
    (dict(target=torch.tensor([0, 1, 2])), "target shape"),
    (dict(target=torch.tensor([0.0, 1.0])), "integer class indices"),
])
def test_bad_arguments_say_what_is_wrong(kwargs, match):
    args = dict(logits=torch.randn(2, 3), target=torch.tensor([0, 1]))
    args.update(kwargs)
    with pytest.raises(ValueError, match=match):
        alpha_relu_loss(**args)


def test_the_library_imports_and_runs_without_triton():
    """Triton is optional: without it the ``triton`` engine falls back to ``eager``."""
    code = ("import sys; sys.modules['triton'] = None\n"
            "import os, torch\n"
            "from arelu_cli.transforms import alpha_relu_loss, linear_alpha_relu_loss\n"
            "from arelu_cli.transforms import alpha_relu_kernels as kernels, set_engine\n"
            "set_engine('triton'); os.environ['TRITON_INTERPRET'] = '1'\n"
            "z = torch.randn(3, 20, requires_grad=True)\n"
            "assert kernels.engine_for(z) == 'eager'\n"
            "alpha_relu_loss(z, torch.tensor([1, 2, 3])).backward()\n"
            "assert 'arelu_cli.transforms._triton_kernels' not in sys.modules\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
