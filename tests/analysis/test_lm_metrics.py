"""LM metrics: every one against a hand-computed case (and JSD against scipy, rep/wrep
against Martins et al.'s one-draw estimator by Monte Carlo); bad input raises ValueError."""

import math
import random

import pytest
import torch
from hypothesis import example, given, settings
from hypothesis import strategies as st
from scipy.spatial.distance import jensenshannon

from arelu_cli.analysis import lm_metrics as M

# Two steps over V = 4: p = (0.5, 0.3, 0.2, 0) with gold 1, and (0.1, 0, 0, 0.9) with gold 3.
PROBS = torch.tensor([[0.5, 0.3, 0.2, 0.0], [0.1, 0.0, 0.0, 0.9]])
TARGETS = torch.tensor([1, 3])
PREVIOUS = torch.tensor([[0, 1], [-1, 0]])   # window 2: {0, 1} (gold inside), {0}


def test_previous_tokens_by_hand():
    got = M.previous_tokens(torch.tensor([[5, 6, 7], [1, 2, -100]]), window=2)
    assert got.tolist() == [[[-1, -1], [-1, 5], [5, 6]], [[-1, -1], [-1, 1], [1, 2]]]


def test_step_values_by_hand():
    v = M.step_values(PROBS, TARGETS, PREVIOUS, windows=(1, 2))
    assert torch.allclose(v["p_target"], torch.tensor([0.3, 0.9], dtype=torch.float64))
    assert torch.allclose(v["sq_norm"], torch.tensor([0.38, 0.82], dtype=torch.float64))
    assert v["support"].tolist() == [3, 2]
    assert torch.allclose(v["rep_2"], torch.tensor([0.8, 0.1], dtype=torch.float64))
    assert torch.allclose(v["wrep_2"], torch.tensor([0.5, 0.1], dtype=torch.float64))
    # window 1: the last token only, {1} (the gold token) and {0}
    assert torch.allclose(v["rep_1"], torch.tensor([0.3, 0.1], dtype=torch.float64))
    assert torch.allclose(v["wrep_1"], torch.tensor([0.0, 0.1], dtype=torch.float64))


def test_a_repeated_previous_token_counts_once():
    v = M.step_values(PROBS[:1], TARGETS[:1], torch.tensor([[0, 0]]), windows=(2,))
    assert v["rep_2"].item() == pytest.approx(0.5) and v["wrep_2"].item() == pytest.approx(0.5)


def test_rep_is_the_expectation_of_martins_one_draw_estimator():
    """Their repeat_at_1: draw one token per step, count it if it is among the previous l
    gold tokens (wrep: and is not the gold token); the mean over many draws -> ours."""
    gen = torch.Generator().manual_seed(0)
    probs = torch.softmax(torch.randn(6, 9, generator=gen) * 2, -1)
    targets = torch.randint(0, 9, (1, 6), generator=gen)
    previous = M.previous_tokens(targets, window=3)[0]
    ours = M.step_values(probs, targets[0], previous, windows=(3,))
    draws = torch.multinomial(probs, 20000, replacement=True, generator=gen)   # (6, draws)
    hits = (draws.unsqueeze(-1) == previous.unsqueeze(1)).any(-1).double()
    wrong = hits * (draws != targets[0].unsqueeze(1))
    assert torch.allclose(hits.mean(1), ours["rep_3"], atol=0.015)
    assert torch.allclose(wrong.mean(1), ours["wrep_3"], atol=0.015)


def test_sparsemax_score_by_hand():
    v = M.step_values(PROBS, TARGETS)
    # 1 - 1/2 ||p - e_y||^2: 1 - (0.25 + 0.49 + 0.04) / 2 and 1 - (0.01 + 0.01) / 2
    assert torch.allclose(M.sparsemax_score(v["p_target"], v["sq_norm"]),
                          torch.tensor([0.61, 0.99], dtype=torch.float64))


def test_jsd_matches_scipy_and_its_bounds():
    v = M.step_values(PROBS, TARGETS)
    ours = M.jsd_to_target(v["p_target"])
    for row, target, value in zip(PROBS, TARGETS, ours):
        onehot = torch.nn.functional.one_hot(target, 4).double()
        assert value.item() == pytest.approx(jensenshannon(row.double(), onehot) ** 2)
    assert M.jsd_to_target(torch.tensor([0.0, 1.0])).tolist() == pytest.approx([math.log(2), 0])


def test_perplexities_by_hand():
    assert M.perplexity(torch.tensor([0.5, 0.25])) == pytest.approx(2 ** 1.5)
    assert M.perplexity(torch.tensor([0.5, 0.0])) == math.inf
    # (p + 0.1) / (1 + 0.1 * 4): 0.1 / 1.4 and 1.1 / 1.4
    assert M.eps_perplexity(torch.tensor([0.0, 1.0]), 0.1, 4) == pytest.approx(
        1.4 / math.sqrt(0.11))
    assert M.eps_perplexity(torch.tensor([0.5, 0.25]), 0.0, 4) == pytest.approx(2 ** 1.5)


def test_tune_eps_picks_the_best_dev_eps():
    p = torch.tensor([0.0, 0.5, 1.0, 1.0])
    grid = (1e-4, 1e-2, 0.3)

    def by_hand(eps):   # the geometric mean of (p + eps) / (1 + 10 eps), inverted
        return (1 + 10 * eps) / (eps * (0.5 + eps) * (1 + eps) ** 2) ** 0.25
    best = min(grid, key=by_hand)
    assert M.tune_eps(p, 10, grid) == (best, pytest.approx(by_hand(best)))
    assert best == 1e-2   # neither end of the grid: the test can tell a wrong pick


def test_summarize_and_per_item():
    v = M.concat([M.step_values(PROBS, TARGETS, PREVIOUS, windows=(2,)),
                  M.step_values(torch.tensor([[0.0, 1.0, 0.0, 0.0]]), torch.tensor([0]),
                                torch.tensor([[1, 1]]), windows=(2,))])
    s = M.summarize(v, vocab=4, eps=0.1)
    assert s["steps"] == 3 and s["zero_share"] == pytest.approx(1 / 3)
    assert s["ppl"] == math.inf and s["eps"] == 0.1
    assert s["eps_ppl"] == pytest.approx((1.4 ** 3 / (0.4 * 1.0 * 0.1)) ** (1 / 3))
    assert s["sp"] == pytest.approx((0.61 + 0.99 + 0.0) / 3)
    assert s["support_mean"] == pytest.approx(2.0) and s["support_q50"] == 2.0
    assert s["rep_2"] == pytest.approx((0.8 + 0.1 + 1.0) / 3)
    assert s["wrep_2"] == pytest.approx((0.5 + 0.1 + 1.0) / 3)
    sums = M.per_item(v["p_target"], torch.tensor([0, 1, 0]), 3)
    assert sums.tolist() == pytest.approx([0.3, 0.9, 0.0])


def test_distinct_n_by_hand():
    texts = [["a", "b", "a", "b"], ["a", "c"]]
    assert M.distinct_n(texts, 1) == pytest.approx(3 / 6)      # a b c of a b a b a c
    assert M.distinct_n(texts, 2) == pytest.approx(3 / 4)      # ab ba ab ac
    assert M.distinct_n(texts, 3) == pytest.approx(2 / 2)
    assert math.isnan(M.distinct_n(texts, 5))
    assert M.distinct_per_item(texts, 2)[0] == pytest.approx(2 / 3)


@pytest.mark.parametrize("text, n, looped", [
    ([1, 2, 3, 1, 2, 3], 3, True), ([1, 2, 3, 1, 2, 3], 4, False), ([7, 7, 7], 1, True),
    ([7, 7, 7], 2, True), ([1, 2, 3], 3, False), ([1, 2, 3, 4], 1, False)])
def test_loops_by_hand(text, n, looped):
    assert M.loops(text, n) is looped


def test_zipf_of_an_exact_zipf_law_is_one():
    counts = {"a": 12, "b": 6, "c": 4, "d": 3}   # 12 / rank
    text = [tok for tok, c in counts.items() for _ in range(c)]
    assert M.zipf_coefficient([text[:10], text[10:]]) == pytest.approx(1.0)
    assert math.isnan(M.zipf_coefficient([["a", "a"]]))


def test_self_bleu_by_hand():
    texts = [["a", "b", "c", "d"], ["a", "b", "c", "e"], ["x", "y", "z", "w"]]
    # "a b c d" against "a b c e": unigrams 3/4, bigrams 2/3, same length: sqrt(3/4 * 2/3)
    scores = M.self_bleu_per_item(texts, sample=3, max_order=2)
    assert scores[:2] == pytest.approx([100 * math.sqrt(0.5)] * 2)
    assert M.self_bleu_per_item([["a", "b"]] * 3) == pytest.approx([100.0] * 3)
    many = [[i, i + 1, i + 2] for i in range(50)]
    assert len(M.self_bleu_per_item(many, sample=10, seed=1)) == 10
    assert M.self_bleu_per_item(many, 10, seed=1) == M.self_bleu_per_item(many, 10, seed=1)


def test_text_stats_and_distance_to_human():
    model = [[1, 2, 3, 1, 2, 3], [4, 5]]
    stats = M.text_stats(model, loop_n=3, self_bleu_sample=2)
    assert stats["loop"] == 0.5 and stats["length"] == 4.0
    assert stats["distinct_1"] == pytest.approx(5 / 8)
    gaps = M.distance_to_human({"length": 4.0, "loop": 0.5}, {"length": 6.5, "loop": 0.0})
    assert gaps == {"length_gap": 2.5, "loop_gap": 0.5}


@pytest.mark.parametrize("call, match", [
    (lambda: M.step_values(PROBS, torch.tensor([1, 4])), "token ids"),
    (lambda: M.step_values(PROBS, torch.tensor([1])), "targets"),
    (lambda: M.step_values(torch.full((2, 4), math.nan), TARGETS), "NaN"),
    (lambda: M.step_values(PROBS, TARGETS, PREVIOUS, windows=(16,)), "previous"),
    (lambda: M.previous_tokens(torch.zeros(3, dtype=torch.long)), r"\(B, T\)"),
    (lambda: M.eps_perplexity(torch.tensor([0.5]), -0.1, 4), "eps"),
    (lambda: M.tune_eps(torch.tensor([0.5]), 4, ()), "grid"),
    (lambda: M.summarize(M.step_values(PROBS[:0], TARGETS[:0]), 4, 0.1), "no steps"),
    (lambda: M.concat([]), "no batches"),
    (lambda: M.per_item(torch.ones(3), torch.zeros(2), 1), "same shape"),
    (lambda: M.distinct_n([[1]], 0), "n must"),
    (lambda: M.loops([1], 0), "n must"),
    (lambda: M.self_bleu_per_item([[1], [2]], sample=1), "at least 2"),
    (lambda: M.text_stats([]), "no texts"),
])
def test_bad_input_raises(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_smoothed_log_probs_sum_per_item_to_the_eps_perplexity():
    p, items = torch.tensor([0.0, 1.0, 0.5]), torch.tensor([0, 0, 1])
    logs = M.smoothed_log_probs(p, 0.1, 4)
    assert logs.tolist() == pytest.approx([math.log(0.1 / 1.4), math.log(1.1 / 1.4),
                                           math.log(0.6 / 1.4)])
    sums, counts = M.per_item(logs, items, 2), M.per_item(torch.ones(3), items, 2)
    assert math.exp(-float(sums.sum() / counts.sum())) == pytest.approx(
        M.eps_perplexity(p, 0.1, 4))


def test_self_bleu_equals_sacrebleus_sentence_bleu_against_the_others():
    from sacrebleu.metrics import BLEU

    gen = torch.Generator().manual_seed(5)
    texts = [torch.randint(0, 6, (int(n),), generator=gen).tolist()
             for n in torch.randint(1, 12, (15,), generator=gen)]
    lines = [" ".join(map(str, t)) for t in texts]
    bleu = BLEU(tokenize="none", effective_order=True)
    expected = [bleu.sentence_score(line, lines[:i] + lines[i + 1:]).score
                for i, line in enumerate(lines)]
    assert M.self_bleu_per_item(texts, sample=15) == pytest.approx(expected)


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), sparsity=st.floats(0.0, 0.95))
@example(seed=1698, sparsity=0.875)  # a float32 row summing to 1 + 6e-8
def test_bounds_on_random_sparse_distributions(seed, sparsity):
    """0 <= wrep <= rep <= 1, sp in [0, 1], JSD in [0, log 2], support as counted, up to
    float32 rounding of the probabilities (their sum is 1 within ~1e-7)."""
    gen = torch.Generator().manual_seed(seed)
    probs = torch.rand(12, 30, generator=gen) * (torch.rand(12, 30, generator=gen) > sparsity)
    probs[:, 0] += 1e-3                                   # no empty row
    probs = probs / probs.sum(-1, keepdim=True)
    targets = torch.randint(0, 30, (1, 12), generator=gen)
    v = M.step_values(probs, targets[0], M.previous_tokens(targets)[0])
    for window in M.WINDOWS:
        rep, wrep = v[f"rep_{window}"], v[f"wrep_{window}"]
        assert (wrep >= -1e-12).all() and (wrep <= rep + 1e-12).all() and (rep <= 1 + 1e-6).all()
    sp = M.sparsemax_score(v["p_target"], v["sq_norm"])
    assert (sp >= -1e-9).all() and (sp <= 1 + 1e-9).all()
    jsd = M.jsd_to_target(v["p_target"])
    assert (jsd >= -1e-12).all() and (jsd <= math.log(2) + 1e-12).all()
    assert torch.equal(v["support"], (probs > 0).sum(-1).double())


def test_batch_step_values_flatten_the_counted_steps_with_their_item():
    from arelu_cli.decode.sampling import sampling_probs
    from arelu_cli.registry import get_transform

    gen = torch.Generator().manual_seed(2)
    logits = torch.randn(2, 3, 5, generator=gen) * 3
    targets = torch.tensor([[1, 2, 1], [4, 0, -100]])
    relu = get_transform("1.5-relu", tau=0.5)
    got = M.batch_step_values(logits, targets, relu, windows=(2,))
    assert got["item"].tolist() == [0, 0, 0, 1, 1]
    probs = torch.cat([sampling_probs(logits[0], relu), sampling_probs(logits[1, :2], relu)])
    previous = torch.tensor([[-1, -1], [-1, 1], [1, 2], [-1, -1], [-1, 4]])
    expected = M.step_values(probs, torch.tensor([1, 2, 1, 4, 0]), previous, windows=(2,))
    for key, value in expected.items():
        assert torch.allclose(got[key], value), key
    with pytest.raises(ValueError, match=r"\(B, T, V\)"):
        M.batch_step_values(logits[0], targets[0], relu)


def _draws(n_texts: int, rows: int, seed: int) -> tuple[torch.Tensor, list[list[int]]]:
    """``counts (rows, n_texts)`` of resamples drawn with replacement, and their indices."""
    gen = torch.Generator().manual_seed(seed)
    index = torch.randint(0, n_texts, (rows, n_texts), generator=gen)
    counts = torch.stack([torch.bincount(r, minlength=n_texts) for r in index])
    return counts, index.tolist()


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), vocab=st.integers(1, 15), longest=st.integers(0, 12))
def test_resampled_statistics_equal_the_plain_ones_on_each_resample(seed, vocab, longest):
    """Every resample's pooled distinct-n, Zipf coefficient and looping share are those of
    the plain functions on the resampled list (texts drawn twice count twice; NaN alike)."""
    rng = random.Random(seed)
    texts = [[rng.randrange(vocab) for _ in range(rng.randrange(longest + 1))]
             for _ in range(9)]
    counts, index = _draws(len(texts), 20, seed)
    got = {n: M.resampled_distinct_n(texts, n, counts) for n in (1, 2, 3)}
    zipf = M.resampled_zipf(texts, counts)
    loop = M.resampled_mean([float(M.loops(t)) for t in texts], counts)
    for r, rows in enumerate(index):
        drawn = [texts[i] for i in rows]
        for n, values in got.items():
            assert _same(values[r], M.distinct_n(drawn, n))
        assert _same(zipf[r], M.zipf_coefficient(drawn), tol=1e-9)
        assert _same(loop[r], sum(M.loops(t) for t in drawn) / len(drawn))


def _same(got: torch.Tensor, expected: float, tol: float = 1e-12) -> bool:
    return (math.isnan(expected) and math.isnan(float(got))) or abs(float(got) - expected) < tol


def test_resampled_statistics_by_hand():
    """Texts a b a b / c: drawing the first twice gives distinct-2 2/6 (ab, ba of 6 bigrams),
    Zipf counts (4, 4) give slope 0, and per-text values (1, 0) mean 1 and 1/2."""
    texts = [list("abab"), list("c")]
    counts = torch.tensor([[2, 0], [1, 1]])
    assert M.resampled_distinct_n(texts, 2, counts).tolist() == pytest.approx([2 / 6, 2 / 3])
    assert M.resampled_zipf(texts, counts)[0].item() == pytest.approx(0.0, abs=1e-12)
    assert M.resampled_mean([1.0, 0.0], counts).tolist() == [1.0, 0.5]
    with pytest.raises(ValueError, match=r"counts must be \(R, 2\)"):
        M.resampled_zipf(texts, counts[:, :1])
    with pytest.raises(ValueError, match="n must be at least 1"):
        M.resampled_distinct_n(texts, 0, counts)


def test_resampled_statistics_do_not_depend_on_the_chunk(monkeypatch):
    rng = random.Random(4)
    texts = [[rng.randrange(6) for _ in range(rng.randrange(8))] for _ in range(7)]
    counts, _ = _draws(len(texts), 10, 4)
    whole = (M.resampled_distinct_n(texts, 2, counts), M.resampled_zipf(texts, counts))
    monkeypatch.setattr(M, "CHUNK_ROWS", 3)
    parts = (M.resampled_distinct_n(texts, 2, counts), M.resampled_zipf(texts, counts))
    for a, b in zip(whole, parts):
        assert torch.equal(a.isnan(), b.isnan()) and torch.allclose(a, b, equal_nan=True)
