"""The k best decoding scores per row (``top_scores``): both engines pick the k largest
logits, larger first and equal logits lower index first, and score them bit for bit as
``alpha_relu_log_scores`` does, and as ``log_softmax`` does to float32 rounding; empty
supports, NaN rows, the fallback without C++."""

import math
import warnings

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from arelu_cli.transforms import _cpp_kernels, alpha_relu_log_scores
from arelu_cli.transforms.top_scores import (alpha_relu_top_log_scores, engine,
                                             softmax_top_log_scores, top_k_logits)
from arelu_cli.transforms import set_engine, engine as use_engine

pytestmark = pytest.mark.usefixtures("one_thread")

HAS_CPP = _cpp_kernels.available()
ENGINES = ["eager", pytest.param("cpp", marks=pytest.mark.skipif(
    not HAS_CPP, reason="no C++ toolchain to build the cpp engine"))]
# Values that tie, straddle the support's edge (z = tau / (alpha - 1)) and hit the extremes.
SPECIAL = torch.tensor([-math.inf, -1e30, -3.0, -0.0, 0.0, 0.25, 0.3, 0.6, 1.0, 2.5, 1e30,
                        math.inf])


def _ranked(row: list[float], k: int) -> list[int]:
    """The definition: indices by logit, larger first, equal logits lower index first."""
    return sorted(range(len(row)), key=lambda j: (-row[j], j))[:k]


def _engines(z: torch.Tensor, k: int) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
    found = {"eager": top_k_logits(z, k)}
    if HAS_CPP:
        found["cpp"] = _cpp_kernels.top_k_logits(z, k)
    return found


@st.composite
def matrices(draw):
    """(N, V) float32 logits and a k: a third special values, a third rounded to 0.5 (many
    ties), a third plain normals; V up to 150 spans several of the C++ scan's 32-entry blocks."""
    rows, vocab = draw(st.integers(1, 4)), draw(st.integers(1, 150))
    gen = torch.Generator().manual_seed(draw(st.integers(0, 2**32 - 1)))
    normal = torch.randn(rows, vocab, generator=gen) * 3
    kind = torch.randint(0, 3, (rows, vocab), generator=gen)
    special = SPECIAL[torch.randint(0, len(SPECIAL), (rows, vocab), generator=gen)]
    z = torch.where(kind == 0, special, torch.where(kind == 1, (normal * 2).round() / 2, normal))
    return z, draw(st.integers(1, vocab))


@settings(max_examples=150, deadline=None)
@given(matrices())
def test_both_engines_pick_the_k_largest_logits_lower_index_first(case):
    z, k = case
    expected = torch.tensor([_ranked(row, k) for row in z.tolist()])
    for name, (values, indices) in _engines(z, k).items():
        assert torch.equal(indices, expected), name
        assert torch.equal(values, z.gather(1, expected)), name


@settings(max_examples=100, deadline=None)
@given(matrices(), st.sampled_from([1.5, 2.0, 1.3, 1.7]), st.sampled_from([0.0, 0.15, 1.2]))
def test_scores_are_the_top_k_of_the_full_log_scores(case, alpha, tau):
    z, k = case
    full = alpha_relu_log_scores(z, alpha, tau)                         # (N, V)
    ranked = torch.tensor([_ranked(row, k) for row in z.tolist()])
    for name in ("eager", "cpp") if HAS_CPP else ("eager",):
        with use_engine(name):
            scores, indices = alpha_relu_top_log_scores(z, k, alpha, tau)
        assert torch.equal(indices, ranked), name
        assert torch.equal(scores, full.gather(1, ranked)), name      # bit for bit
        # The same values torch.topk finds on the full matrix (scores never fall as logits rise).
        torch.testing.assert_close(scores, full.topk(k, dim=1).values)


@pytest.mark.parametrize("name", ENGINES)
def test_distinct_scores_give_torch_topk_indices(name, monkeypatch):
    set_engine(name)
    z = torch.randn(64, 1003, generator=torch.Generator().manual_seed(3)) * 2
    full = alpha_relu_log_scores(z, 1.5, 0.3)
    for k in (1, 2, 5, 12):
        expected_scores, expected_indices = full.topk(k, dim=1)
        scores, indices = alpha_relu_top_log_scores(z, k, 1.5, 0.3)
        assert torch.equal(scores, expected_scores) and torch.equal(indices, expected_indices)


@pytest.mark.parametrize("name", ENGINES)
def test_rows_with_an_empty_support_score_minus_inf(name, monkeypatch):
    """Every logit below tau / (alpha - 1): all k scores -inf, the tokens those of the k
    largest logits (decoding then drops them as it drops -inf candidates today)."""
    set_engine(name)
    z = torch.randn(3, 40, generator=torch.Generator().manual_seed(0))
    z[1] = -z[1].abs() - 1.0                                            # row 1: no support
    scores, indices = alpha_relu_top_log_scores(z, 4, 1.5, 0.2)
    assert bool(torch.isneginf(scores[1]).all()) and bool(torch.isfinite(scores[0, 0]))
    assert indices[1].tolist() == _ranked(z[1].tolist(), 4)
    assert bool(torch.isneginf(alpha_relu_log_scores(z[1], 1.5, 0.2)).all())


@pytest.mark.parametrize("name", ENGINES)
def test_a_nan_logit_makes_its_row_nan_and_leaves_the_others(name, monkeypatch):
    set_engine(name)
    z = torch.randn(4, 100, generator=torch.Generator().manual_seed(1))
    clean = alpha_relu_top_log_scores(z, 3, 1.5, 0.1)
    z[1, 57] = math.nan
    z[3, :] = math.nan
    scores, indices = alpha_relu_top_log_scores(z, 3, 1.5, 0.1)
    assert torch.isnan(scores).all(1).tolist() == [False, True, False, True]
    assert indices[1].tolist() == indices[3].tolist() == [0, 1, 2]
    for row in (0, 2):
        assert torch.equal(scores[row], clean[0][row]) and torch.equal(indices[row], clean[1][row])


@pytest.mark.skipif(not HAS_CPP, reason="no C++ toolchain to build the cpp engine")
def test_rows_split_over_threads_give_the_same_answer():
    """Enough rows for several of ATen's tasks: each row is one task's, start to end."""
    z = (torch.randn(96, 4096, generator=torch.Generator().manual_seed(6)) * 4).round()
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        found = _cpp_kernels.top_k_logits(z, 9)
    finally:
        torch.set_num_threads(threads)
    expected = top_k_logits(z, 9)
    assert torch.equal(found[0], expected[0]) and torch.equal(found[1], expected[1])


def test_any_leading_shape_and_dtype_and_bad_k():
    z = torch.randn(2, 3, 50, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    scores, indices = alpha_relu_top_log_scores(z, 4, 1.5, 0.0)
    assert scores.shape == indices.shape == (2, 3, 4) and scores.dtype == torch.float32
    flat_scores, flat_indices = alpha_relu_top_log_scores(z.reshape(6, 50), 4, 1.5, 0.0)
    assert torch.equal(scores.reshape(6, 4), flat_scores)
    assert torch.equal(indices.reshape(6, 4), flat_indices)
    for k in (0, 51):
        with pytest.raises(ValueError, match="k must lie in"):
            alpha_relu_top_log_scores(z, k, 1.5, 0.0)


def test_without_the_cpp_engine_the_eager_one_answers_the_same(monkeypatch):
    """A failed build warns once (as for the loss) and decoding goes on, same results."""
    z = torch.randn(5, 300, generator=torch.Generator().manual_seed(4))
    z[2, 10:20] = 3.0                                                   # ties
    expected = alpha_relu_top_log_scores(z, 6, 1.5, 0.2)

    def no_compiler():
        raise RuntimeError("no C++ compiler")

    monkeypatch.setattr(_cpp_kernels, "_state", {"ops": None, "failed": False})
    monkeypatch.setattr(_cpp_kernels, "_build", no_compiler)
    set_engine("auto")
    with pytest.warns(RuntimeWarning, match="no C.. compiler"):
        assert engine("cpu") == "eager"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        found = alpha_relu_top_log_scores(z, 6, 1.5, 0.2)
    assert torch.equal(found[0], expected[0]) and torch.equal(found[1], expected[1])
    assert found[1][2].tolist() == list(range(10, 16))


@pytest.mark.skipif(not HAS_CPP, reason="no C++ toolchain to build the cpp engine")
def test_the_cpp_engine_is_used_where_it_builds(monkeypatch):
    set_engine("auto")
    assert engine("cpu") == "cpp"
    set_engine("eager")
    assert engine("cpu") == "eager"


@settings(max_examples=100, deadline=None)
@given(matrices())
def test_softmax_scores_are_the_top_k_of_log_softmax(case):
    """The k largest logits (the same ranking as alpha-ReLU's) minus the row's logsumexp:
    log_softmax's values to float32 rounding (-inf at -inf logits); a row holding +inf, which
    log_softmax makes all NaN, scores NaN at its best token, so decoding refuses it (an
    all -inf row is NaN in both)."""
    z, k = case
    full = torch.log_softmax(z.double(), dim=1).float()                 # (N, V), a reference
    ranked = torch.tensor([_ranked(row, k) for row in z.tolist()])
    plain = ~torch.isposinf(z).any(1)                                   # rows without +inf
    for name in ("eager", "cpp") if HAS_CPP else ("eager",):
        with use_engine(name):
            scores, indices = softmax_top_log_scores(z, k)
        assert torch.equal(indices, ranked), name
        torch.testing.assert_close(scores[plain], full.gather(1, ranked)[plain], rtol=1e-6,
                                   equal_nan=True,
                                   atol=1e-5)
        assert bool(torch.isnan(scores[~plain, 0]).all()), name


def test_softmax_scores_match_topk_of_log_softmax_on_distinct_logits():
    z = torch.randn(64, 1003, generator=torch.Generator().manual_seed(5)) * 4
    for k in (1, 2, 5, 12):
        expected_scores, expected_indices = torch.log_softmax(z, dim=1).topk(k, dim=1)
        scores, indices = softmax_top_log_scores(z, k)
        assert torch.equal(indices, expected_indices)
        torch.testing.assert_close(scores, expected_scores, rtol=0, atol=2e-6)


def test_softmax_nan_rows_shapes_and_bad_k():
    z = torch.randn(2, 3, 50, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    z[1, 2, 7] = math.nan
    scores, indices = softmax_top_log_scores(z, 4)
    assert scores.shape == indices.shape == (2, 3, 4) and scores.dtype == torch.float32
    assert torch.isnan(scores).all(-1).tolist() == [[False] * 3, [False, False, True]]
    assert indices[1, 2].tolist() == [0, 1, 2, 3]
    for k in (0, 51):
        with pytest.raises(ValueError, match="k must lie in"):
            softmax_top_log_scores(z, k)
