"""The ``triton`` engine on a real GPU (marker ``cuda``; skipped without one): the single-pass
alpha-ReLU loss and the fused linear layer against float64 definitions, every dtype, no host
sync, more than 2^31 logits, CUDA graphs, torch.compile and a non-current device; the fused
layer on both gradient paths (the default cuBLAS products, ``skip_zeros=True``'s tile-skipping
Triton GEMMs).

Run them alone with ``pytest -m cuda``.
"""

import pytest
import torch
import torch.nn.functional as F

from arelu_cli.transforms import alpha_relu_kernels as kernels
from arelu_cli.transforms import alpha_relu, alpha_relu_loss, linear_alpha_relu_loss
from arelu_cli.transforms import set_engine

from .conftest import (check_a_cuda_graph, check_against_float64, check_no_host_sync,
                       linear_case, linear_loss)

pytestmark = [pytest.mark.cuda,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs an NVIDIA GPU")]

ALPHAS = [1.5, 2.0, 4 / 3, 1.25, 1.7]
TOLERANCE = {torch.float32: 1e-5, torch.bfloat16: 2e-2, torch.float16: 2e-3}


@pytest.fixture(autouse=True)
def triton_engine(monkeypatch):
    set_engine("auto")
    pytest.importorskip("triton")


def reference(z, y, alpha, tau, eps=0.0, ignore_index=-100):
    """Per-row loss (paper eq. (sp_loss), smoothed target) and gradient ``p - q`` in float64;
    ignored rows 0."""
    z = z.double()
    valid = y != ignore_index
    safe = torch.where(valid, y, 0)
    p = ((alpha - 1) * z - tau).clamp_min(0) ** (1 / (alpha - 1))
    q = (1 - eps) * F.one_hot(safe, z.shape[-1]).double() + eps / z.shape[-1]
    tsallis = (1 - (p ** alpha).sum(-1)) / (alpha * (alpha - 1))
    rows = ((p - q) * (z - tau / (alpha - 1))).sum(-1) + tsallis
    return rows * valid, (p - q) * valid[:, None]


def inputs(n, vocab, dtype, seed=0, device="cuda"):
    gen = torch.Generator(device=device).manual_seed(seed)
    z = (torch.randn(n, vocab, generator=gen, device=device) * 2).to(dtype)
    y = torch.randint(0, vocab, (n,), generator=gen, device=device)
    y[:: 7] = -100
    return z, y


@pytest.mark.parametrize("alpha", ALPHAS)
@pytest.mark.parametrize("dtype", list(TOLERANCE))
@pytest.mark.parametrize("eps", [0.0, 0.1])
def test_loss_and_gradient_match_float64(alpha, dtype, eps):
    """V = 5003 is no multiple of any block; every 7th row is ignored."""
    tau = 0.3 * (alpha - 1)
    z, y = inputs(37, 5003, dtype, seed=int(alpha * 10))
    assert kernels.engine_for(z) == "triton"
    x = z.clone().requires_grad_(True)
    rows = alpha_relu_loss(x, y, alpha, tau, reduction="none", label_smoothing=eps)
    upstream = torch.rand(37, device="cuda") + 0.5
    (grad,) = torch.autograd.grad(rows, x, upstream.to(rows.dtype))
    rows_ref, grad_ref = reference(z, y, alpha, tau, eps)
    tol = TOLERANCE[dtype]
    torch.testing.assert_close(rows.double(), rows_ref, rtol=tol, atol=tol * rows_ref.abs().max())
    grad_ref = (grad_ref * upstream.double()[:, None]).to(dtype).double()
    torch.testing.assert_close(grad.double(), grad_ref, rtol=tol, atol=tol)
    p_ref = ((alpha - 1) * z.double() - tau).clamp_min(0) ** (1 / (alpha - 1))
    torch.testing.assert_close(alpha_relu(z, alpha, tau).double(), p_ref.to(dtype).double(),
                               rtol=tol, atol=tol)


@pytest.mark.parametrize("reduction", ["sum", "mean"])
@pytest.mark.parametrize("reuse", [False, True])
@pytest.mark.parametrize("upstream", [1.0, 3.0])
def test_reductions_reuse_and_one_row(reduction, reuse, upstream):
    """``mean``'s 1 / n is folded into forward: ``loss * 3`` still gets 3 times the gradient."""
    for n in (1, 64):
        z, y = inputs(n, 1000, torch.float32)
        y[0] = 3
        x = z.clone().requires_grad_(True)
        logits = x * 1.0
        loss = alpha_relu_loss(logits, y, 1.5, 0.2, reduction=reduction, reuse_logits=reuse)
        (grad,) = torch.autograd.grad(loss * upstream, x)
        rows_ref, grad_ref = reference(z, y, 1.5, 0.2)
        count = (y != -100).sum() if reduction == "mean" else 1
        torch.testing.assert_close(loss.double(), rows_ref.sum() / count, rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(grad.double(), grad_ref * upstream / count, rtol=1e-5,
                                   atol=1e-6)


def test_mean_over_no_counted_row_is_zero_with_a_zero_gradient():
    z, _ = inputs(8, 1000, torch.bfloat16)
    x = z.clone().requires_grad_(True)
    loss = alpha_relu_loss(x, torch.full((8,), -100, device="cuda"), 1.5, 0.2)
    (grad,) = torch.autograd.grad(loss, x)
    assert float(loss) == 0.0 and bool((grad == 0).all())


def test_no_host_synchronization():
    z, y = inputs(256, 3000, torch.bfloat16)
    hidden = torch.randn(256, 64, device="cuda", requires_grad=True)
    weight = torch.randn(3000, 64, device="cuda", requires_grad=True)
    def steps():
        x = z.clone().requires_grad_(True)
        alpha_relu_loss(x * 1.0, y, 1.5, 0.2, reuse_logits=True).backward()
        for skip in (None, True):
            linear_alpha_relu_loss(hidden, weight, y, 1.5, 0.2, skip_zeros=skip).backward()
            linear_alpha_relu_loss(hidden, weight, y, 1.5, 0.2, reduction="none",
                                   skip_zeros=skip).sum().backward()
    check_no_host_sync(steps)


def test_more_than_2_to_the_31_logits():
    """8.6e9 bf16 logits (16 GiB) and their gradient: 64-bit offsets; the last rows are
    checked."""
    n, vocab = 32768, 262144
    if torch.cuda.mem_get_info()[0] < 2.3 * n * vocab * 2:
        pytest.skip("needs ~37 GiB of free GPU memory")
    gen = torch.Generator(device="cuda").manual_seed(0)
    logits = torch.randn(n, vocab, generator=gen, device="cuda", dtype=torch.bfloat16)
    y = torch.randint(0, vocab, (n,), generator=gen, device="cuda")
    tail = logits[-3:].clone()
    x = logits.requires_grad_(True)
    loss = alpha_relu_loss(x, y, 1.5, 0.3, reduction="sum")
    (grad,) = torch.autograd.grad(loss, x)
    rows_ref, grad_ref = reference(tail, y[-3:], 1.5, 0.3)
    torch.testing.assert_close(grad[-3:].double(), grad_ref.bfloat16().double(), rtol=2e-2,
                               atol=2e-2)
    with torch.no_grad():
        rows = alpha_relu_loss(logits, y, 1.5, 0.3, reduction="none")
    torch.testing.assert_close(rows[-3:].double(), rows_ref, rtol=2e-2, atol=2e-2)

@pytest.mark.parametrize("dtype, tol", [(torch.float32, 1e-4), (torch.bfloat16, 3e-2)])
@pytest.mark.parametrize("tied, bias", [(False, True), (True, False), (True, True)])
@pytest.mark.parametrize("reduction", ["sum", "mean", "none"])
@pytest.mark.parametrize("skip", [None, True])
def test_fused_layer_matches_float64(dtype, tol, tied, bias, reduction, skip, monkeypatch):
    """1000 tokens (chunks of 128 when asked), d = 96, V = 3001; both gradient paths."""
    hidden, weight, b, target = linear_case(1000, 96, 3001, dtype, bias)
    got = linear_loss(hidden, weight, b, target, True, reduction, tied=tied, skip_zeros=skip)
    set_engine("eager")
    expected = linear_loss(hidden.double(), weight.double(), None if b is None else b.double(),
                           target, False, reduction, tied=tied)
    check_against_float64(got, expected, dtype, tol)


@pytest.mark.parametrize("skip", [None, True])
def test_fused_layer_in_a_cuda_graph_and_under_torch_compile(skip):
    hidden, weight, b, target = linear_case(512, 64, 2000, torch.bfloat16)
    eager = linear_loss(hidden, weight, b, target, True, skip_zeros=skip)
    h = hidden.clone().requires_grad_(True)
    w = weight.clone().requires_grad_(True)
    bb = b.clone().requires_grad_(True)

    def step():
        loss = linear_alpha_relu_loss(h, w, target, 1.5, 0.3, bias=bb, reduction="sum",
                                      skip_zeros=skip)
        return (loss, *torch.autograd.grad(loss, (h, w, bb)))
    check_a_cuda_graph(step, eager)
    compiled = torch.compile(lambda: linear_alpha_relu_loss(h, w, target, 1.5, 0.3, bias=bb,
                                                            reduction="sum", skip_zeros=skip))
    torch.testing.assert_close(compiled(), eager[0])


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two GPUs")
def test_tensors_on_a_device_that_is_not_the_current_one():
    torch.cuda.set_device(0)
    z, y = inputs(40, 700, torch.bfloat16, device="cuda:1")
    x = z.clone().requires_grad_(True)
    loss = alpha_relu_loss(x, y, 1.5, 0.2, reduction="sum", label_smoothing=0.1)
    (grad,) = torch.autograd.grad(loss, x)
    rows_ref, grad_ref = reference(z, y, 1.5, 0.2, 0.1)
    torch.testing.assert_close(loss.double(), rows_ref.sum(), rtol=2e-2, atol=2e-2)
    torch.testing.assert_close(grad.double(), grad_ref.bfloat16().double(), rtol=2e-2, atol=2e-2)
    hidden = torch.randn(300, 32, device="cuda:1", requires_grad=True)
    weight = torch.randn(700, 32, device="cuda:1", requires_grad=True)
    target = torch.randint(0, 700, (300,), device="cuda:1")
    fused = linear_alpha_relu_loss(hidden, weight, target, 1.5, 0.2)
    unfused = alpha_relu_loss(F.linear(hidden, weight), target, 1.5, 0.2)
    torch.testing.assert_close(fused, unfused)
    assert torch.cuda.current_device() == 0


def test_a_training_call_dispatches_no_aten_compute_op():
    """The host's side of a small loss call is its cost where the device's work is short:
    forward and backward of ``mean`` with ``reuse_logits`` and of ``none`` issue only Triton
    launches, allocations and views, no ATen kernel (the upstream gradient's ``ones_like``
    is autograd's, not the loss's)."""
    from torch.utils._python_dispatch import TorchDispatchMode

    allowed = {"empty", "empty_like", "view", "select", "slice", "reshape", "_reshape_alias",
               "detach", "alias", "ones_like", "new_empty_strided", "empty_strided"}

    class Record(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.ops = set()

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.ops.add(func.overloadpacket.__name__)
            return func(*args, **(kwargs or {}))

    z, y = inputs(64, 3000, torch.bfloat16)
    for reduction in ("mean", "sum", "none"):
        x = z.clone().requires_grad_(True)
        logits = x * 1.0
        with Record() as record:
            loss = alpha_relu_loss(logits, y, 1.5, 0.2, reduction=reduction, reuse_logits=True)
            torch.autograd.grad(loss, logits, torch.ones_like(loss))
        assert record.ops <= allowed, (reduction, record.ops - allowed)
