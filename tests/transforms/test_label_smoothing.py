"""Label smoothing of every loss against float64 definitions written out here: values,
gradcheck, gradient ``p - q``, ignore_index, reductions, the alpha-ReLU engines and
``reuse_logits``, and the loss being affine in eps."""

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from arelu_cli.transforms import (alpha_relu_loss, cross_entropy_loss, entmax15_loss,
                                  sparsemax_loss)
from arelu_cli.transforms import set_engine

TAU = 0.2
# name -> (loss function, family, alpha); the paper's five and two more alpha-ReLUs.
LOSSES = {
    "softmax": (cross_entropy_loss, "softmax", 1.0),
    "sparsemax": (sparsemax_loss, "entmax", 2.0),
    "1.5-entmax": (entmax15_loss, "entmax", 1.5),
    "1.5-entmax-k100": (lambda z, y, **kw: entmax15_loss(z, y, k=100, **kw), "entmax", 1.5),
    "1.5-relu": (lambda z, y, **kw: alpha_relu_loss(z, y, 1.5, TAU, **kw), "relu", 1.5),
    "1.3-relu": (lambda z, y, **kw: alpha_relu_loss(z, y, 1.3, TAU, **kw), "relu", 1.3),
    "2-relu": (lambda z, y, **kw: alpha_relu_loss(z, y, 2.0, TAU, **kw), "relu", 2.0),
}
RELUS = [name for name, (_, family, _) in LOSSES.items() if family == "relu"]
# Each alpha-ReLU loss under each engine it has on CPU in float64 (the compiled engine
# takes no float64: see test_float32_engines_agree_with_the_definition); the others once.
CASES = [(name, engine) for name in LOSSES for engine in
         (("eager", "cpp") if name in RELUS else ("any",))]
RELU_CASES = [(name, engine) for name, engine in CASES if name in RELUS]
IGNORE = -100


def entmax_by_bisection(z, alpha):
    """alpha-entmax: p = [(alpha-1) z - t]_+^(1/(alpha-1)) with t such that sum p = 1."""
    s = (alpha - 1) * z
    lo, hi = s.max(-1, keepdim=True).values - 1, s.max(-1, keepdim=True).values
    for _ in range(200):  # float64: the interval shrinks below one ulp
        mid = (lo + hi) / 2
        total = (s - mid).clamp_min(0).pow(1 / (alpha - 1)).sum(-1, keepdim=True)
        lo, hi = torch.where(total >= 1, mid, lo), torch.where(total >= 1, hi, mid)
    return (s - lo).clamp_min(0).pow(1 / (alpha - 1))


def tsallis(p, alpha):
    return (1 - (p ** alpha).sum(-1)) / (alpha * (alpha - 1))


def direct_probs(name, z):
    _, family, alpha = LOSSES[name]
    if family == "softmax":
        return torch.softmax(z, -1)
    if family == "entmax":
        return entmax_by_bisection(z, alpha)
    return ((alpha - 1) * z - TAU).clamp_min(0) ** (1 / (alpha - 1))


def smoothed_target(y, vocab, eps):
    """q = (1 - eps) e_y + eps / V (rows of ignored targets: anything, they are masked)."""
    return (1 - eps) * F.one_hot(y.clamp_min(0), vocab).double() + eps / vocab


def direct_rows(name, z, y, eps):
    """The smoothed loss per row, from the definitions, 0 where y is ignored."""
    _, family, alpha = LOSSES[name]
    q, p = smoothed_target(y, z.shape[-1], eps), direct_probs(name, z)
    if family == "softmax":
        rows = -(q * torch.log_softmax(z, -1)).sum(-1)
    elif family == "entmax":
        rows = (p * z).sum(-1) + tsallis(p, alpha) - (q * z).sum(-1)
    else:
        rows = ((p - q) * (z - TAU / (alpha - 1))).sum(-1) + tsallis(p, alpha)
    return rows.masked_fill(y == IGNORE, 0.0)


def reduced(rows, y, reduction):
    if reduction == "none":
        return rows
    return rows.sum() if reduction == "sum" else rows.sum() / (y != IGNORE).sum()


def inputs(rows, vocab, seed):
    gen = torch.Generator().manual_seed(seed)
    z = torch.randn(rows, vocab, generator=gen, dtype=torch.float64) * 2
    y = torch.randint(0, vocab, (rows,), generator=gen)
    y[1] = IGNORE
    return z, y


@pytest.fixture
def use_engine(monkeypatch):
    def use(engine):
        if engine != "any":
            set_engine(engine)
    return use


@pytest.mark.parametrize("name, engine", CASES)
@pytest.mark.parametrize("eps", [0.0, 0.1])
@pytest.mark.parametrize("reduction", ["none", "sum", "mean"])
def test_values_match_the_definitions(name, engine, eps, reduction, use_engine):
    use_engine(engine)
    z, y = inputs(6, 130, seed=1)  # V > 100: 1.5-entmax-k100 partial-sorts
    loss = LOSSES[name][0](z, y, reduction=reduction, label_smoothing=eps)
    expected = reduced(direct_rows(name, z, y, eps), y, reduction)
    torch.testing.assert_close(loss, expected, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("name, engine", CASES)
@pytest.mark.parametrize("eps", [0.0, 0.1])
@pytest.mark.parametrize("reduction", ["none", "sum", "mean"])
def test_gradcheck_float64(name, engine, eps, reduction, use_engine):
    use_engine(engine)
    z, y = inputs(4, 9, seed=3)
    z.requires_grad_(True)
    assert torch.autograd.gradcheck(
        lambda x: LOSSES[name][0](x, y, reduction=reduction, label_smoothing=eps), (z,),
        atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("name, engine", CASES)
@pytest.mark.parametrize("eps", [0.0, 0.1])
def test_gradient_is_p_minus_q_and_zero_on_ignored_rows(name, engine, eps, use_engine):
    use_engine(engine)
    z, y = inputs(5, 40, seed=5)
    z.requires_grad_(True)
    (grad,) = torch.autograd.grad(LOSSES[name][0](z, y, reduction="sum", label_smoothing=eps), z)
    expected = direct_probs(name, z.detach()) - smoothed_target(y, 40, eps)
    expected[y == IGNORE] = 0
    torch.testing.assert_close(grad, expected, rtol=1e-7, atol=1e-8)


@pytest.mark.parametrize("name, engine", RELU_CASES)
@pytest.mark.parametrize("reduction", ["none", "sum", "mean"])
def test_reuse_logits_writes_p_minus_q_into_the_logits(name, engine, reduction, use_engine):
    """``reuse_logits``: the same gradient, written into the logits' own memory."""
    use_engine(engine)
    h = torch.randn(6, 8, dtype=torch.float64, requires_grad=True)
    w = torch.randn(50, 8, dtype=torch.float64)
    y = torch.tensor([3, IGNORE, 0, 49, 7, 7])
    logits = h @ w.T
    loss = LOSSES[name][0](logits, y, reduction=reduction, reuse_logits=True, label_smoothing=0.1)
    weight = torch.rand(6, dtype=torch.float64) if reduction == "none" else torch.tensor(1.0)
    weight = weight.double()  # a float32 1/N in the expected value would miss by 1e-8
    (grad_h,) = torch.autograd.grad((loss * weight).sum(), h)
    z = (h @ w.T).detach()
    row_weight = weight.expand(6) / ((y != IGNORE).sum() if reduction == "mean" else 1)
    dz = (direct_probs(name, z) - smoothed_target(y, 50, 0.1)) * row_weight[:, None]
    dz[y == IGNORE] = 0
    torch.testing.assert_close(grad_h, dz @ w, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("name", RELUS)
def test_float32_engines_agree_with_the_definition(name, monkeypatch):
    z, y = inputs(16, 700, seed=7)
    expected_rows = direct_rows(name, z, y, 0.1)
    expected_grad = direct_probs(name, z) - smoothed_target(y, 700, 0.1)
    expected_grad[y == IGNORE] = 0
    for engine in ("eager", "cpp", "compiled"):
        set_engine(engine)
        x = z.float().requires_grad_(True)
        rows = LOSSES[name][0](x, y, reduction="none", label_smoothing=0.1)
        (grad,) = torch.autograd.grad(rows.sum(), x)
        torch.testing.assert_close(rows.double(), expected_rows, rtol=1e-5, atol=1e-4)
        torch.testing.assert_close(grad.double(), expected_grad, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name, engine", CASES)
def test_zero_is_exactly_the_unsmoothed_loss(name, engine, use_engine):
    use_engine(engine)
    z, y = inputs(5, 40, seed=9)
    results = []
    for kwargs in ({}, {"label_smoothing": 0.0}):
        x = z.clone().requires_grad_(True)
        rows = LOSSES[name][0](x, y, reduction="none", **kwargs)
        results.append((rows.detach(), torch.autograd.grad(rows.sum(), x)[0]))
    assert all(torch.equal(a, b) for a, b in zip(*results))


@settings(max_examples=30, deadline=None)
@given(name=st.sampled_from(list(LOSSES)), eps=st.floats(0.0, 0.99), rows=st.integers(1, 4),
       vocab=st.integers(1, 30), seed=st.integers(0, 2**16))
def test_smoothing_is_affine_in_eps(name, eps, rows, vocab, seed):
    """For every family: loss(eps) = loss(0) + eps (z_y - mean_j z_j), and the gradient moves
    by eps (e_y - 1/V): the smoothed target q is affine in eps and enters linearly."""
    gen = torch.Generator().manual_seed(seed)
    z = (torch.randn(rows, vocab, generator=gen, dtype=torch.float64) * 3).requires_grad_(True)
    y = torch.randint(0, vocab, (rows,), generator=gen)
    fn = LOSSES[name][0]
    smoothed, plain = (fn(z, y, reduction="none", label_smoothing=e) for e in (eps, 0.0))
    shift = eps * (z.detach().gather(1, y[:, None]).squeeze(1) - z.detach().mean(1))
    torch.testing.assert_close(smoothed.detach(), plain.detach() + shift, rtol=1e-9, atol=1e-9)
    g_smoothed, g_plain = (torch.autograd.grad(v.sum(), z)[0] for v in (smoothed, plain))
    move = eps * (F.one_hot(y, vocab).double() - 1.0 / vocab)
    torch.testing.assert_close(g_smoothed, g_plain + move, rtol=1e-9, atol=1e-9)


def test_inside_a_users_torch_compile():
    layer = torch.nn.Linear(8, 30)
    x, y = torch.randn(5, 8), torch.tensor([1, IGNORE, 29, 0, 4])

    def step(x):
        return alpha_relu_loss(layer(x), y, 1.5, 0.1, label_smoothing=0.1)

    eager = step(x)
    (g_eager,) = torch.autograd.grad(eager, layer.weight)
    compiled = torch.compile(step)(x)
    (g_compiled,) = torch.autograd.grad(compiled, layer.weight)
    torch.testing.assert_close(compiled, eager)
    torch.testing.assert_close(g_compiled, g_eager)


@pytest.mark.parametrize("name", list(LOSSES))
@pytest.mark.parametrize("eps", [-0.1, 1.0, 1.5, float("nan"), "x"])
def test_eps_outside_zero_one_is_rejected(name, eps):
    with pytest.raises(ValueError, match=r"label_smoothing must"):
        LOSSES[name][0](torch.randn(2, 3), torch.tensor([0, 1]), label_smoothing=eps)
