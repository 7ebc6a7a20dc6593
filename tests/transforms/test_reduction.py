"""The dtype of a reduced loss (:func:`arelu_cli.transforms.reduction.loss_dtype`): a sum
over many half-precision rows must neither overflow fp16 nor round to bf16's 3 digits."""

from __future__ import annotations

import pytest
import torch

from arelu_cli.transforms import (alpha_relu_loss, cross_entropy_loss, entmax15_loss,
                                  linear_alpha_relu_loss)
from arelu_cli.transforms.reduction import loss_dtype


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
