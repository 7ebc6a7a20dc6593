"""The ``triton`` engine under ``TRITON_INTERPRET=1`` on CPU tensors (no GPU needed):
transform, the single-pass loss and gradient against float64 definitions for every power
and dtype, label smoothing, ignored rows, in-place gradients, the device-side scaling and
the fused layer's tile marks (the ``interpreted`` fixture is in ``conftest.py``)."""

import pytest
import torch
import torch.nn.functional as F

from arelu_cli.transforms import alpha_relu_kernels as kernels
from arelu_cli.transforms import alpha_relu, alpha_relu_loss, linear_alpha_relu_loss
from arelu_cli.transforms import set_engine

pytest.importorskip("triton")

ALPHAS = [1.5, 2.0, 4 / 3, 1.25, 1.7]
TOLERANCE = {torch.float32: 1e-5, torch.bfloat16: 2e-2, torch.float16: 2e-3}


def reference(z, y, alpha, tau, eps=0.0):
    """Probabilities, per-row loss (paper eq. (sp_loss), target ``(1 - eps) e_y + eps / V``)
    and gradient, in float64."""
    z = z.double()
    p = ((alpha - 1) * z - tau).clamp_min(0) ** (1 / (alpha - 1))
    q = (1 - eps) * F.one_hot(y, z.shape[-1]).double() + eps / z.shape[-1]
    tsallis = (1 - (p ** alpha).sum(-1)) / (alpha * (alpha - 1))
    return p, ((p - q) * (z - tau / (alpha - 1))).sum(-1) + tsallis, p - q


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
    set_engine("eager")
    ref = alpha_relu_loss(F.linear(h, w), y, 1.5, 0.4)
    torch.testing.assert_close(loss, ref)
    for a, b in zip(grads, torch.autograd.grad(ref, (h, w))):
        torch.testing.assert_close(a, b)


def logits_and_targets(n, vocab, dtype=torch.float32, seed=0, ignored=(1,)):
    gen = torch.Generator().manual_seed(seed)
    z = (torch.randn(n, vocab, generator=gen) * 2).to(dtype)
    y = torch.randint(0, vocab, (n,), generator=gen)
    y[list(ignored)] = -100
    return z, y


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("reduction", ["none", "mean"])
def test_single_pass_with_label_smoothing_and_ignored_rows(interpreted, dtype, reduction):
    """V = 300 is no multiple of the kernel's 512-column block; row 1 is ignored."""
    eps, alpha, tau = 0.1, 1.5, 0.3
    z, y = logits_and_targets(4, 300, dtype)
    x = z.clone().requires_grad_(True)
    loss = alpha_relu_loss(x, y, alpha, tau, reduction=reduction, label_smoothing=eps)
    upstream = torch.rand(loss.shape, generator=torch.Generator().manual_seed(1)) + 0.5
    (grad,) = torch.autograd.grad(loss, x, upstream.to(loss.dtype))
    valid = y != -100
    _, rows_ref, grad_ref = reference(z, torch.where(valid, y, 0), alpha, tau, eps)
    rows_ref, grad_ref = rows_ref * valid, grad_ref * valid[:, None]
    if reduction == "mean":
        loss_ref, grad_ref = rows_ref.sum() / valid.sum(), grad_ref / valid.sum()
    else:
        loss_ref = rows_ref
    grad_ref = grad_ref * upstream.double().reshape(-1, 1)
    tol = TOLERANCE[dtype]
    torch.testing.assert_close(loss.double(), loss_ref, rtol=tol, atol=tol)
    torch.testing.assert_close(grad.double(), grad_ref, rtol=tol, atol=tol)
    assert torch.all(grad[1] == 0)


@pytest.mark.parametrize("spread", [0.05, 1.0, 40.0])
def test_a_soft_capped_pass_matches_float64(interpreted, spread):
    """``loss_pass(..., softcap=c)`` is the loss of ``c tanh(z / c)`` and its gradient in
    ``z``, against float64 autograd, label smoothed: logits ``spread`` caps wide reach both
    branches of the kernel's tanh (the series below ``|z / c| = 0.1``, exponentials above)
    and its saturation."""
    cap, eps = 3.0, 0.1
    z, y = logits_and_targets(4, 300)
    z = z * (spread * cap / 2)
    scale = torch.tensor([0.5, 0.0, 1.0, 2.0])                  # row 1 is ignored
    grad = torch.empty_like(z)
    rows = interpreted.loss_pass(z, y, 1.5, 0.1, eps, grad=grad, scale=scale, softcap=cap)
    x = z.double().requires_grad_(True)
    valid = y != -100
    ref = alpha_relu_loss(cap * torch.tanh(x / cap), torch.where(valid, y, 0), 1.5, 0.1,
                          reduction="none", label_smoothing=eps) * valid
    (grad_ref,) = torch.autograd.grad(ref, x, scale.double())
    torch.testing.assert_close(rows.double(), ref.detach(), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(grad.double(), grad_ref, rtol=1e-5, atol=1e-6)


def test_reuse_writes_the_gradient_in_forward_and_autograd_sees_it(interpreted):
    z, y = logits_and_targets(3, 200, ignored=())
    x = z.clone().requires_grad_(True)
    logits = x * 1.0  # a non-leaf, as a Linear layer's output
    loss = alpha_relu_loss(logits, y, 1.5, 0.2, reduction="sum", reuse_logits=True)
    _, _, grad_ref = reference(z, y, 1.5, 0.2)
    torch.testing.assert_close(logits.detach().double(), grad_ref, rtol=1e-5, atol=1e-6)
    (grad,) = torch.autograd.grad(loss, x)  # upstream 1: the device skips the scaling
    torch.testing.assert_close(grad.double(), grad_ref, rtol=1e-5, atol=1e-6)
    logits = x * 1.0
    squared = logits.pow(2)  # pow saves `logits` for its backward
    loss = alpha_relu_loss(logits, y, 1.5, 0.2, reuse_logits=True) + squared.sum()
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        loss.backward()


def test_without_gradient_nothing_is_written(interpreted):
    z, y = logits_and_targets(3, 200)
    logits = z.clone().requires_grad_(True) * 1.0
    before = logits.detach().clone()
    with torch.no_grad():
        alpha_relu_loss(logits, y, 1.5, 0.2, reuse_logits=True)
    assert torch.equal(logits.detach(), before)


def test_second_backward_raises(interpreted):
    z, y = logits_and_targets(2, 64, ignored=())
    x = z.clone().requires_grad_(True)
    loss = alpha_relu_loss(x, y, 1.5, 0.2)
    torch.autograd.grad(loss, x, retain_graph=True)
    with pytest.raises(RuntimeError, match="backward ran twice"):
        torch.autograd.grad(loss, x)


def test_one_row_and_a_target_out_of_range(interpreted):
    z, _ = logits_and_targets(1, 130, ignored=())
    y = torch.tensor([129])
    _, rows_ref, _ = reference(z, y, 1.7, 0.1)
    rows = alpha_relu_loss(z, y, 1.7, 0.1, reduction="none")
    torch.testing.assert_close(rows.double(), rows_ref, rtol=1e-5, atol=1e-5)
    # the kernel gives a NaN row (on a GPU nothing reads the targets on the host); CPU
    # tensors, as here, are refused before it by reduction.check_targets
    assert interpreted.loss_pass(z, torch.tensor([130]), 1.7, 0.1).isnan().all()
    with pytest.raises(ValueError, match=r"target 130 .* outside the vocabulary \[0, 130\)"):
        alpha_relu_loss(z, torch.tensor([130]), 1.7, 0.1, reduction="none")


def test_scaling_is_in_place_and_skipped_at_one(interpreted):
    x = torch.randn(3, 300)
    before = x.clone()
    interpreted.scale_(x, torch.tensor([1.0, 0.5, 1.0]))
    assert torch.equal(x[[0, 2]], before[[0, 2]])
    torch.testing.assert_close(x[1], before[1] * 0.5)
    interpreted.scale_(x, torch.tensor(1.0))
    interpreted.scale_(x[1], torch.tensor(2.0))  # a scalar factor on any contiguous tensor
    torch.testing.assert_close(x, before)


@pytest.mark.parametrize("programs", [2, 5])
def test_scaling_spans_several_blocks_per_program(interpreted, monkeypatch, programs):
    """With at most 2 or 5 programs per launch, each program scales a span of 8 or 2 blocks of
    2048 columns of a row (the rows of 5000, a partial last block), or 4 or 2 blocks of the
    whole tensor seen as one row (a 0-d factor); a factor of 1 skips its row, a NaN factor (a
    NaN upstream gradient) is applied."""
    monkeypatch.setattr(interpreted, "_SCALE_PROGRAMS", programs)
    x = torch.randn(3, 5000, dtype=torch.bfloat16)
    before = x.clone()
    factors = torch.tensor([2.0, 1.0, float("nan")])
    interpreted.scale_(x, factors)
    torch.testing.assert_close(x, (before.float() * factors[:, None]).bfloat16(), equal_nan=True)
    assert torch.equal(x[1], before[1])
    flat = before.clone()
    interpreted.scale_(flat, torch.tensor(0.5))  # 15000 entries: 8 blocks of one row
    torch.testing.assert_close(flat, (before.float() * 0.5).bfloat16())
    interpreted.scale_(flat, torch.tensor(1.0))
    torch.testing.assert_close(flat, (before.float() * 0.5).bfloat16())


def test_tile_marks_are_exactly_the_nonzero_tiles_of_the_gradient(interpreted):
    """Rows 0-127 and 128-129 are two row blocks, columns 0-127, 128-255 and 256-299 three
    vocabulary tiles; logits far below the threshold leave some tiles without a nonzero."""
    z, y = logits_and_targets(130, 300, ignored=(5,))
    z[:, 128:256] = -50.0
    z[128:, :128] = -50.0
    y[y // 128 == 1] = 0
    y[128:] = 260
    grad = torch.empty_like(z)
    flags = torch.zeros(2, 3, dtype=torch.int32)
    interpreted.loss_pass(z, y, 1.5, 0.3, grad=grad, flags=flags)
    padded = torch.zeros(256, 384, dtype=torch.bool)
    padded[:130, :300] = grad.ne(0)
    expected = padded.reshape(2, 128, 3, 128).any(3).any(1)
    assert flags.bool().tolist() == expected.tolist()
    assert expected.tolist() == [[True, False, True], [False, False, True]]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("reduction", ["sum", "mean"])
@pytest.mark.parametrize("upstream", [1.0, 3.0])
def test_sum_and_mean_fold_their_constant_into_forward(interpreted, dtype, reduction, upstream):
    """The gradient written in forward (here into the logits, ``reuse_logits``) is already
    ``(p - e_y) / n`` for ``mean``; backward multiplies by the upstream gradient only, so
    ``loss * 3`` still gives 3 times the float64 gradient. Rows 1 and 4 are ignored."""
    z, y = logits_and_targets(6, 300, dtype, seed=2, ignored=(1, 4))
    valid = y != -100
    _, rows_ref, grad_ref = reference(z, torch.where(valid, y, 0), 1.5, 0.3)
    rows_ref, grad_ref = rows_ref * valid, grad_ref * valid[:, None]
    divisor = valid.sum() if reduction == "mean" else 1
    x = z.clone().requires_grad_(True)
    logits = x * 1.0  # a non-leaf: its memory may hold the gradient
    loss = alpha_relu_loss(logits, y, 1.5, 0.3, reduction=reduction, reuse_logits=True)
    tol = TOLERANCE[dtype]
    torch.testing.assert_close(logits.detach().double(), grad_ref / divisor, rtol=tol, atol=tol)
    (grad,) = torch.autograd.grad(loss * upstream, x)
    torch.testing.assert_close(loss.double(), rows_ref.sum() / divisor, rtol=tol, atol=tol)
    torch.testing.assert_close(grad.double(), grad_ref * upstream / divisor, rtol=tol, atol=tol)


def on_both_engines(z, y, reduction):
    """``(loss, gradient of 2 * loss)`` at alpha 1.5, tau 0.2 on the triton engine, then the
    eager one."""
    results = []
    for name in ("triton", "eager"):
        set_engine(name)
        x = z.clone().requires_grad_(True)
        loss = alpha_relu_loss(x, y, 1.5, 0.2, reduction=reduction)
        results.append((loss.detach(), torch.autograd.grad(loss * 2.0, x)[0]))
    return results


@pytest.mark.parametrize("reduction", ["sum", "mean"])
def test_no_counted_row_gives_what_the_eager_engine_gives(interpreted, reduction):
    """Every target ignored: ``sum`` and ``mean`` are 0 with a zero gradient (``mean``
    divides by at least 1), on the triton engine as on the eager one."""
    z, _ = logits_and_targets(3, 200, ignored=())
    y = torch.full((3,), -100)
    (loss, grad), (eager_loss, eager_grad) = on_both_engines(z, y, reduction)
    torch.testing.assert_close(loss, eager_loss)
    torch.testing.assert_close(grad, eager_grad)
    assert float(loss) == 0.0 and bool((grad == 0).all())


@pytest.mark.parametrize("reduction", ["sum", "mean"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_count_and_total_over_several_blocks_of_rows(interpreted, monkeypatch, reduction,
                                                      dtype):
    """With 8 rows per step of the count and total kernels (1,024 on a GPU), 30 rows are four
    steps, the last one partial, every 7th target ignored: the loss (float32, as every
    reduced loss) and the gradient equal the eager engine's, whose count and sum are ATen
    ops."""
    monkeypatch.setattr(interpreted, "_REDUCE_BLOCK", 8)
    z, y = logits_and_targets(30, 40, dtype, seed=3, ignored=range(0, 30, 7))
    (loss, grad), (eager_loss, eager_grad) = on_both_engines(z, y, reduction)
    assert loss.dtype == torch.float32 and loss.dim() == 0
    tol = TOLERANCE[dtype]
    torch.testing.assert_close(loss, eager_loss, rtol=tol, atol=tol)
    torch.testing.assert_close(grad, eager_grad, rtol=tol, atol=tol)
    assert interpreted.count_(y, -100).tolist() == pytest.approx([1 / 25])


def test_count_of_no_row_and_of_no_counted_row(interpreted):
    assert interpreted.count_(torch.empty(0, dtype=torch.long), -100)[0] == 1.0
    assert interpreted.count_(torch.full((3,), -100), -100).tolist() == [1.0]
    rows = torch.tensor([1.0, 2.0, 0.0])
    mean = interpreted.total(rows, torch.tensor([1, 2, -100]), -100, True, torch.bfloat16)
    assert mean.dtype == torch.bfloat16 and float(mean) == 1.5
    assert float(interpreted.total(rows, torch.tensor([1, 2, -100]), -100, False,
                                   torch.float32)) == 3.0
    none = torch.zeros(3)  # the loss kernel's rows at ignored targets
    assert float(interpreted.total(none, torch.full((3,), -100), -100, True,
                                   torch.float32)) == 0.0
