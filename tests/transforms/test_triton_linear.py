"""The fused linear + alpha-ReLU loss on the ``triton`` engine under ``TRITON_INTERPRET=1``
(CPU tensors, no GPU): tiles of 128 tokens x 128 vocabulary columns and chunks of 128 tokens
over the whole vocabulary, both gradient paths (the default dense matmuls,
``skip_zeros=True``'s tile-skipping Triton GEMMs) against the unfused loss in float64; tied
and untied weights, bias, ignored rows, label smoothing, a soft-cap, bf16, torch.compile."""

import pytest
import torch
import torch.nn.functional as F

from arelu_cli.transforms import alpha_relu_loss, fused_linear, linear_alpha_relu_loss
from arelu_cli.transforms import engine as use_engine

pytest.importorskip("triton")


def problem(n=140, d=24, vocab=150, dtype=torch.float32, seed=0):
    gen = torch.Generator().manual_seed(seed)
    hidden = torch.randn(n, d, generator=gen).to(dtype)
    weight = (torch.randn(vocab, d, generator=gen) / d ** 0.5).to(dtype)
    bias = (torch.randn(vocab, generator=gen) * 0.1).to(dtype)
    target = torch.randint(0, vocab, (n,), generator=gen)
    target[[1, n * 2 // 3]] = -100
    return hidden, weight, bias, target


def run(hidden, weight, bias, target, tau, reduction, tied, fused, eps=0.0, softcap=None,
        **kwargs):
    """Loss and gradients (hidden, weight[, bias]); ``tied``: the weight is also the input
    embedding, ``hidden`` then scales rows of it (gradients reach it both ways); ``softcap``:
    of the logits ``c tanh(z / c)``."""
    leaves = [t.clone().requires_grad_(True) for t in (hidden, weight)]
    leaves += [bias.clone().requires_grad_(True)] if bias is not None else []
    h, w = leaves[0], leaves[1]
    b = leaves[2] if bias is not None else None
    if tied:
        h = h + 0.5 * w[torch.arange(h.shape[0]) % w.shape[0]]
    if fused:
        loss = linear_alpha_relu_loss(h, w, target, 1.5, tau, bias=b, reduction=reduction,
                                      label_smoothing=eps, softcap=softcap, **kwargs)
    else:
        logits = F.linear(h, w, b)
        if softcap is not None:
            logits = softcap * torch.tanh(logits / softcap)
        loss = alpha_relu_loss(logits, target, 1.5, tau, reduction=reduction,
                               label_smoothing=eps)
    upstream = torch.rand(loss.shape, generator=torch.Generator().manual_seed(3)) + 0.5
    return loss, torch.autograd.grad(loss, leaves, upstream.to(loss.dtype))


def reference(hidden, weight, bias, target, tau, reduction, tied, monkeypatch, eps=0.0,
              softcap=None):
    """The unfused loss in float64 (the eager engine, itself checked against the paper)."""
    with use_engine("eager"):
        return run(hidden.double(), weight.double(), None if bias is None else bias.double(),
                   target, tau, reduction, tied, fused=False, eps=eps, softcap=softcap)


def assert_close(got, expected, tol):
    torch.testing.assert_close(got[0].double(), expected[0], rtol=tol, atol=tol)
    for a, b in zip(got[1], expected[1]):
        torch.testing.assert_close(a.double(), b, rtol=tol, atol=tol * b.abs().max())


@pytest.fixture
def gemms(monkeypatch):
    """Counts the launches of the tile-skipping Triton GEMMs (``hidden``, ``weight``)."""
    from arelu_cli.transforms import _triton_linear

    calls = {"hidden": 0, "weight": 0}
    for key, name in (("hidden", "grad_hidden_into"), ("weight", "grad_weight_add")):
        real = getattr(_triton_linear, name)

        def counted(*args, _real=real, _key=key, **kwargs):
            calls[_key] += 1
            return _real(*args, **kwargs)
        monkeypatch.setattr(_triton_linear, name, counted)
    return calls


# bias, tied, reduction, label smoothing, loop options and the tiles they make of 140 x 150.
CASES = [(True, False, "sum", 0.0, dict(vocab_chunk=128), 4),
         (False, True, "mean", 0.1, dict(loop="tokens"), 2),
         (True, True, "none", 0.1, dict(vocab_chunk=128), 4)]


@pytest.mark.parametrize("skip", [None, True])
@pytest.mark.parametrize("bias, tied, reduction, eps, options, tiles", CASES)
def test_matches_the_unfused_loss_in_float64(interpreted, monkeypatch, gemms, bias, tied,
                                             reduction, eps, options, tiles, skip):
    """140 tokens in tiles of 128 and 12, V = 150 in blocks of 128 and 22 (``vocab``) or
    whole (``tokens``): whole and partial tiles of each kind, at a fraction of the
    interpreter's time of larger shapes. The default (None) runs the gradient products as
    matmuls, never the Triton GEMMs; True runs the Triton GEMMs on each tile (``none``:
    forward has no gradient work there, backward recomputes)."""
    hidden, weight, b, target = problem()
    b = b if bias else None
    got = run(hidden, weight, b, target, 0.3, reduction, tied, fused=True, eps=eps,
              chunk=128, skip_zeros=skip, **options)
    assert_close(got, reference(hidden, weight, b, target, 0.3, reduction, tied, monkeypatch,
                                eps), 1e-5)
    expected = {"hidden": tiles, "weight": tiles} if skip else {"hidden": 0, "weight": 0}
    assert gemms == expected


@pytest.mark.parametrize("skip", [None, True])
@pytest.mark.parametrize("bias, tied, reduction, eps, options, tiles", CASES)
def test_a_soft_cap_matches_the_unfused_capped_loss(interpreted, monkeypatch, gemms, bias, tied,
                                                    reduction, eps, options, tiles, skip):
    """The same tiles with logits ``2 tanh(z / 2)``: the kernel caps what it reads and
    multiplies ``G`` by the cap's derivative; the tile marks still skip only zeros."""
    hidden, weight, b, target = problem()
    b = b if bias else None
    got = run(hidden, weight, b, target, 0.3, reduction, tied, fused=True, eps=eps,
              softcap=2.0, chunk=128, skip_zeros=skip, **options)
    expected = reference(hidden, weight, b, target, 0.3, reduction, tied, monkeypatch, eps,
                         softcap=2.0)
    assert_close(got, expected, 1e-5)
    uncapped = reference(hidden, weight, b, target, 0.3, reduction, tied, monkeypatch, eps)
    assert not torch.allclose(uncapped[0], expected[0], rtol=1e-3, atol=1e-3)
    assert gemms == ({"hidden": tiles, "weight": tiles} if skip else {"hidden": 0, "weight": 0})


def test_skipping_tiles_changes_nothing_and_dead_tiles_stay_zero(interpreted, gemms):
    """A high threshold leaves most 128 x 128 tiles of the gradient exactly zero: skipping
    them (``skip_zeros=True``) gives the dense result (the default, and ``False``) up to
    summation order, and weight rows no token reaches get exactly 0."""
    hidden, weight, b, target = problem()
    target[target >= 128] = 5  # no target in the last vocabulary tile
    weight[128:] *= 0.01       # and logits far below the threshold there
    tiles = run(hidden, weight, b, target, 1.0, "sum", False, fused=True, chunk=128,
                vocab_chunk=128, skip_zeros=True)
    assert gemms == {"hidden": 4, "weight": 4}
    for skip in (None, False):
        dense = run(hidden, weight, b, target, 1.0, "sum", False, fused=True, chunk=128,
                    vocab_chunk=128, skip_zeros=skip)
        assert torch.equal(tiles[0], dense[0])  # the same loss pass
        for a, c in zip(tiles[1], dense[1]):
            torch.testing.assert_close(a, c, rtol=1e-6, atol=1e-6)
    assert gemms == {"hidden": 4, "weight": 4}  # the dense runs used none
    assert torch.all(tiles[1][1][128:] == 0) and torch.all(tiles[1][2][128:] == 0)


@pytest.mark.parametrize("skip", [None, True])
def test_bfloat16_matches_float64(interpreted, monkeypatch, skip):
    hidden, weight, b, target = problem(dtype=torch.bfloat16)
    got = run(hidden, weight, b, target, 0.3, "mean", False, fused=True, skip_zeros=skip)
    expected = reference(hidden, weight, b, target, 0.3, "mean", False, monkeypatch)
    assert got[0].dtype == torch.float32 and got[1][1].dtype == torch.bfloat16
    assert_close(got, expected, 3e-2)


def test_a_mean_over_no_counted_row_is_zero_with_zero_gradients(interpreted):
    hidden, weight, b, target = problem(n=20, vocab=70)
    target[:] = -100
    loss, grads = run(hidden, weight, b, target, 0.3, "mean", False, fused=True, eps=0.1)
    assert float(loss.detach()) == 0.0 and all(bool((g == 0).all()) for g in grads)


def test_under_torch_compile_it_runs_eagerly(interpreted, monkeypatch):
    hidden, weight, b, target = problem(n=40, vocab=70)
    eager = run(hidden, weight, b, target, 0.3, "sum", False, fused=True)

    @torch.compile(backend="eager")
    def compiled(h, w, bb):
        return linear_alpha_relu_loss(h * 1.0, w, target, 1.5, 0.3, bias=bb, reduction="sum")
    leaves = [t.clone().requires_grad_(True) for t in (hidden, weight, b)]
    loss = compiled(*leaves)
    upstream = torch.rand((), generator=torch.Generator().manual_seed(3)) + 0.5
    grads = torch.autograd.grad(loss, leaves, upstream)
    torch.testing.assert_close(loss, eager[0])
    for a, c in zip(grads, eager[1]):
        torch.testing.assert_close(a, c)
    assert fused_linear.kernels.engine_for(hidden) == "triton"


def test_without_gradients_the_loop_does_no_gradient_work(interpreted, monkeypatch, gemms):
    """Validation (``torch.no_grad``): one chunk loop of logits and losses, no gradient
    product on either path, no gradient written into the logits' buffer."""
    from arelu_cli.transforms import _triton_linear

    products, passes = [], []
    monkeypatch.setattr(_triton_linear, "add_tile_grads", lambda *a, **k: products.append(1))
    real_pass = _triton_linear._triton_kernels.loss_pass

    def spy(*args, grad=None, **kwargs):
        passes.append(grad)
        return real_pass(*args, grad=grad, **kwargs)
    monkeypatch.setattr(_triton_linear._triton_kernels, "loss_pass", spy)
    hidden, weight, b, target = problem()
    h, w = hidden.requires_grad_(True), weight.requires_grad_(True)
    with use_engine("eager"):
        expected = alpha_relu_loss(F.linear(hidden.double(), weight.double(), b.double()),
                                   target, 1.5, 0.3)
    for skip in (None, True):
        with torch.no_grad():
            loss = linear_alpha_relu_loss(h, w, target, 1.5, 0.3, bias=b, chunk=128,
                                          skip_zeros=skip)
        torch.testing.assert_close(loss.double(), expected, rtol=1e-5, atol=1e-5)
    assert passes == [None] * 4 and products == []
    assert gemms == {"hidden": 0, "weight": 0}
