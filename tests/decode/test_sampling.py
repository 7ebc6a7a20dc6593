"""Next-token selection: the distribution sampled from, draws that never hit a zero, seeds,
truncations by hand, alpha-ReLU by hand, entmax against the entmax package, the temperature
rule (p ^ (1 / T) on the support: sharper as T falls for every transform, greedy at T -> 0),
log p for samplers that apply the temperature themselves, bad input."""

import math

import entmax
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import chisquare

from arelu_cli.decode.sampling import (Decoding, empty_support, log_probs, next_tokens,
                                       race, sampling_probs)
from arelu_cli.registry import get_transform

DRAWS = 10_000

# (transform name, tau, decoding): every transform family and every sampling option.
CASES = [
    ("softmax", 0.0, Decoding()),
    ("softmax", 0.0, Decoding(temperature=0.5)),
    ("softmax", 0.0, Decoding(top_k=3)),
    ("softmax", 0.0, Decoding(top_p=0.7)),
    ("softmax", 0.0, Decoding(top_k=4, top_p=0.8, temperature=1.5)),
    ("sparsemax", 0.0, Decoding()),
    ("1.5-entmax", 0.0, Decoding()),
    ("1.3-entmax", 0.0, Decoding(temperature=0.7)),
    ("1.5-relu", 0.5, Decoding()),
    ("1.5-relu", 0.5, Decoding(tau_shift=0.3)),
    ("1.5-relu", 0.5, Decoding(temperature=2.0)),
    ("1.5-relu", 0.5, Decoding(temperature=0.4)),
    ("1.5-relu", 0.2, Decoding(top_k=2)),
    ("1.5-relu", 0.2, Decoding(top_p=0.8, temperature=1.5)),
    ("1.5-entmax", 0.0, Decoding(top_k=2, temperature=0.5)),
    ("sparsemax", 0.0, Decoding(top_p=0.6)),
    ("2-relu", 0.2, Decoding()),
    ("1.25-relu", 0.1, Decoding()),
    ("softmax", 0.0, Decoding("greedy")),
    ("1.5-relu", 0.5, Decoding("greedy")),
]


def _rows() -> torch.Tensor:
    """Three rows of 12 logits with a few clear winners and a long tail: every sparse
    transform leaves zeros, and the softmax truncations drop the tail."""
    gen = torch.Generator().manual_seed(3)
    tail = torch.randn(3, 12, generator=gen) - 1.0
    tail[0, :3] = torch.tensor([4.0, 3.5, 3.0])
    tail[1, 5:7] = torch.tensor([2.0, 2.0])
    tail[2, 11] = 5.0
    return tail


def _ids(case):
    return f"{case[0]}-{case[2].label()}"


@pytest.mark.parametrize("case", CASES, ids=_ids)
def test_draws_never_hit_a_zero_and_follow_sampling_probs(case):
    name, tau, decoding = case
    transform = get_transform(name, tau=tau)
    rows = _rows()
    probs = sampling_probs(rows, transform, decoding)
    assert torch.allclose(probs.sum(-1), torch.ones(3), atol=1e-6) and (probs >= 0).all()
    logits = rows.repeat_interleave(DRAWS, dim=0)  # DRAWS independent draws of each row
    tokens = next_tokens(logits, transform, decoding, torch.Generator().manual_seed(0))
    for r in range(3):
        drawn = tokens[r * DRAWS:(r + 1) * DRAWS]
        assert (probs[r, drawn] > 0).all(), f"row {r} drew a token of probability 0"
        support = (probs[r] > 0).nonzero().squeeze(1)
        if len(support) > 1:
            seen = torch.bincount(drawn, minlength=12)[support].double()
            expected = probs[r, support].double() * DRAWS
            assert chisquare(seen, expected * seen.sum() / expected.sum()).pvalue > 1e-4


def test_sparse_cases_do_have_zeros():
    """The draws above test something: each sparse case's rows hold zeros."""
    for name, tau, decoding in CASES:
        if name != "softmax" or decoding.top_k or decoding.top_p or decoding.method == "greedy":
            probs = sampling_probs(_rows(), get_transform(name, tau=tau), decoding)
            assert (probs == 0).any(-1).all(), (name, decoding)


def test_softmax_never_draws_a_minus_inf_logit():
    logits = torch.tensor([[0.0, -math.inf, 1.0, -math.inf]]).repeat(DRAWS, 1)
    tokens = next_tokens(logits, get_transform("softmax"), Decoding(),
                         torch.Generator().manual_seed(1))
    assert set(tokens.tolist()) == {0, 2}


@pytest.mark.parametrize("case", CASES, ids=_ids)
def test_seeded_draws_are_reproducible(case):
    name, tau, decoding = case
    transform, logits = get_transform(name, tau=tau), _rows().repeat(200, 1)
    first = next_tokens(logits, transform, decoding, torch.Generator().manual_seed(7))
    again = next_tokens(logits, transform, decoding, torch.Generator().manual_seed(7))
    other = next_tokens(logits, transform, decoding, torch.Generator().manual_seed(8))
    assert torch.equal(first, again)
    assert torch.equal(first, other) == (decoding.method == "greedy")


# probabilities 0.5, 0.3, 0.15, 0.05
HAND = torch.log(torch.tensor([[0.5, 0.3, 0.15, 0.05]]))


@pytest.mark.parametrize("decoding, kept", [
    (Decoding(top_k=1), [0]),
    (Decoding(top_k=2), [0, 1]),
    (Decoding(top_k=4), [0, 1, 2, 3]),
    (Decoding(top_k=9), [0, 1, 2, 3]),
    (Decoding(top_p=0.4), [0]),
    (Decoding(top_p=0.75), [0, 1]),
    (Decoding(top_p=0.9), [0, 1, 2]),
    (Decoding(top_p=0.96), [0, 1, 2, 3]),
    (Decoding(top_p=1.0), [0, 1, 2, 3]),
    (Decoding(top_k=2, top_p=0.6), [0]),      # within the top 2: 0.625, 0.375
    (Decoding(top_k=3, top_p=0.8), [0, 1]),   # within the top 3: 0.526, 0.316, 0.158
    (Decoding(top_k=3, top_p=0.9), [0, 1, 2]),
])
def test_truncations_keep_exactly_the_right_set(decoding, kept):
    probs = sampling_probs(HAND, get_transform("softmax"), decoding)[0]
    assert (probs > 0).nonzero().squeeze(1).tolist() == kept
    mass = torch.tensor([0.5, 0.3, 0.15, 0.05])[kept]
    assert torch.allclose(probs[kept], mass / mass.sum(), atol=1e-6)


def test_alpha_relu_by_hand():
    """1.5-ReLU: p ~ (z/2 - tau)_+^2, divided by its sum on the support."""
    z, relu = torch.tensor([[4.0, 2.0, 0.0]]), get_transform("1.5-relu", tau=0.5)
    assert torch.allclose(sampling_probs(z, relu), torch.tensor([[0.9, 0.1, 0.0]]))
    shifted = sampling_probs(z, relu, Decoding(tau_shift=0.25))  # 1.25^2, 0.25^2
    assert torch.allclose(shifted, torch.tensor([[1.5625, 0.0625, 0.0]]) / 1.625)
    # T = 2: p ^ (1 / 2) = (0.9, 0.1) ^ 0.5 over its sum; the support stays {0, 1}
    assert torch.allclose(sampling_probs(z, relu, Decoding(temperature=2.0)),
                          torch.tensor([[0.75, 0.25, 0.0]]))
    two = get_transform("2-relu", tau=0.5)   # p ~ (z - tau)_+
    assert torch.allclose(sampling_probs(z, two), torch.tensor([[3.5, 1.5, 0.0]]) / 5.0)


def test_alpha_relu_matches_its_transform_renormalized():
    z = torch.randn(5, 300, dtype=torch.float64) * 2
    relu = get_transform("1.5-relu", tau=1.0)
    out = relu.probs(z)
    assert torch.allclose(sampling_probs(z, relu), out / out.sum(-1, keepdim=True))


@pytest.mark.parametrize("name, reference", [
    ("sparsemax", entmax.sparsemax), ("1.5-entmax", entmax.entmax15),
    ("1.3-entmax", lambda z, dim: entmax.entmax_bisect(z, 1.3, dim=dim, n_iter=50))])
def test_entmax_sampling_probs_are_the_entmax_package(name, reference):
    z = torch.randn(6, 50, dtype=torch.float64) * 2
    assert torch.allclose(sampling_probs(z, get_transform(name)), reference(z, dim=-1),
                          atol=1e-6)
    tempered = reference(z, dim=-1).sqrt()                  # T = 2: p ^ (1 / 2) over its sum
    assert torch.allclose(sampling_probs(z, get_transform(name), Decoding(temperature=2.0)),
                          tempered / tempered.sum(-1, keepdim=True), atol=1e-6)


def test_empty_alpha_relu_support_falls_back_to_the_arg_max():
    z = torch.tensor([[0.1, 0.3, -1.0], [4.0, 2.0, 0.0]])   # row 0: all below tau / 0.5
    relu = get_transform("1.5-relu", tau=0.5)
    probs = sampling_probs(z, relu)
    assert torch.equal(probs[0], torch.tensor([0.0, 1.0, 0.0]))
    assert not torch.isnan(probs).any()
    assert empty_support(z, relu).tolist() == [True, False]
    assert empty_support(z, relu, Decoding(tau_shift=-0.5)).tolist() == [False, False]
    assert empty_support(z, get_transform("softmax")).tolist() == [False, False]
    tokens = next_tokens(z.repeat(500, 1), relu, Decoding(), torch.Generator().manual_seed(0))
    assert (tokens[0::2] == 1).all() and set(tokens[1::2].tolist()) == {0, 1}


def test_race_falls_back_when_nothing_wins():
    weights = torch.tensor([[0.0, 0.0, 0.0], [0.0, 2.0, 0.0]])
    assert race(weights, torch.Generator().manual_seed(0),
                fallback=lambda: torch.tensor([2, 2])).tolist() == [2, 1]


@pytest.mark.parametrize("name", ["softmax", "sparsemax", "1.5-entmax", "1.5-relu"])
def test_greedy_is_the_arg_max(name):
    z = torch.randn(8, 40)
    tokens = next_tokens(z, get_transform(name, tau=0.3), Decoding("greedy"))
    assert torch.equal(tokens, z.argmax(-1))


@pytest.mark.parametrize("name, decoding", [
    ("softmax", Decoding()), ("softmax", Decoding(top_k=2)), ("softmax", Decoding(top_p=0.5)),
    ("sparsemax", Decoding()), ("1.5-entmax", Decoding()), ("1.5-relu", Decoding()),
    ("1.5-relu", Decoding("greedy"))])
def test_nan_logits_raise(name, decoding):
    z = torch.randn(3, 10)
    z[1, 4] = math.nan
    transform = get_transform(name, tau=0.2)
    with pytest.raises(ValueError, match="NaN"):
        next_tokens(z, transform, decoding, torch.Generator().manual_seed(0))
    with pytest.raises(ValueError, match="NaN"):
        sampling_probs(z, transform, decoding)


@pytest.mark.parametrize("kwargs, match", [
    (dict(method="beam"), "method"),
    (dict(top_k=0), "top-k"), (dict(top_k=2.5), "top-k"), (dict(top_k=True), "top-k"),
    (dict(top_p=0.0), "top-p"), (dict(top_p=1.5), "top-p"), (dict(top_p=-0.1), "top-p"),
    (dict(temperature=0.0), "temperature"), (dict(temperature=-1.0), "temperature"),
    (dict(temperature=math.nan), "temperature"), (dict(temperature=math.inf), "temperature"),
    (dict(tau_shift=math.nan), "tau shift"), (dict(top_p=True), "top-p"),
    (dict(temperature=True), "temperature"), (dict(top_k="5"), "top-k"),
    (dict(method="greedy", top_p=0.9), "greedy"),
    (dict(method="greedy", temperature=0.5), "greedy"),
])
def test_bad_decodings_raise(kwargs, match):
    with pytest.raises(ValueError, match=match):
        Decoding(**kwargs)


@pytest.mark.parametrize("name, decoding, match", [
    ("softmax", Decoding(tau_shift=0.1), "only to alpha-ReLU"),
    ("1.5-entmax", Decoding(tau_shift=0.1), "only to alpha-ReLU"),
])
def test_decodings_that_do_not_fit_the_transform_raise(name, decoding, match):
    z = torch.randn(2, 10)
    for fn in (sampling_probs, next_tokens, empty_support):
        with pytest.raises(ValueError, match=match):
            fn(z, get_transform(name), decoding)


@pytest.mark.parametrize("logits", [torch.zeros(3), torch.zeros(2, 3, 4),
                                    torch.zeros(2, 3, dtype=torch.long)])
def test_bad_logits_raise(logits):
    with pytest.raises(ValueError, match=r"\(B, V\)"):
        next_tokens(logits, get_transform("softmax"))


@pytest.mark.parametrize("decoding, label", [
    (Decoding(), "sample"), (Decoding("greedy"), "greedy"),
    (Decoding(top_p=0.9), "sample-top_p0.9"), (Decoding(tau_shift=0.1), "sample-tau+0.1"),
    (Decoding(tau_shift=-0.05), "sample-tau-0.05"),
    (Decoding(top_k=50, temperature=0.8), "sample-top_k50-T0.8"),
])
def test_labels(decoding, label):
    assert decoding.label() == label


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), scale=st.floats(0.1, 20.0),
       name=st.sampled_from(["softmax", "1.5-relu", "2-relu", "sparsemax"]),
       top_p=st.one_of(st.none(), st.floats(0.05, 1.0)))
def test_any_logits_give_a_distribution_and_a_supported_draw(seed, scale, name, top_p):
    gen = torch.Generator().manual_seed(seed)
    z = torch.randn(16, 64, generator=gen) * scale
    transform = get_transform(name, tau=1.0)
    decoding = Decoding(top_p=top_p if name == "softmax" else None)
    probs = sampling_probs(z, transform, decoding)
    assert not torch.isnan(probs).any() and (probs >= 0).all()
    assert torch.allclose(probs.sum(-1), torch.ones(16), atol=1e-5)
    tokens = next_tokens(z, transform, decoding, gen)
    assert (probs.gather(1, tokens.unsqueeze(1)) > 0).all()


def test_large_alpha_relu_outputs_do_not_overflow_the_distribution():
    """(z - tau)^20 of 1.05-ReLU overflows float32 for z ~ 2000; the distribution does not."""
    z = torch.tensor([[2000.0, 1990.0, 0.0]])
    probs = sampling_probs(z, get_transform("1.05-relu", tau=0.0))
    expected = torch.tensor([1.0, (1990 / 2000) ** 20, 0.0])
    assert torch.allclose(probs[0], expected / expected.sum())


TRANSFORMS = [("softmax", 0.0), ("sparsemax", 0.0), ("1.5-entmax", 0.0), ("1.3-entmax", 0.0),
              ("1.5-relu", 0.5), ("2-relu", 0.2), ("1.25-relu", 0.1)]
TEMPERATURES = [8.0, 4.0, 2.0, 1.5, 1.0, 0.7, 0.5, 0.3, 0.2, 0.1, 0.05]


def _entropy(probs: torch.Tensor) -> torch.Tensor:
    return -(probs * probs.clamp_min(1e-300).log()).sum(-1)


@pytest.mark.parametrize("name, tau", TRANSFORMS)
def test_temperature_sharpens_as_it_falls_for_every_transform(name, tau):
    """As T falls: the top probability never falls, the entropy never rises, the support
    stays the transform's own; T = 1 is the transform's p; T -> 0 is the arg-max."""
    transform = get_transform(name, tau=tau)
    z = torch.randn(6, 200, dtype=torch.float64, generator=torch.Generator().manual_seed(5)) * 3
    base = sampling_probs(z, transform)
    tops, entropies = [], []
    for t in TEMPERATURES:
        probs = sampling_probs(z, transform, Decoding(temperature=t))
        assert torch.equal(probs > 0, base > 0), f"T={t} moved the support"
        tops.append(probs.amax(-1))
        entropies.append(_entropy(probs))
    for before, after in zip(tops, tops[1:]):
        assert bool((after >= before - 1e-12).all())
    for before, after in zip(entropies, entropies[1:]):
        assert bool((after <= before + 1e-12).all())
    several = (base > 0).sum(-1) > 1                          # it does sharpen
    assert bool(several.any()) and bool((tops[-1][several] > tops[0][several]).all())
    assert torch.equal(sampling_probs(z, transform, Decoding(temperature=1e-12)),
                       sampling_probs(z, transform, Decoding("greedy")))
    tokens = next_tokens(z, transform, Decoding(temperature=1e-30),
                         torch.Generator().manual_seed(0))
    assert torch.equal(tokens, z.argmax(-1))
    flat = sampling_probs(z, transform, Decoding(temperature=1e6))
    support = (base > 0).sum(-1, keepdim=True).double()
    assert torch.allclose(flat, (base > 0) / support, atol=1e-4)   # uniform on the support


def test_the_old_alpha_relu_temperature_would_have_flattened():
    """What the rule replaces: dividing the logits by T before alpha-ReLU's fixed threshold
    widens its support as T falls (the top probability drops); the rule sharpens."""
    transform = get_transform("1.5-relu", tau=1.0)
    z = torch.randn(1, 1000, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    divided = [sampling_probs(z / t, transform) for t in (2.0, 0.1)]
    assert float(divided[1].amax()) < float(divided[0].amax())
    kept = [sampling_probs(z, transform, Decoding(temperature=t)) for t in (2.0, 0.1)]
    assert float(kept[1].amax()) > float(kept[0].amax())


@pytest.mark.parametrize("name, tau", TRANSFORMS)
@pytest.mark.parametrize("temperature", [1.0, 0.5, 3.0])
def test_softmax_of_log_probs_over_t_is_the_sampling_distribution(name, tau, temperature):
    """log_probs is what a sampler that applies the temperature itself (transformers'
    warper divides its scores by T) needs: softmax(log p / T) = p_T, -inf off the support."""
    transform = get_transform(name, tau=tau)
    z = torch.randn(5, 60, dtype=torch.float64, generator=torch.Generator().manual_seed(2)) * 2
    z[0] = -5.0                                   # alpha-ReLU: an empty support here
    z[0, 7] = -4.0
    scores = log_probs(z, transform)
    want = sampling_probs(z, transform, Decoding(temperature=temperature))
    assert torch.allclose(torch.softmax(scores / temperature, -1), want, atol=1e-12)
    assert torch.equal(scores == -math.inf, want == 0)


def test_log_probs_of_an_empty_support_is_the_arg_max_and_nan_raises():
    relu = get_transform("1.5-relu", tau=0.5)
    z = torch.tensor([[0.1, 0.3, -1.0], [4.0, 2.0, 0.0]])
    assert log_probs(z, relu)[0].tolist() == [-math.inf, 0.0, -math.inf]
    assert log_probs(z, relu, tau_shift=-0.5)[0, 0] > -math.inf
    z[1, 1] = math.nan
    with pytest.raises(ValueError, match="NaN"):
        log_probs(z, relu)
    with pytest.raises(ValueError, match="only to alpha-ReLU"):
        log_probs(z, get_transform("softmax"), tau_shift=0.1)


def test_log_probs_of_large_alpha_relu_outputs_are_finite():
    z = torch.tensor([[2000.0, 1990.0, 0.0]])
    probs = log_probs(z, get_transform("1.05-relu", tau=0.0)).exp()
    expected = torch.tensor([1.0, (1990 / 2000) ** 20, 0.0])
    assert torch.allclose(probs[0], expected / expected.sum())
