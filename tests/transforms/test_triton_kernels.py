"""The ``triton`` engine under ``TRITON_INTERPRET=1`` on CPU tensors (no GPU needed):
transform, loss and gradient against float64 definitions for every power and dtype."""

import importlib

import pytest
import torch
import torch.nn.functional as F

from arelu_cli.transforms import _alpha_relu_kernels as kernels
from arelu_cli.transforms import alpha_relu, alpha_relu_loss, linear_alpha_relu_loss

pytest.importorskip("triton")

ALPHAS = [1.5, 2.0, 4 / 3, 1.25, 1.7]
TOLERANCE = {torch.float32: 1e-5, torch.bfloat16: 2e-2, torch.float16: 2e-3}


@pytest.fixture(scope="module")
def interpreted():
    """The Triton kernels re-decorated under the interpreter, and the engine forced to them;
    afterwards the module is reloaded as it was, for any later CUDA use."""
    name = "arelu_cli.transforms._triton_kernels"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TRITON_INTERPRET", "1")
        patch.setenv("ARELU_BACKEND", "triton")
        yield importlib.reload(importlib.import_module(name))
    importlib.reload(importlib.import_module(name))


def reference(z, y, alpha, tau):
    """Probabilities, per-row loss (paper eq. (sp_loss)) and gradient, in float64."""
    z = z.double()
    p = ((alpha - 1) * z - tau).clamp_min(0) ** (1 / (alpha - 1))
    onehot = F.one_hot(y, z.shape[-1]).double()
    tsallis = (1 - (p ** alpha).sum(-1)) / (alpha * (alpha - 1))
    return p, ((p - onehot) * (z - tau / (alpha - 1))).sum(-1) + tsallis, p - onehot


@pytest.mark.parametrize("alpha", ALPHAS)
@pytest.mark.parametrize("dtype", list(TOLERANCE))
def test_transform_loss_and_gradient_match_the_definitions(interpreted, alpha, dtype):
    gen = torch.Generator().manual_seed(int(alpha * 100))
    tau = float(torch.empty(1).uniform_(-0.5, 1.0, generator=gen))
    z = (torch.randn(3, 4100, generator=gen) * 2).to(dtype)  # more than one 4096 block
    y = torch.randint(0, 4100, (3,), generator=gen)
    assert kernels.engine_for(z) == "triton"
    p_ref, rows_ref, grad_ref = reference(z, y, alpha, tau)
    tol = TOLERANCE[dtype]
    torch.testing.assert_close(alpha_relu(z, alpha, tau).double(), p_ref.to(dtype).double(),
                               rtol=tol, atol=tol)
    x = z.clone().requires_grad_(True)
    rows = alpha_relu_loss(x, y, alpha, tau, reduction="none")
    (grad,) = torch.autograd.grad(rows.sum(), x)
    torch.testing.assert_close(rows.double(), rows_ref, rtol=tol, atol=tol * rows_ref.abs().max())
    torch.testing.assert_close(grad.double(), grad_ref.to(dtype).double(), rtol=tol, atol=tol)


def test_gradient_in_place_and_ignored_rows(interpreted):
    h = torch.randn(4, 8, requires_grad=True)
    w = torch.randn(300, 8)
    y = torch.tensor([3, -100, 299, 0])
    grads = []
    for reuse in (False, True):
        loss = alpha_relu_loss(h @ w.T, y, 1.5, 0.3, reuse_logits=reuse)
        grads.append(torch.autograd.grad(loss, h)[0])
    torch.testing.assert_close(grads[0], grads[1])
    x = (h @ w.T).detach().requires_grad_(True)
    (grad,) = torch.autograd.grad(alpha_relu_loss(x, y, 1.5, 0.3), x)
    assert torch.all(grad[1] == 0)


def test_nan_stays_nan(interpreted):
    z = torch.randn(2, 50)
    z[0, 3] = float("nan")
    rows = alpha_relu_loss(z, torch.tensor([1, 2]), 1.7, 0.1, reduction="none")
    assert rows.isnan().tolist() == [True, False]
    assert alpha_relu(z, 1.7, 0.1)[0, 3].isnan()


def test_fused_linear_loss_runs_on_the_triton_engine(interpreted, monkeypatch):
    h = torch.randn(6, 16, dtype=torch.float32, requires_grad=True)
    w = torch.randn(70, 16, requires_grad=True)
    y = torch.randint(0, 70, (6,))
    loss = linear_alpha_relu_loss(h, w, y, 1.5, 0.4, chunk=4)
    grads = torch.autograd.grad(loss, (h, w))
    monkeypatch.setenv("ARELU_BACKEND", "eager")
    ref = alpha_relu_loss(F.linear(h, w), y, 1.5, 0.4)
    torch.testing.assert_close(loss, ref)
    for a, b in zip(grads, torch.autograd.grad(ref, (h, w))):
        torch.testing.assert_close(a, b)
