"""The fused linear + alpha-ReLU loss: the unfused loss and gradients in float64 over a table
of shapes and both loops, zero skipping that never changes results, the tile rule, low
precision, autocast, memory and bad arguments."""

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from arelu_cli.transforms import (LinearAlphaReLULoss, alpha_relu_loss,
                                  linear_alpha_relu_loss, set_engine)
from arelu_cli.transforms import _torch_linear, fused_linear
from arelu_cli.transforms.fused_linear import tile_shape


def problem(seed, tokens=(3, 7), d=16, vocab=50, bias=True, dtype=torch.float64, ignored=(1,)):
    gen = torch.Generator().manual_seed(seed)
    hidden = torch.randn(*tokens, d, generator=gen, dtype=dtype).requires_grad_(True)
    weight = (torch.randn(vocab, d, generator=gen, dtype=dtype) / d ** 0.5).requires_grad_(True)
    b = (torch.randn(vocab, generator=gen, dtype=dtype) * 0.1).requires_grad_(True) if bias else None
    target = torch.randint(0, vocab, tokens, generator=gen)
    target.view(-1)[list(ignored)] = -100
    return hidden, weight, b, target


def loss_and_grads(loss_fn, hidden, weight, bias, upstream_seed=0):
    loss = loss_fn()
    inputs = [x for x in (hidden, weight, bias) if x is not None]
    upstream = torch.randn(loss.shape, generator=torch.Generator().manual_seed(upstream_seed),
                           dtype=torch.float64).to(loss.dtype)
    return loss, torch.autograd.grad(loss, inputs, upstream)


def assert_same(got, expected, tol=1e-12):
    torch.testing.assert_close(got[0], expected[0], rtol=tol, atol=tol)
    for a, b in zip(got[1], expected[1]):
        torch.testing.assert_close(a, b, rtol=tol, atol=tol)


def fused_and_unfused(hidden, weight, b, target, reduction, alpha=1.5, tau=0.3, eps=0.0,
                      **kwargs):
    fused = loss_and_grads(lambda: linear_alpha_relu_loss(
        hidden, weight, target, alpha, tau, bias=b, reduction=reduction, label_smoothing=eps,
        **kwargs), hidden, weight, b)
    # mean: the sum over max(count, 1), the convention for a batch with no counted row
    counted = max(int((target != -100).sum()), 1) if reduction == "mean" else 1
    unfused = loss_and_grads(lambda: alpha_relu_loss(
        F.linear(hidden, weight, b), target, alpha, tau,
        reduction="sum" if reduction == "mean" else reduction,
        label_smoothing=eps) / counted, hidden, weight, b)
    return fused, unfused


# name -> (problem arguments, loss arguments): V = 50 columns, blocks of 16 unless said.
SHAPES = {
    "V not a multiple of the block": (dict(), dict(vocab_chunk=16)),
    "block wider than V": (dict(), dict(vocab_chunk=64)),
    "2-D tiles": (dict(), dict(vocab_chunk=16, chunk=4)),
    "the default rule": (dict(), dict()),
    "one token": (dict(tokens=(1,), ignored=()), dict(vocab_chunk=16)),
    "all tokens ignored": (dict(ignored=range(21)), dict(vocab_chunk=16)),
    "none ignored": (dict(ignored=()), dict(vocab_chunk=16)),
    "half ignored": (dict(ignored=range(0, 21, 2)), dict(vocab_chunk=16, chunk=5)),
    "label smoothing": (dict(), dict(vocab_chunk=16, eps=0.1)),
    "smoothing, 2-D, ignored": (dict(ignored=(0, 4, 20)), dict(vocab_chunk=7, chunk=3, eps=0.3)),
    "no bias": (dict(bias=False), dict(vocab_chunk=16)),
    "no bias, smoothing": (dict(bias=False), dict(vocab_chunk=16, eps=0.1)),
    "dense products": (dict(), dict(vocab_chunk=16, skip_zeros=False)),
    "alpha 2, wide support": (dict(), dict(vocab_chunk=16, alpha=2.0, tau=-0.5)),
    "alpha 1.3, general power": (dict(), dict(vocab_chunk=16, alpha=1.3, tau=0.1, eps=0.2)),
    "token loop": (dict(), dict(loop="tokens", chunk=4)),
    "token loop, smoothing": (dict(bias=False), dict(loop="tokens", chunk=8, eps=0.1)),
}


@pytest.mark.parametrize("sparse_share, engine", [(_torch_linear.SPARSE_SHARE, "auto"),
                                                   (1.0, "auto"), (1.0, "eager")])
@pytest.mark.parametrize("reduction", ["none", "sum", "mean"])
@pytest.mark.parametrize("shape", list(SHAPES))
def test_equals_the_unfused_loss_in_float64(shape, reduction, sparse_share, engine,
                                            monkeypatch):
    """Every case on both gradient paths of the CPU loop: ``SPARSE_SHARE = 1`` runs every
    tile's products on its nonzeros (sparse; the support found by the default engine's C++
    pass, or by tensor ops on the eager one), the default almost none at tau 0.3."""
    monkeypatch.setattr(_torch_linear, "SPARSE_SHARE", sparse_share)
    set_engine(engine)
    made, kwargs = SHAPES[shape]
    hidden, weight, b, target = problem(3, **made)
    fused, unfused = fused_and_unfused(hidden, weight, b, target, reduction, **kwargs)
    assert_same(fused, unfused)


def test_a_mean_over_no_counted_row_is_zero_with_zero_gradients():
    hidden, weight, b, target = problem(4, ignored=range(21))
    for kwargs in (dict(), dict(loop="tokens"), dict(label_smoothing=0.2)):
        loss, grads = loss_and_grads(lambda: linear_alpha_relu_loss(
            hidden, weight, target, 1.5, 0.3, bias=b, **kwargs), hidden, weight, b)
        assert float(loss.detach()) == 0.0
        assert all(bool((g == 0).all()) for g in grads)


@settings(max_examples=30, deadline=None)
@given(alpha=st.floats(1.05, 2.0), tau=st.floats(-0.5, 1.0), eps=st.sampled_from([0.0, 0.1]),
       reduction=st.sampled_from(["none", "sum", "mean"]), bias=st.booleans(),
       loop=st.sampled_from(["vocab", "tokens"]), chunk=st.sampled_from([3, 8, None]),
       cols=st.sampled_from([4, 17, 50, None]), skip=st.booleans(), seed=st.integers(0, 2**16))
def test_any_tiling_equals_the_unfused_loss(alpha, tau, eps, reduction, bias, loop, chunk,
                                            cols, skip, seed):
    hidden, weight, b, target = problem(seed, bias=bias)
    fused, unfused = fused_and_unfused(
        hidden, weight, b, target, reduction, alpha, tau, eps, chunk=chunk, skip_zeros=skip,
        loop=loop, vocab_chunk=cols if loop == "vocab" else None)
    assert_same(fused, unfused, tol=1e-10)


@pytest.mark.parametrize("softcap", [None, 0.8])
def test_gradcheck_float64(softcap):
    """Reduction ``none`` (gradcheck runs backward many times through one call, which
    ``sum``/``mean`` forbid; they are checked against the unfused loss above), uncapped and
    soft-capped."""
    hidden, weight, b, target = problem(5, tokens=(4,), d=5, vocab=9)
    assert torch.autograd.gradcheck(
        lambda h, w, bb: linear_alpha_relu_loss(h, w, target, 1.4, 0.05, bias=bb,
                                                reduction="none", chunk=3, vocab_chunk=4,
                                                label_smoothing=0.1, softcap=softcap),
        (hidden, weight, b))


@pytest.fixture
def sparse_tiles(monkeypatch):
    """Counts the tiles whose products ran sparse (``True``) or dense (``False``)."""
    seen = []
    real = _torch_linear._sparse_gradient

    def spy(*args):
        entries = real(*args)
        seen.append(entries is not None)
        return entries
    monkeypatch.setattr(_torch_linear, "_sparse_gradient", spy)
    return seen


@pytest.mark.parametrize("tau, first_sparse", [(0.3, False), (2.0, True)])
def test_skipping_zeros_never_changes_the_result(tau, first_sparse, sparse_tiles):
    """The last 200 of 300 columns have logits far below the threshold: their tiles run
    sparse (the default), the first one too where its support is small enough (tau 2, not
    0.3); skip_zeros=False runs every tile dense."""
    hidden, weight, b, target = problem(11, tokens=(40,), d=8, vocab=300, ignored=(3,))
    with torch.no_grad():
        weight[100:] *= 0.01
    runs = [loss_and_grads(lambda: linear_alpha_relu_loss(
        hidden, weight, target, 1.5, tau, bias=b, reduction="sum", vocab_chunk=100,
        skip_zeros=skip), hidden, weight, b) for skip in (None, False)]
    assert_same(runs[0], runs[1], tol=1e-12)
    assert sparse_tiles == [first_sparse, True, True]  # none with skip_zeros=False


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("loop", ["vocab", "tokens"])
def test_low_precision_is_finite_and_close_to_float32(dtype, loop):
    hidden, weight, b, target = problem(2, tokens=(64,), d=32, vocab=500, dtype=torch.float32)
    ref = loss_and_grads(lambda: linear_alpha_relu_loss(hidden, weight, target, 1.5, 0.3, bias=b,
                                                        label_smoothing=0.1),
                         hidden, weight, b)
    low = [x.detach().to(dtype).requires_grad_(True) for x in (hidden, weight, b)]
    loss, grads = loss_and_grads(lambda: linear_alpha_relu_loss(
        low[0], low[1], target, 1.5, 0.3, bias=low[2], chunk=10, label_smoothing=0.1,
        loop=loop, vocab_chunk=128 if loop == "vocab" else None), *low)
    assert loss.dtype == torch.float32 and all(g.dtype == dtype for g in grads)
    assert torch.isfinite(loss) and all(torch.isfinite(g).all() for g in grads)
    torch.testing.assert_close(loss.float(), ref[0], rtol=3e-2, atol=3e-2)
    for g, r in zip(grads, ref[1]):
        torch.testing.assert_close(g.float(), r, rtol=5e-2, atol=2e-2)


def test_autocast_casts_like_linear():
    hidden, weight, b, target = problem(4, tokens=(12,), d=16, vocab=80, dtype=torch.float32)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        fused = loss_and_grads(lambda: linear_alpha_relu_loss(hidden, weight, target, bias=b),
                               hidden, weight, b)
        logits = F.linear(hidden, weight, b)
    unfused = loss_and_grads(lambda: alpha_relu_loss(logits.float(), target), hidden, weight, b)
    assert fused[0].dtype == torch.float32 and all(g.dtype == torch.float32 for g in fused[1])
    torch.testing.assert_close(fused[0], unfused[0], rtol=1e-2, atol=1e-2)
    for a, c in zip(fused[1], unfused[1]):
        torch.testing.assert_close(a, c, rtol=2e-2, atol=1e-2)


def test_no_gradients_are_computed_without_grad(monkeypatch):
    hidden, weight, b, target = problem(6)
    calls = []
    real = _torch_linear._loop

    def spy(hidden, weight, bias, target, scale, *args):
        calls.append(scale)
        return real(hidden, weight, bias, target, scale, *args)

    monkeypatch.setattr(_torch_linear, "_loop", spy)
    with torch.no_grad():
        loss = linear_alpha_relu_loss(hidden, weight, target, bias=b)
    assert calls == [None]
    torch.testing.assert_close(loss, alpha_relu_loss(F.linear(hidden, weight, b), target).detach())


def test_a_target_outside_the_vocabulary_gives_a_nan_loss():
    hidden, weight, b, target = problem(12)
    target[0, 0], target[2, 3] = 50, -3
    rows = linear_alpha_relu_loss(hidden, weight, target, bias=b, reduction="none",
                                  vocab_chunk=16)
    outside = torch.zeros(3, 7, dtype=torch.bool)
    outside[0, 0] = outside[2, 3] = True
    assert rows[outside].isnan().all() and torch.isfinite(rows[~outside]).all()


def test_second_backward_is_an_error():
    hidden, weight, b, target = problem(7)
    loss = linear_alpha_relu_loss(hidden, weight, target, bias=b)
    loss.backward(retain_graph=True)
    with pytest.raises(RuntimeError, match="backward ran twice"):
        loss.backward()


@pytest.mark.parametrize("n, width, vocab, device, triton, loop, chunk, cols, expected", [
    (8192, 512, 40000, "cpu", False, "vocab", None, None, (4096, 1024)),
    (4096, 512, 40000, "cpu", False, "vocab", None, None, (4096, 1024)),
    (2048, 512, 131072, "cpu", False, "vocab", None, None, (2048, 2048)),
    (100, 512, 40000, "cpu", False, "vocab", None, None, (100, 40000)),
    (65536, 512, 40000, "cpu", False, "vocab", None, None, (4096, 1024)),
    (8192, 512, 40000, "cpu", False, "vocab", None, 512, (8192, 512)),
    (16384, 4096, 131072, "cuda", True, "vocab", None, None, (16384, 4096)),
    (65536, 4096, 262144, "cuda", True, "vocab", None, None, (16384, 4096)),
    (1000, 64, 300, "cuda", True, "vocab", None, None, (1024, 300)),
    (1000, 64, 50000, "cuda", True, "vocab", 4, 100, (128, 128)),
    (8192, 512, 40000, "cpu", False, "vocab", 1000, None, (1000, 4194)),
    (8192, 512, 40000, "cpu", False, "tokens", None, None, (256, 40000)),
    (1000, 64, 50000, "cuda", True, "tokens", 4, None, (128, 50000)),
    (1000, 64, 40000, "cuda", True, "tokens", None, None, (1664, 40000)),
    (65536, 4096, 262144, "cuda", True, "tokens", None, None, (1024, 262144)),
    (10, 8, 1 << 30, "cuda", True, "tokens", None, None, (128, 1 << 30)),
])
def test_the_tile_rule(n, width, vocab, device, triton, loop, chunk, cols, expected):
    assert tile_shape(n, width, vocab, device, triton, loop, chunk, cols) == expected


_PEAK_SCRIPT = """
import torch, torch.nn.functional as F
from arelu_cli.bench.timing import peak_extra_bytes
from arelu_cli.transforms import alpha_relu_loss, linear_alpha_relu_loss
gen = torch.Generator().manual_seed(8)
hidden = torch.randn(512, 32, generator=gen)
weight = (torch.randn(20000, 32, generator=gen) / 32 ** 0.5).requires_grad_(True)
target = torch.randint(0, 20000, (512,), generator=gen)
def fused(h):
    torch.autograd.grad(linear_alpha_relu_loss(h, weight, target, 1.5, 0.5, vocab_chunk=1024),
                        (h, weight))
def unfused(h):
    loss = alpha_relu_loss(F.linear(h, weight), target, 1.5, 0.5, reuse_logits=True)
    torch.autograd.grad(loss, (h, weight))
for fn in (fused, unfused):
    fn(hidden.clone().requires_grad_())
    print(peak_extra_bytes(fn, hidden.clone().requires_grad_, torch.device("cpu")))
"""


def test_memory_is_a_fraction_of_the_unfused_loss():
    """The logits (512 x 20000 fp32, 39 MiB) are never held; only a tile of them.

    A fresh process: in a long test session the heap already holds freed memory that an
    allocation can reuse without raising the resident set. The fused loss is measured first,
    on that fresh heap; the unfused one after it can reuse at most what the fused one freed,
    which only lowers the unfused peak and makes the comparison stricter.
    """
    import subprocess
    import sys

    run = subprocess.run([sys.executable, "-c", _PEAK_SCRIPT], capture_output=True, text=True,
                         check=True)
    values = run.stdout.strip().splitlines()[-2:]
    if "None" in values:
        pytest.skip("peak memory is not measurable here")
    peaks = [float(v) for v in values]
    assert peaks[0] < peaks[1] / 3, peaks


def test_under_torch_compile_it_runs_eagerly_behind_a_graph_break(recwarn):
    """A compiled caller (Dynamo's ``eager`` backend: no code generation) gets the eager
    loss and gradients, without a warning; the eager-only wrapper is made at the first
    compiled call (:func:`~arelu_cli.transforms.fused_linear.eager_loss`)."""
    hidden, weight, bias, target = problem(3)

    def caller(h, w, b):
        return linear_alpha_relu_loss(h * 2, w, target, 1.5, 0.1, bias=b, reduction="sum") + 1

    expected = loss_and_grads(lambda: caller(hidden, weight, bias), hidden, weight, bias)
    compiled = torch.compile(caller, backend="eager")
    got = loss_and_grads(lambda: compiled(hidden, weight, bias), hidden, weight, bias)
    assert_same(got, expected)
    assert fused_linear._EAGER and fused_linear.eager_loss() is fused_linear._EAGER[0]
    assert [str(w.message) for w in recwarn] == []


def test_module_matches_function():
    hidden, weight, b, target = problem(9)
    module = LinearAlphaReLULoss(alpha=1.3, tau=0.2, reduction="sum", chunk=5,
                                 label_smoothing=0.1, loop="tokens")
    torch.testing.assert_close(module(hidden, weight, target, b),
                               linear_alpha_relu_loss(hidden, weight, target, 1.3, 0.2, b,
                                                      reduction="sum", label_smoothing=0.1))


@pytest.mark.parametrize("change, match", [
    (dict(weight=torch.zeros(50, 15)), "weight must have shape"),
    (dict(weight=torch.zeros(0, 16)), "weight must have shape"),
    (dict(bias=torch.zeros(49)), "bias must have shape"),
    (dict(target=torch.zeros(3, 6, dtype=torch.long)), "target shape"),
    (dict(target=torch.zeros(3, 7)), "integer class indices"),
    (dict(weight=torch.zeros(50, 16, dtype=torch.float32)), "share a dtype"),
    (dict(chunk=0), "chunk must be"),
    (dict(vocab_chunk=0), "vocab_chunk must be"),
    (dict(loop="rows"), "loop must be one of vocab, tokens"),
    (dict(loop="tokens", vocab_chunk=8), "vocab_chunk sets the vocabulary blocks"),
    (dict(label_smoothing=1.0), "label_smoothing must lie in"),
    (dict(alpha=1.0), r"alpha 1.0 is outside \[1.05, 2\]"),
    (dict(reduction="avg"), "reduction must be"),
])
def test_bad_arguments_say_what_is_wrong(change, match):
    hidden, weight, b, target = problem(10)
    args = dict(hidden=hidden, weight=weight, target=target, bias=b) | change
    with pytest.raises(ValueError, match=match):
        linear_alpha_relu_loss(**args)


def test_skip_zeros_is_none_or_a_bool():
    hidden, weight, b, target = problem(10)
    with pytest.raises(TypeError, match="skip_zeros must be None"):
        linear_alpha_relu_loss(hidden, weight, target, bias=b, skip_zeros=1)
