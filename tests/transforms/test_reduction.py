"""The reduction shared by every loss (:mod:`arelu_cli.transforms.reduction`): the dtype of a
reduced loss (a sum over many half-precision rows must neither overflow fp16 nor round to
bf16's 3 digits) and the loss convention of a batch whose every target is ignored (``mean``
is 0 with exactly zero gradients) for every transform on every engine."""

from __future__ import annotations

import pytest
import torch

from arelu_cli.registry import get_transform
from arelu_cli.transforms import (_cpp_kernels, alpha_relu_loss, cross_entropy_loss,
                                  entmax15_loss, linear_alpha_relu_loss, set_engine)
from arelu_cli.transforms.reduction import loss_dtype, reduce_rows, row_scale


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32, torch.float64])
@pytest.mark.parametrize("reduction", ["none", "sum", "mean"])
def test_loss_dtype(dtype, reduction):
    half = dtype in (torch.float16, torch.bfloat16)
    assert loss_dtype(dtype, reduction) == (torch.float32 if half and reduction != "none"
                                            else dtype)


def _logits(rows: int, vocab: int, dtype: torch.dtype):
    torch.manual_seed(0)
    return (torch.randn(rows, vocab) * 3).to(dtype), torch.randint(0, vocab, (rows,))


LOSSES = {
    "1.5-relu": lambda z, y, r: alpha_relu_loss(z, y, 1.5, 0.1, reduction=r),
    "softmax": lambda z, y, r: cross_entropy_loss(z, y, reduction=r),
    "1.5-entmax": lambda z, y, r: entmax15_loss(z, y, reduction=r),
}


@pytest.mark.parametrize("name", sorted(LOSSES))
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_a_sum_over_many_half_rows_is_the_float32_sum(name, dtype):
    """20,000 rows of loss ~4-10 sum past fp16's 65,504: the sum stays finite and equals the
    sum of the same rows in float32; the mean is the float32 mean (not rounded to bf16)."""
    z, y = _logits(20_000, 16, dtype)
    loss = LOSSES[name]
    rows = loss(z, y, "none")
    assert rows.dtype == dtype
    for reduction, reduce in (("sum", torch.sum), ("mean", torch.mean)):
        value = loss(z, y, reduction)
        assert value.dtype == torch.float32 and torch.isfinite(value)
        exact = reduce(loss(z.double(), y, "none"))
        torch.testing.assert_close(value.double(), exact, rtol=2e-3, atol=0)
    assert float(loss(z, y, "sum")) > 65_504        # what fp16 could not hold


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_the_fused_sum_over_many_half_rows_is_finite(dtype):
    torch.manual_seed(0)
    hidden = torch.randn(20_000, 8).to(dtype)
    weight = (torch.randn(16, 8) * 1.5).to(dtype)
    y = torch.randint(0, 16, (20_000,))
    value = linear_alpha_relu_loss(hidden, weight, y, 1.5, 0.1, reduction="sum")
    exact = linear_alpha_relu_loss(hidden.double(), weight.double(), y, 1.5, 0.1,
                                   reduction="sum")
    assert value.dtype == torch.float32 and float(exact) > 65_504
    torch.testing.assert_close(value.double(), exact, rtol=2e-3, atol=0)


# --- a batch whose every target is ignored ---------------------------------------------------

ENGINES = ["eager"] + (["cpp"] if _cpp_kernels.available() else [])
# Every loss form: the exact sort, the partial sort, bisection, and alpha-ReLU's powers.
CASES = [(name, "eager") for name in ("softmax", "sparsemax", "1.5-entmax", "1.5-entmax-k3",
                                       "2-entmax-k3", "1.3-entmax-bisect")]
CASES += [(name, engine) for name in ("1.5-relu", "2-relu", "1.25-relu") for engine in ENGINES]


def _all_ignored(dtype: torch.dtype, ignore_index: int = -100):
    torch.manual_seed(1)
    z = (torch.randn(2, 3, 11) * 3).to(dtype).requires_grad_(True)
    return z, torch.full((2, 3), ignore_index)


def _assert_zero(loss: torch.Tensor, *grads: torch.Tensor) -> None:
    assert loss.dim() == 0 and float(loss.detach()) == 0.0, float(loss.detach())
    for grad in grads:
        assert bool(torch.isfinite(grad).all()) and bool((grad == 0).all())


def test_reduce_rows_and_row_scale_over_no_counted_row():
    valid = torch.zeros(4, dtype=torch.bool)
    rows = torch.tensor([1.0, float("nan"), 2.0, 3.0])  # ignored rows are never read
    assert float(reduce_rows(rows, valid, "mean", torch.Size([4]))) == 0.0
    assert float(reduce_rows(rows, valid, "sum", torch.Size([4]))) == 0.0
    assert row_scale(torch.tensor(1.0), valid, "mean").tolist() == [0.0] * 4
    some = torch.tensor([True, False, True, True])
    assert float(reduce_rows(torch.tensor([1.0, 9.0, 2.0, 3.0]), some, "mean",
                             torch.Size([4]))) == 2.0
    assert row_scale(torch.tensor(1.0), some, "mean").tolist() == pytest.approx([1 / 3, 0, 1 / 3,
                                                                                 1 / 3])
    nan = torch.tensor(float("nan"))  # a caller's 0 / 0 upstream: ignored rows stay at 0
    assert row_scale(nan, some, "sum")[1] == 0.0 and row_scale(nan, some, "sum")[0].isnan()


@pytest.mark.parametrize("name, engine", CASES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("eps", [0.0, 0.1])
def test_an_all_ignored_mean_is_zero_with_zero_gradients(name, engine, dtype, eps):
    """Loss 0 (not NaN) and exactly zero, finite gradients for every transform's loss (the
    engine matters to alpha-ReLU only), with and without label smoothing."""
    set_engine(engine)
    transform = get_transform(name, tau=0.1)
    z, y = _all_ignored(dtype, ignore_index=7)
    loss = transform.loss(transform.loss_input(z), y, ignore_index=7, label_smoothing=eps)
    (grad,) = torch.autograd.grad(loss, z)
    _assert_zero(loss, grad)
    assert loss.dtype == torch.float32


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("reduction", ["mean", "sum"])
def test_the_fused_loss_of_an_all_ignored_batch_is_zero_with_zero_gradients(engine, reduction):
    set_engine(engine)
    torch.manual_seed(2)
    hidden = torch.randn(2, 3, 8, requires_grad=True)
    weight = torch.randn(11, 8, requires_grad=True)
    bias = torch.randn(11, requires_grad=True)
    loss = linear_alpha_relu_loss(hidden, weight, torch.full((2, 3), -100), 1.5, 0.1, bias,
                                  reduction=reduction)
    _assert_zero(loss, *torch.autograd.grad(loss, (hidden, weight, bias)))


@pytest.mark.parametrize("reduction", ["mean", "sum"])
def test_the_triton_engine_gives_an_all_ignored_batch_zero_gradients(interpreted, reduction):
    """The single-pass loss and the fused layer of the ``triton`` engine (its CPU
    interpreter) count and divide on the device: the same convention."""
    z, y = _all_ignored(torch.float32)
    loss = alpha_relu_loss(z * 1.0, y, 1.5, 0.1, reduction=reduction, reuse_logits=True)
    (grad,) = torch.autograd.grad(loss, z)
    _assert_zero(loss, grad)
    hidden = torch.randn(6, 8, requires_grad=True)
    weight = torch.randn(11, 8, requires_grad=True)
    loss = linear_alpha_relu_loss(hidden, weight, torch.full((6,), -100), 1.5, 0.1,
                                  reduction=reduction)
    _assert_zero(loss, *torch.autograd.grad(loss, (hidden, weight)))
