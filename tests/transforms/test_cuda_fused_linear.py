"""The fused linear + alpha-ReLU loss's tile loops on a real GPU (marker ``cuda``; skipped
without one): vocabulary blocks (1-D and 2-D tiles) and token chunks against the unfused
loss in float64 (float32 to 1e-4, bf16 to a tolerance), label smoothing, ignored rows,
every reduction, a soft-cap, no host sync, a CUDA graph, and more than 2^31 logits.

Run them alone with ``pytest -m cuda``.
"""

import pytest
import torch
import torch.nn.functional as F

from arelu_cli.transforms import alpha_relu_loss, linear_alpha_relu_loss, set_engine

from .conftest import (check_a_cuda_graph, check_against_float64, check_no_host_sync,
                       linear_case, linear_loss)

pytestmark = [pytest.mark.cuda,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs an NVIDIA GPU")]

# 1000 tokens x V = 3001: one tile by default; 2 x 3 tiles of 512 x 1024 (both partial at
# the end); the token loop in chunks of 384.
LOOPS = {"vocab": dict(), "vocab 2-D": dict(chunk=512, vocab_chunk=1024),
         "tokens": dict(loop="tokens", chunk=384)}


@pytest.fixture(autouse=True)
def triton_engine():
    pytest.importorskip("triton")
    set_engine("auto")


@pytest.mark.parametrize("dtype, tol", [(torch.float32, 1e-4), (torch.bfloat16, 3e-2)])
@pytest.mark.parametrize("reduction, eps", [("sum", 0.0), ("mean", 0.1), ("none", 0.1)])
@pytest.mark.parametrize("loop", list(LOOPS))
def test_matches_the_unfused_loss_in_float64(dtype, tol, reduction, eps, loop):
    hidden, weight, bias, target = linear_case(1000, 96, 3001, dtype)
    got = linear_loss(hidden, weight, bias, target, True, reduction, eps, **LOOPS[loop])
    set_engine("eager")
    expected = linear_loss(hidden.double(), weight.double(), bias.double(), target, False,
                           reduction, eps)
    check_against_float64(got, expected, dtype, tol)


@pytest.mark.parametrize("skip", [None, True])
@pytest.mark.parametrize("dtype, tol", [(torch.float32, 1e-4), (torch.bfloat16, 3e-2)])
@pytest.mark.parametrize("reduction, eps", [("sum", 0.0), ("mean", 0.1)])
@pytest.mark.parametrize("loop", list(LOOPS))
def test_a_soft_cap_matches_the_unfused_capped_loss(dtype, tol, reduction, eps, loop, skip):
    """Logits ``2 tanh(z / 2)``, capped in the kernel as it reads them."""
    hidden, weight, bias, target = linear_case(1000, 96, 3001, dtype)
    got = linear_loss(hidden, weight, bias, target, True, reduction, eps, softcap=2.0,
                      skip_zeros=skip, **LOOPS[loop])
    set_engine("eager")
    expected = linear_loss(hidden.double(), weight.double(), bias.double(), target, False,
                           reduction, eps, softcap=2.0)
    check_against_float64(got, expected, dtype, tol)


@pytest.mark.parametrize("skip", [None, True])
def test_the_vocabulary_loop_equals_the_token_loop(skip):
    """float32, TF32 off: the two loops and both gradient paths agree to summation order."""
    hidden, weight, bias, target = linear_case(700, 64, 2500, torch.float32, seed=2)
    runs = [linear_loss(hidden, weight, bias, target, True, skip_zeros=skip, **options)
            for options in (dict(chunk=256, vocab_chunk=1024), dict(loop="tokens", chunk=256))]
    torch.testing.assert_close(runs[0][0], runs[1][0], rtol=1e-5, atol=1e-5)
    for a, b in zip(runs[0][1], runs[1][1]):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5 * b.abs().max())


def test_a_mean_over_no_counted_row_is_zero_with_zero_gradients():
    hidden, weight, bias, target = linear_case(300, 32, 2000, torch.bfloat16)
    target[:] = -100
    loss, grads = linear_loss(hidden, weight, bias, target, True, "mean", 0.1, vocab_chunk=1024)
    assert float(loss.detach()) == 0.0 and all(bool((g == 0).all()) for g in grads)


def test_no_host_synchronization():
    hidden, weight, bias, target = linear_case(600, 64, 3000, torch.bfloat16)
    h, w, b = (t.clone().requires_grad_(True) for t in (hidden, weight, bias))

    def steps():
        for options in (dict(chunk=256, vocab_chunk=1024), dict(loop="tokens", chunk=256)):
            for skip in (None, True):
                linear_alpha_relu_loss(h, w, target, 1.5, 0.2, bias=b, skip_zeros=skip,
                                       label_smoothing=0.1, **options).backward()
                linear_alpha_relu_loss(h, w, target, 1.5, 0.2, bias=b, reduction="none",
                                       skip_zeros=skip, **options).sum().backward()
    check_no_host_sync(steps)


def test_2d_tiles_in_a_cuda_graph():
    hidden, weight, bias, target = linear_case(512, 64, 2000, torch.bfloat16)
    eager = linear_loss(hidden, weight, bias, target, True, "sum", 0.1, chunk=256,
                        vocab_chunk=768)
    h, w, b = (t.clone().requires_grad_(True) for t in (hidden, weight, bias))

    def step():
        loss = linear_alpha_relu_loss(h, w, target, 1.5, 0.3, bias=b, reduction="sum",
                                      label_smoothing=0.1, chunk=256, vocab_chunk=768)
        return (loss, *torch.autograd.grad(loss, (h, w, b)))
    check_a_cuda_graph(step, eager)


def test_more_than_2_to_the_31_logits():
    """16384 x 131072 = 2^31 bf16 logits, never held: 32 vocabulary blocks, the last rows'
    targets in the last block; their losses and hidden gradients against float64."""
    n, d, vocab = 16384, 64, 131072
    hidden, weight, bias, target = linear_case(n, d, vocab, torch.bfloat16, seed=3)
    target[-3:] = torch.tensor([vocab - 1, vocab - 4097, 5], device="cuda")
    h = hidden.clone().requires_grad_(True)
    rows = linear_alpha_relu_loss(h, weight, target, 1.5, 0.3, bias=bias, reduction="none")
    (grad,) = torch.autograd.grad(rows, h, torch.ones_like(rows))
    tail = hidden[-3:].double().requires_grad_(True)
    set_engine("eager")
    expected = alpha_relu_loss(F.linear(tail, weight.double(), bias.double()), target[-3:],
                               1.5, 0.3, reduction="none")
    (expected_grad,) = torch.autograd.grad(expected.sum(), tail)
    torch.testing.assert_close(rows[-3:].double(), expected, rtol=2e-2, atol=2e-2)
    torch.testing.assert_close(grad[-3:].double(), expected_grad, rtol=3e-2,
                               atol=3e-2 * expected_grad.abs().max())
    assert torch.isfinite(rows).all()
