"""Transforms by name: the paper's five, the general forms, and clear errors."""

import pytest
import torch
import torch.nn.functional as F

from arelu_cli.registry import PAPER_TRANSFORMS, get_transform

CASES = [
    # name, family, alpha, k, method
    ("softmax", "softmax", 1.0, None, "dense"),
    ("sparsemax", "entmax", 2.0, None, "sort"),
    ("1.5-entmax", "entmax", 1.5, None, "sort"),
    ("1.5-entmax-k100", "entmax", 1.5, 100, "sort"),
    ("1.5-relu", "relu", 1.5, None, "elementwise"),
    ("1.3-relu", "relu", 1.3, None, "elementwise"),
    ("2-entmax", "entmax", 2.0, None, "sort"),
    ("2-entmax-k5", "entmax", 2.0, 5, "sort"),
    ("1.25-entmax", "entmax", 1.25, None, "bisect"),
    ("1.5-entmax-bisect", "entmax", 1.5, None, "bisect"),
]


@pytest.mark.parametrize("name, family, alpha, k, method", CASES)
def test_lookup(name, family, alpha, k, method):
    transform = get_transform(name)
    assert (transform.family, transform.alpha, transform.k, transform.method) == (family, alpha, k, method)
    assert transform.normalized == (family != "relu")


@pytest.mark.parametrize("name", [c[0] for c in CASES])
def test_every_loss_has_gradient_probs_minus_onehot(name):
    transform = get_transform(name, tau=0.2, n_iter=80)
    z = torch.randn(4, 30, dtype=torch.float64, requires_grad=True)
    y = torch.randint(0, 30, (4,))
    (grad,) = torch.autograd.grad(transform.loss(z, y, reduction="sum"), z)
    expected = transform.probs(z.detach()) - F.one_hot(y, 30).double()
    torch.testing.assert_close(grad, expected, atol=1e-7, rtol=1e-6)
    scores = transform.log_scores(z.detach())
    probs = transform.probs(z.detach())
    torch.testing.assert_close(scores.exp(), probs)


@pytest.mark.parametrize("name", [c[0] for c in CASES])
def test_every_loss_takes_label_smoothing(name):
    """``loss(..., label_smoothing=eps)`` reaches every family: gradient ``probs - q`` with
    ``q = (1 - eps) e_y + eps / V``, and the value moves by ``eps (z_y - mean z)``."""
    transform = get_transform(name, tau=0.2, n_iter=80)
    z = torch.randn(4, 30, dtype=torch.float64, requires_grad=True)
    y = torch.randint(0, 30, (4,))
    smoothed = transform.loss(z, y, reduction="sum", label_smoothing=0.1)
    (grad,) = torch.autograd.grad(smoothed, z)
    q = 0.9 * F.one_hot(y, 30).double() + 0.1 / 30
    torch.testing.assert_close(grad, transform.probs(z.detach()) - q, atol=1e-7, rtol=1e-6)
    plain = transform.loss(z.detach(), y, reduction="sum")
    shift = 0.1 * (z.detach().gather(1, y[:, None]).squeeze(1) - z.detach().mean(1)).sum()
    torch.testing.assert_close(smoothed.detach(), plain + shift)


def test_paper_transforms_all_resolve():
    assert [get_transform(n).name for n in PAPER_TRANSFORMS] == list(PAPER_TRANSFORMS)


def test_relu_tau_is_used():
    z = torch.tensor([[1.0, 0.2]])
    assert torch.equal(get_transform("1.5-relu", tau=0.3).probs(z),
                       torch.clamp(z / 2 - 0.3, min=0) ** 2)


@pytest.mark.parametrize("name, match", [
    ("softmaxx", "not of a known form"),
    ("1-relu", r"alpha 1.0 is outside \[1.05, 2\]"),
    ("2.5-entmax", r"alpha 2.5 is outside \[1.05, 2\]"),
    ("1.3-entmax-k10", "partial sort"),
    ("1.5-relu-k3", "no -k"),
])
def test_unknown_names_list_what_is_valid(name, match):
    with pytest.raises(ValueError, match=match) as info:
        get_transform(name)
    assert type(info.value) is ValueError  # the library's own, not the CLI's UserError
    assert "1.5-relu" in str(info.value) and "<a>-entmax-bisect" in str(info.value)


@pytest.mark.parametrize("alpha", ("1.049", "1.05", "2", "2.001"))
def test_one_alpha_range_with_one_message_in_registry_losses_and_tau(alpha):
    """[1.05, 2] for every transform, loss and tau, with the message of ``check_alpha``."""
    from arelu_cli.transforms import (AlphaReLU, alpha_relu_loss, analytic_tau, entmax_bisect,
                                      entmax_bisect_loss, linear_alpha_relu_loss)
    from arelu_cli.transforms.checks import check_alpha

    z, y = torch.randn(2, 5), torch.tensor([0, 3])
    calls = [lambda: get_transform(f"{alpha}-relu"), lambda: get_transform(f"{alpha}-entmax"),
             lambda: get_transform(f"{alpha}-entmax-bisect"),
             lambda: alpha_relu_loss(z, y, float(alpha)), lambda: AlphaReLU(float(alpha)),
             lambda: entmax_bisect(z, float(alpha)), lambda: entmax_bisect_loss(z, y, float(alpha)),
             lambda: linear_alpha_relu_loss(z, torch.randn(7, 5), torch.tensor([1, 6]),
                                            float(alpha)),
             lambda: analytic_tau(100, sigma=1.0, alpha=float(alpha))]
    if 1.05 <= float(alpha) <= 2:
        for call in calls:
            call()
        return
    with pytest.raises(ValueError) as expected:
        check_alpha(float(alpha))
    for call in calls:
        with pytest.raises(ValueError) as raised:
            call()
        assert str(expected.value) in str(raised.value)


@pytest.mark.parametrize("name", [c[0] for c in CASES])
def test_bf16_logits_give_the_loss_and_gradient_of_their_fp32_copy(name):
    """What a trainer passes under bf16 autocast (:meth:`loss_input`: bf16 itself where the
    loss reads it with fp32 math, an fp32 copy elsewhere) gives the loss and gradient of
    the same logits copied to fp32."""
    transform = get_transform(name, tau=0.2, n_iter=80)
    torch.manual_seed(0)
    z = (3 * torch.randn(6, 40)).bfloat16()
    y = torch.randint(0, 40, (6,))
    given = transform.loss_input(z)
    assert given.dtype == (torch.bfloat16 if transform.half_logits else torch.float32)
    assert (given.data_ptr() == z.data_ptr()) == transform.half_logits  # no N x V copy
    half, full = z.clone().requires_grad_(), z.float().requires_grad_()
    loss_half = transform.loss(transform.loss_input(half), y, reduction="none").float().sum()
    loss_full = transform.loss(full, y, reduction="none").sum()
    (grad_half,) = torch.autograd.grad(loss_half, half)
    (grad_full,) = torch.autograd.grad(loss_full, full)
    torch.testing.assert_close(loss_half, loss_full, rtol=4e-3, atol=1e-3)
    torch.testing.assert_close(grad_half.float(), grad_full, rtol=1e-2, atol=4e-3)


def test_only_alpha_relu_reads_half_precision_and_fp32_is_never_copied():
    assert {n for n, *_ in CASES if get_transform(n).half_logits} == {"1.5-relu", "1.3-relu"}
    z = torch.randn(3, 5)
    assert all(get_transform(n).loss_input(z) is z for n, *_ in CASES)
