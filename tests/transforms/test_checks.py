"""The argument checks every transform and loss shares (:mod:`arelu_cli.transforms.checks`,
``reduction.check_targets``): a non-finite tau, integer logits and targets outside the
vocabulary are refused with a message saying what is wrong, by every entry point."""

from __future__ import annotations

import math

import pytest
import torch

from arelu_cli.registry import get_transform
from arelu_cli.transforms import (AlphaReLU, AlphaReLULoss, LinearAlphaReLULoss, alpha_relu,
                                  alpha_relu_log_scores, alpha_relu_loss, cross_entropy_loss,
                                  entmax15, entmax15_loss, entmax_bisect, entmax_bisect_loss,
                                  linear_alpha_relu_loss, softmax, sparsemax, sparsemax_loss)
from arelu_cli.transforms.checks import check_tau

Z, Y = torch.randn(3, 7), torch.tensor([0, 6, -100])
HIDDEN, WEIGHT = torch.randn(3, 4), torch.randn(7, 4)

TAU_USERS = {
    "alpha_relu": lambda tau: alpha_relu(Z, 1.5, tau),
    "alpha_relu_log_scores": lambda tau: alpha_relu_log_scores(Z, 1.5, tau),
    "alpha_relu_loss": lambda tau: alpha_relu_loss(Z, Y, 1.5, tau),
    "AlphaReLU": lambda tau: AlphaReLU(1.5, tau)(Z),
    "AlphaReLULoss": lambda tau: AlphaReLULoss(1.5, tau)(Z, Y),
    "linear_alpha_relu_loss": lambda tau: linear_alpha_relu_loss(HIDDEN, WEIGHT, Y, 1.5, tau),
    "LinearAlphaReLULoss": lambda tau: LinearAlphaReLULoss(1.5, tau)(HIDDEN, WEIGHT, Y),
    "get_transform": lambda tau: get_transform("1.5-relu", tau=tau),
}


@pytest.mark.parametrize("tau", [math.nan, math.inf, -math.inf])
@pytest.mark.parametrize("user", sorted(TAU_USERS))
def test_a_tau_that_is_not_finite_is_refused(user, tau):
    with pytest.raises(ValueError, match=r"tau \(alpha-ReLU's threshold\) must be a finite "
                                         r"number, got (nan|inf|-inf)"):
        TAU_USERS[user](tau)


@pytest.mark.parametrize("user", sorted(TAU_USERS))
def test_a_finite_tau_runs(user):
    out = TAU_USERS[user](0.1)
    assert out is not None


@pytest.mark.parametrize("tau", ["x", None, [0.1]])
def test_a_tau_that_is_no_number_is_refused(tau):
    with pytest.raises(ValueError, match=r"tau \(alpha-ReLU's threshold\) must be a number"):
        check_tau(tau)
    assert check_tau("0.25") == 0.25 and check_tau(torch.tensor(-1.0)) == -1.0


TRANSFORMS = {
    "alpha_relu": lambda z: alpha_relu(z, 1.5, 0.1),
    "alpha_relu_log_scores": lambda z: alpha_relu_log_scores(z, 1.5, 0.1),
    "softmax": softmax, "sparsemax": sparsemax, "entmax15": entmax15,
    "entmax_bisect": entmax_bisect,
    "alpha_relu_loss": lambda z: alpha_relu_loss(z, torch.zeros(z.shape[:-1], dtype=torch.long)),
    "entmax15_loss": lambda z: entmax15_loss(z, torch.zeros(z.shape[:-1], dtype=torch.long)),
}


@pytest.mark.parametrize("name", sorted(TRANSFORMS))
@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.bool])
def test_integer_logits_are_a_type_error(name, dtype):
    with pytest.raises(TypeError, match=rf"logits must be a floating-point tensor, got "
                                        rf"{dtype}; convert them first"):
        TRANSFORMS[name](torch.ones(2, 5, dtype=dtype))


LOSSES = {
    "softmax": cross_entropy_loss, "sparsemax": sparsemax_loss, "1.5-entmax": entmax15_loss,
    "1.3-entmax-bisect": lambda z, y, **kw: entmax_bisect_loss(z, y, 1.3, **kw),
    "1.5-relu": lambda z, y, **kw: alpha_relu_loss(z, y, 1.5, 0.1, **kw),
}


@pytest.mark.parametrize("name", sorted(LOSSES))
@pytest.mark.parametrize("bad", [7, 100, -1, -101])
def test_a_target_outside_the_vocabulary_is_named(name, bad):
    y = torch.tensor([[0, 6], [bad, -100]])
    with pytest.raises(ValueError, match=rf"target {bad} \(position 2 of the flattened targets\)"
                                         r" is outside the vocabulary \[0, 7\); targets to "
                                         r"ignore must equal ignore_index \(-100\)"):
        LOSSES[name](torch.randn(2, 2, 7), y)
    # another ignore_index: -100 is then a target like any other, and out of range
    with pytest.raises(ValueError, match=r"target -100 .* ignore_index \(-1\)"):
        LOSSES[name](torch.randn(2, 2, 7), torch.tensor([[0, 6], [-1, -100]]), ignore_index=-1)
    assert torch.isfinite(LOSSES[name](torch.randn(2, 2, 7), torch.tensor([[0, 6], [3, -100]])))
