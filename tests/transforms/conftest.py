"""Fixtures of the transforms' tests: the engine restored after each test, and the Triton
kernels under their CPU interpreter; and the helpers the CUDA tests share
(:func:`linear_case`, :func:`linear_loss`, :func:`check_against_float64`,
:func:`check_a_cuda_graph`, :func:`check_no_host_sync`)."""

import importlib

import pytest
import torch
import torch.nn.functional as F

from arelu_cli.transforms import (alpha_relu_loss, engine, get_engine, linear_alpha_relu_loss,
                                  set_engine)

TRITON_MODULES = ("arelu_cli.transforms._triton_kernels", "arelu_cli.transforms._triton_linear")


@pytest.fixture(autouse=True)
def _restore_engine():
    """Tests choose engines with ``set_engine``; each starts from the engine before it."""
    before = get_engine()
    yield
    set_engine(before)


@pytest.fixture(scope="module")
def interpreted():
    """The Triton kernels re-decorated under the interpreter (``TRITON_INTERPRET=1``, so
    they run on CPU tensors) and alpha-ReLU's engine forced to them; afterwards the modules
    are reloaded as they were, for any later CUDA use. Yields ``_triton_kernels``."""
    pytest.importorskip("triton")
    with pytest.MonkeyPatch.context() as patch, engine("triton"):
        patch.setenv("TRITON_INTERPRET", "1")
        modules = [importlib.reload(importlib.import_module(name)) for name in TRITON_MODULES]
        yield modules[0]
    for name in TRITON_MODULES:
        importlib.reload(importlib.import_module(name))


def linear_case(n, d, vocab, dtype, bias=True, seed=0, device="cuda"):
    """``(hidden (n, d), weight (vocab, d), bias (vocab,) or None, target (n,))`` drawn from
    ``seed``: logits of about unit scale, every 11th target ignored."""
    gen = torch.Generator(device=device).manual_seed(seed)
    hidden = torch.randn(n, d, generator=gen, device=device).to(dtype)
    weight = (torch.randn(vocab, d, generator=gen, device=device) / d ** 0.5).to(dtype)
    b = (torch.randn(vocab, generator=gen, device=device) * 0.1).to(dtype) if bias else None
    target = torch.randint(0, vocab, (n,), generator=gen, device=device)
    target[::11] = -100
    return hidden, weight, b, target


def upstream(shape, device):
    """The upstream gradient of :func:`linear_loss`: uniform in [0.5, 1.5), seed 1."""
    gen = torch.Generator(device=device).manual_seed(1)
    return torch.rand(shape, generator=gen, device=device) + 0.5


def linear_loss(hidden, weight, bias, target, fused, reduction="sum", eps=0.0, tied=False,
                softcap=None, **options):
    """``(loss, gradients)`` of the 1.5-ReLU loss (tau 0.3, label smoothing ``eps``) of
    ``hidden @ weight.T + bias`` (``bias`` may be None) on fresh leaves: fused
    (``linear_alpha_relu_loss`` with ``options``) or unfused (``alpha_relu_loss`` of
    ``F.linear``, capped to ``softcap * tanh(z / softcap)`` when given); ``tied``: the weight
    is the input embedding too. The gradients are of the leaves under :func:`upstream`."""
    leaves = [t.clone().requires_grad_(True) for t in (hidden, weight, bias) if t is not None]
    h, w = leaves[0], leaves[1]
    b = leaves[2] if bias is not None else None
    if tied:
        h = h + 0.5 * w[torch.arange(h.shape[0], device=h.device) % w.shape[0]]
    if fused:
        loss = linear_alpha_relu_loss(h, w, target, 1.5, 0.3, bias=b, reduction=reduction,
                                      label_smoothing=eps, softcap=softcap, **options)
    else:
        logits = F.linear(h, w, b)
        if softcap is not None:
            logits = softcap * torch.tanh(logits / softcap)
        loss = alpha_relu_loss(logits, target, 1.5, 0.3, reduction=reduction,
                               label_smoothing=eps)
    return loss, torch.autograd.grad(loss, leaves, upstream(loss.shape, loss.device)
                                     .to(loss.dtype))


def check_against_float64(got, expected, dtype, tol):
    """:func:`linear_loss` results ``got`` in ``dtype`` against ``expected`` in float64: the
    loss within ``tol``, each gradient in ``dtype`` and within ``tol`` of its largest entry."""
    torch.testing.assert_close(got[0].double(), expected[0], rtol=tol, atol=tol)
    for a, e in zip(got[1], expected[1]):
        assert a.dtype == dtype
        torch.testing.assert_close(a.double(), e, rtol=tol, atol=tol * e.abs().max())


def check_a_cuda_graph(step, eager):
    """``step()`` (a summed fused loss and its gradients under an upstream 1) warmed up on a
    side stream, so that its kernels compile outside the capture, captured in a CUDA graph
    and replayed: its loss is ``eager``'s (:func:`linear_loss` of the same call), its
    gradients ``eager``'s over :func:`upstream`."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        step()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        captured = step()
    graph.replay()
    torch.cuda.synchronize()
    factor = upstream((), "cuda")
    torch.testing.assert_close(captured[0], eager[0])
    for a, e in zip(captured[1:], eager[1]):
        torch.testing.assert_close(a.float() * factor, e.float(), rtol=2e-2, atol=2e-2)


def check_no_host_sync(steps):
    """``steps()`` once to compile its kernels, then again under CUDA's sync debug mode
    ``error``: a step that synchronizes the host with the device raises."""
    steps()
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        steps()
    finally:
        torch.cuda.set_sync_debug_mode("default")
