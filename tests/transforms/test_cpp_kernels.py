"""The ``cpp`` engine: its two passes against float64 definitions, NaN, in-place writes,
alpha-ReLU's support, no threads of its own, and the clean fallback when it cannot be
built."""

import os
import warnings

import pytest
import torch

from arelu_cli.transforms import alpha_relu_kernels as kernels
from arelu_cli.transforms import _cpp_kernels, alpha_relu_loss
from arelu_cli.transforms import set_engine

pytestmark = pytest.mark.skipif(not _cpp_kernels.available(),
                                reason="no C++ toolchain to build the cpp engine")

# e = 1/(alpha - 1): 2, 1, 3, 4 (exact products) and 1/0.7 (pow).
POWERS = [2.0, 1.0, 3.0, 4.0, 1 / 0.7]
DTYPES = {torch.float64: 1e-12, torch.float32: 1e-5, torch.bfloat16: 2e-2, torch.float16: 2e-3}


def reference(z, c, e):
    t = (z.double() - c).clamp_min(0)
    return (t ** (e + 1)).sum(1), t ** e


@pytest.mark.parametrize("e", POWERS)
@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("c", [1.2, -0.3])  # a sparse and a dense support
def test_passes_match_the_definitions(e, dtype, c):
    gen = torch.Generator().manual_seed(int(e * 10) + 7)
    z = (torch.randn(5, 1000 + 3, generator=gen) * 2).to(dtype)  # V not a multiple of 64
    acc = torch.float64 if dtype == torch.float64 else torch.float32
    scale = torch.rand(5, generator=gen, dtype=acc)
    sums_ref, probs_ref = reference(z, c, e)
    tol = DTYPES[dtype]
    sums = _cpp_kernels.loss_sums(z, c, e)
    torch.testing.assert_close(sums.double(), sums_ref, rtol=tol, atol=tol)
    out = torch.empty_like(z)
    _cpp_kernels.probs_into(z, scale, c, e, 0.5, out)
    expected = (probs_ref * 0.5 * scale.double()[:, None]).to(dtype)
    torch.testing.assert_close(out, expected, rtol=tol, atol=tol)
    _cpp_kernels.probs_into(z, scale, c, e, 0.5, z)  # in place
    assert torch.equal(z, out)


@pytest.mark.parametrize("e", POWERS)
@pytest.mark.parametrize("dtype", list(DTYPES))
def test_label_smoothing_passes_match_the_definitions(e, dtype):
    """The smoothed loss's extra row sum of z comes with the same sums; the gradient pass
    subtracts scale * shift (shift = eps / V) in its one write, in place too."""
    gen = torch.Generator().manual_seed(int(e * 10) + 11)
    z = (torch.randn(5, 1000 + 3, generator=gen) * 2).to(dtype)
    acc = torch.float64 if dtype == torch.float64 else torch.float32
    scale = torch.rand(5, generator=gen, dtype=acc)
    c, shift, tol = 0.4, 0.1 / 1003, DTYPES[dtype]
    sums_ref, probs_ref = reference(z, c, e)
    sums, logit_sums = _cpp_kernels.loss_and_logit_sums(z, c, e)
    assert torch.equal(sums, _cpp_kernels.loss_sums(z, c, e))
    torch.testing.assert_close(logit_sums.double(), z.double().sum(1), rtol=tol, atol=tol * 10)
    out = torch.empty_like(z)
    _cpp_kernels.probs_into(z, scale, c, e, 0.5, out, shift)
    expected = ((probs_ref * 0.5 - shift) * scale.double()[:, None]).to(dtype)
    torch.testing.assert_close(out, expected, rtol=tol, atol=tol)
    _cpp_kernels.probs_into(z, scale, c, e, 0.5, z, shift)  # in place
    assert torch.equal(z, out)


@pytest.mark.parametrize("alpha", [1.5, 1.7])
def test_nan_logits_give_nan_like_the_eager_engine(alpha, monkeypatch):
    z = torch.randn(3, 200)
    z[1, 7] = float("nan")
    y = torch.tensor([0, 1, 2])
    results = {}
    for engine in ("eager", "cpp"):
        set_engine(engine)
        x = z.clone().requires_grad_(True)
        rows = alpha_relu_loss(x, y, alpha, 0.2, reduction="none")
        (grad,) = torch.autograd.grad(rows.sum(), x)
        results[engine] = (rows.isnan(), grad.isnan())
    assert results["cpp"][0].tolist() == [False, True, False]
    assert torch.equal(results["cpp"][0], results["eager"][0])
    assert torch.equal(results["cpp"][1], results["eager"][1])


@pytest.mark.parametrize("dtype", list(DTYPES))
def test_support_is_every_entry_above_c_or_nan_in_order(dtype):
    """300 rows of 1003: several parts of rows (collected apart, then in order)."""
    z = torch.randn(300, 1003, generator=torch.Generator().manual_seed(1)).to(dtype)
    z[7, 1002] = z[250, 0] = float("nan")
    expected = (~(z <= 1.5)).view(-1).nonzero().squeeze(1)
    assert torch.equal(_cpp_kernels.support(z, 1.5, z.numel()), expected)
    assert torch.equal(_cpp_kernels.support(z, 1.5, len(expected)), expected)
    assert _cpp_kernels.support(z, 1.5, len(expected) - 1) is None
    assert _cpp_kernels.support(z, 100.0, 2).tolist() == [7 * 1003 + 1002, 250 * 1003]  # NaN


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="needs Linux /proc")
def test_runs_on_atens_threads_without_starting_its_own():
    torch.randn(512, 4096).sum(1)  # let ATen start its pool first
    before = len(os.listdir("/proc/self/task"))
    z = torch.randn(256, 4096)
    _cpp_kernels.loss_sums(z, 0.5, 2.0)
    _cpp_kernels.probs_into(z, torch.ones(256), 0.5, 2.0, 1.0, z)
    assert len(os.listdir("/proc/self/task")) == before


def test_a_failed_build_falls_back_to_eager_with_one_warning(monkeypatch):
    def no_compiler():
        raise RuntimeError("no C++ compiler")

    monkeypatch.setattr(_cpp_kernels, "_state", {"ops": None, "failed": False})
    monkeypatch.setattr(_cpp_kernels, "_build", no_compiler)
    set_engine("auto")
    z, y = torch.randn(4, 30, requires_grad=True), torch.randint(0, 30, (4,))
    with pytest.warns(RuntimeWarning, match="no C.. compiler"):
        assert kernels.engine_for(z) == "eager"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        loss = alpha_relu_loss(z, y, 1.5, 0.1)  # no second warning
    set_engine("eager")
    torch.testing.assert_close(loss, alpha_relu_loss(z, y, 1.5, 0.1))
