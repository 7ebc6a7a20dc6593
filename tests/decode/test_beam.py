"""Beam search: beam 1 is greedy, n-best lists are sorted, pruning -inf candidates matches a
brute-force beam search that keeps them, teacher-forced scores equal decoding scores;
alpha-ReLU's one-pass top-k scores decode exactly as the full score matrix does (softmax's
to float32 rounding), and NaN logits stop decoding with a UserError."""

import dataclasses
import math

import pytest
import torch

from arelu_cli.config import ModelConfig
from arelu_cli.decode.search import (Hypothesis, beam_search, greedy, ranking_score, sequence_scores,
                                  step_log_scores, step_top_scores, target_tensors)
from arelu_cli.util.errors import UserError
from arelu_cli.model.transformer import Transformer
from arelu_cli.registry import get_transform
from arelu_cli.transforms import _cpp_kernels

pytestmark = pytest.mark.usefixtures("one_thread")

PAD, BOS, EOS, VOCAB = 0, 1, 2, 40
CFG = ModelConfig(d_model=32, encoder_layers=1, decoder_layers=2, heads=2, d_ff=64, dropout=0.0,
                  attention_dropout=0.0, max_positions=64)
# tau 0.9 leaves about 3 of 40 outputs of this random model non-zero: beams of 4 run short.
TRANSFORMS = [("softmax", 0.0), ("1.5-entmax", 0.0), ("sparsemax", 0.0), ("1.5-relu", 0.9)]
# alpha-ReLU's top-k engines: C++ where it builds, the eager twin everywhere.
ENGINES = ["eager", pytest.param("cpp", marks=pytest.mark.skipif(
    not _cpp_kernels.available(), reason="no C++ toolchain to build the cpp engine"))]


def _model(seed=0, eos_bias=1.5):
    torch.manual_seed(seed)
    model = Transformer(CFG, VOCAB, VOCAB, PAD).eval()
    with torch.no_grad():  # finish hypotheses now and then
        model.output.bias[EOS] = eos_bias
    return model


def _sources(batch=5, seed=0):
    src = torch.randint(4, VOCAB, (batch, 6), generator=torch.Generator().manual_seed(seed))
    src[1, 3:] = PAD
    src[3, 5:] = PAD
    return src


def _reference_beam(model, src, transform, limit, beam, n_best, lp, renormalize=False):
    """One sentence, prefixes recomputed without a cache, -inf candidates kept in the beam."""
    beams, finished, top_ended = [([], 0.0)], [], False
    for t in range(limit):
        candidates = []
        for prefix, score in beams:
            logits = model(src, torch.tensor([[BOS] + prefix]))[:, -1]
            scores = step_log_scores(transform, logits, renormalize)[0].double().tolist()
            candidates += [(score + s, prefix, tok) for tok, s in enumerate(scores)]
        candidates.sort(key=lambda c: -c[0])
        top = candidates[:beam]
        if not math.isfinite(top[0][0]):
            break
        top_ended |= top[0][2] == EOS
        beams = []
        for score, prefix, tok in top:
            if tok == EOS:
                finished.append(Hypothesis(prefix, score, True))
            elif t + 1 >= limit:
                finished.append(Hypothesis(prefix + [tok], score, False))
            else:
                beams.append((prefix + [tok], score))
        real = [h for h in finished if math.isfinite(h.score)]
        if top_ended and len(real) >= n_best:
            break
    real = [h for h in finished if math.isfinite(h.score)]
    return sorted(real, key=lambda h: ranking_score(h, lp), reverse=True)[:n_best]


def _rows(src):
    return [src[i:i + 1, :int((src[i] != PAD).sum())] for i in range(src.shape[0])]


@pytest.mark.parametrize("name, tau", TRANSFORMS)
def test_beam_one_is_greedy(name, tau):
    model, src = _model(), _sources()
    transform = get_transform(name, tau=tau)
    limits = torch.tensor([9, 7, 12, 4, 10])
    found = greedy(model, src, transform, bos_id=BOS, eos_id=EOS, limits=limits)
    beamed = beam_search(model, src, transform, bos_id=BOS, eos_id=EOS, limits=limits, beam=1)
    for g, [b] in zip(found, beamed):
        if math.isfinite(g.score):
            assert (b.tokens, b.ended) == (g.tokens, g.ended)
            # float32 logits: a batch's shape changes how the CPU's matmul blocks its sums
            # (AVX512 machines: one sentence alone vs in a batch of 5 differ by ~1e-7)
            assert b.score == pytest.approx(g.score, rel=1e-6, abs=1e-6)
        else:  # greedy walks on through zeros, beam search stops where all scores are -inf
            assert b.score == -math.inf and g.tokens[:len(b.tokens)] == b.tokens


@pytest.mark.parametrize("name, tau", TRANSFORMS)
@pytest.mark.parametrize("beam, n_best, lp", [(4, 1, 0.0), (4, 3, 0.0), (3, 2, 1.0)])
def test_pruned_beam_matches_a_brute_force_reference(name, tau, beam, n_best, lp):
    model, src = _model(seed=1), _sources(seed=1)
    transform = get_transform(name, tau=tau)
    limits = torch.tensor([6, 5, 8, 3, 7])
    found = beam_search(model, src, transform, bos_id=BOS, eos_id=EOS, limits=limits, beam=beam,
                        n_best=n_best, length_penalty=lp)
    for row, limit, hyps in zip(_rows(src), limits.tolist(), found):
        expected = _reference_beam(model, row, transform, limit, beam, n_best, lp)
        if not expected:  # every hypothesis died: the best prefix comes back with -inf
            assert len(hyps) == 1 and hyps[0].score == -math.inf
            continue
        assert [(h.tokens, h.ended) for h in hyps] == [(h.tokens, h.ended) for h in expected]
        assert [h.score for h in hyps] == pytest.approx([h.score for h in expected], abs=1e-5)


@pytest.mark.parametrize("name, tau", TRANSFORMS)
def test_n_best_is_sorted_and_teacher_forcing_gives_the_same_scores(name, tau):
    model, src = _model(seed=2, eos_bias=2.5), _sources(seed=2)
    transform = get_transform(name, tau=tau)
    limits = torch.full((5,), 10)
    found = beam_search(model, src, transform, bos_id=BOS, eos_id=EOS, limits=limits, beam=5,
                        n_best=5, length_penalty=0.6)
    for row, hyps in zip(_rows(src), found):
        ranks = [ranking_score(h, 0.6) for h in hyps]
        assert ranks == sorted(ranks, reverse=True)
        real = [h for h in hyps if math.isfinite(h.score)]
        if not real:
            continue
        tgt_in, tgt_out, keep = target_tensors(real, bos_id=BOS, eos_id=EOS, pad_id=PAD)
        forced = sequence_scores(model, row.expand(len(real), -1), tgt_in, tgt_out, keep,
                                 transform)
        assert forced.tolist() == pytest.approx([h.score for h in real], abs=1e-4)


def test_renormalized_alpha_relu_scores_are_log_probabilities():
    model, src = _model(), _sources()
    transform = get_transform("1.5-relu", tau=0.2)
    logits = model(src, torch.full((5, 1), BOS))[:, -1]
    renormed = step_log_scores(transform, logits, renormalize=True)
    assert renormed.exp().sum(-1).tolist() == pytest.approx([1.0] * 5, abs=1e-5)
    zero = step_log_scores(transform, torch.full((1, VOCAB), -5.0), renormalize=True)
    assert bool(torch.isneginf(zero).all())
    softmax = get_transform("softmax")
    assert torch.equal(step_log_scores(softmax, logits, True), step_log_scores(softmax, logits))


def test_sparse_outputs_shrink_the_beam_rows():
    """With alpha-ReLU's zeros the number of live rows stays below sentences x beam."""
    model, src = _model(), _sources()
    transform = get_transform("1.5-relu", tau=0.9)
    rows = []
    original = model.step

    def counting_step(tokens, state):
        rows.append(tokens.shape[0])
        return original(tokens, state)

    model.step = counting_step
    beam_search(model, src, transform, bos_id=BOS, eos_id=EOS, limits=torch.full((5,), 8), beam=8)
    assert max(rows[1:]) < 5 * 8


@pytest.mark.parametrize("beam, n_best, message", [(0, 1, "beam must be at least 1"),
                                                   (2, 3, "n-best must be between 1 and")])
def test_bad_beam_settings_are_user_errors(beam, n_best, message):
    with pytest.raises(UserError, match=message):
        beam_search(_model(), _sources(), get_transform("softmax"), bos_id=BOS, eos_id=EOS,
                    limits=torch.full((5,), 4), beam=beam, n_best=n_best)


def _full_matrix(transform):
    """The same transform scored as before the fused path: log_scores over (R, V), then topk."""
    unfused = dataclasses.replace(transform, _top_log_scores=None)
    assert transform.fused_top_k and not unfused.fused_top_k
    return unfused


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("tau", [0.0, 0.3, 0.9])
@pytest.mark.parametrize("beam, n_best, lp", [(1, 1, 0.0), (2, 1, 0.0), (4, 3, 0.6), (8, 2, 0.0)])
def test_fused_alpha_relu_decodes_as_the_full_score_matrix(engine, tau, beam, n_best, lp,
                                                          monkeypatch):
    """Same hypotheses, same float64 scores to the last bit (tau 0.9: beams run short)."""
    monkeypatch.setenv("ARELU_ENGINE", engine)
    model, src = _model(seed=3), _sources(seed=3)
    fused = get_transform("1.5-relu", tau=tau)
    limits = torch.tensor([9, 7, 12, 4, 10])
    kwargs = dict(bos_id=BOS, eos_id=EOS, limits=limits)
    found = beam_search(model, src, fused, beam=beam, n_best=n_best, length_penalty=lp, **kwargs)
    assert found == beam_search(model, src, _full_matrix(fused), beam=beam, n_best=n_best,
                                length_penalty=lp, **kwargs)
    assert greedy(model, src, fused, **kwargs) == greedy(model, src, _full_matrix(fused),
                                                         **kwargs)


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("beam, n_best, lp", [(1, 1, 0.0), (4, 3, 0.6), (8, 2, 0.0)])
def test_fused_softmax_decodes_as_log_softmax_then_topk(engine, beam, n_best, lp, monkeypatch):
    """Same hypotheses; scores to float32 rounding (the fused path sums exp in its own order)."""
    monkeypatch.setenv("ARELU_ENGINE", engine)
    model, src = _model(seed=5), _sources(seed=5)
    fused = get_transform("softmax")
    kwargs = dict(bos_id=BOS, eos_id=EOS, limits=torch.tensor([9, 7, 12, 4, 10]))
    found = beam_search(model, src, fused, beam=beam, n_best=n_best, length_penalty=lp, **kwargs)
    expected = beam_search(model, src, _full_matrix(fused), beam=beam, n_best=n_best,
                           length_penalty=lp, **kwargs)
    found_greedy = greedy(model, src, fused, **kwargs)
    expected_greedy = greedy(model, src, _full_matrix(fused), **kwargs)
    for got, want in zip([h for hs in found for h in hs] + found_greedy,
                         [h for hs in expected for h in hs] + expected_greedy, strict=True):
        assert (got.tokens, got.ended) == (want.tokens, want.ended)
        assert got.score == pytest.approx(want.score, rel=1e-5, abs=1e-5)


@pytest.mark.parametrize("engine", ENGINES)
def test_an_empty_support_ends_beams_and_greedy_walks_on_as_before(engine, monkeypatch):
    """tau so high that no token is ever in the support: beam search returns each sentence's
    empty prefix with -inf, greedy follows the arg-max logit with score -inf, fused or not."""
    monkeypatch.setenv("ARELU_ENGINE", engine)
    model, src = _model(seed=4), _sources(seed=4)
    fused = get_transform("1.5-relu", tau=50.0)
    kwargs = dict(bos_id=BOS, eos_id=EOS, limits=torch.full((5,), 6))
    found = beam_search(model, src, fused, beam=3, **kwargs)
    assert found == [[Hypothesis([], -math.inf, ended=False)]] * 5
    assert found == beam_search(model, src, _full_matrix(fused), beam=3, **kwargs)
    walked = greedy(model, src, fused, **kwargs)
    assert walked == greedy(model, src, _full_matrix(fused), **kwargs)
    assert all(h.score == -math.inf for h in walked)
    assert walked == [dataclasses.replace(h, score=-math.inf)
                      for h in greedy(model, src, get_transform("softmax"), **kwargs)]


@pytest.mark.parametrize("name, tau", TRANSFORMS + [("1.5-entmax-bisect", 0.0), ("1.5-relu", 0.1)])
def test_step_top_scores_are_the_top_k_of_the_step_scores(name, tau):
    model, src = _model(seed=5), _sources(seed=5)
    logits = model(src, torch.full((5, 3), BOS))[:, -1]                    # (5, V)
    transform = get_transform(name, tau=tau)
    for renormalize in (False, True):
        full = step_log_scores(transform, logits, renormalize)
        for k in (1, 4):
            scores, tokens = step_top_scores(transform, logits, k, renormalize)
            if name == "softmax":  # the fused sum's own order: float32 rounding, same tokens
                assert torch.equal(tokens, full.topk(k, dim=1).indices)
                torch.testing.assert_close(scores, full.gather(1, tokens), rtol=0, atol=1e-6)
                continue
            assert torch.equal(scores, full.topk(k, dim=1).values)
            assert torch.equal(scores, full.gather(1, tokens))


def _nan_at_first_step(model, row):
    original = model.step

    def step(tokens, state):
        logits = original(tokens, state)
        logits[row, 7] = math.nan
        return logits
    model.step = step
    return model


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("name", ["softmax", "1.5-entmax", "sparsemax", "1.5-entmax-k100",
                                  "1.5-entmax-bisect", "1.5-relu"])
@pytest.mark.parametrize("beam, renormalize", [(1, False), (3, False), (1, True), (3, True)])
def test_nan_logits_stop_decoding_with_a_user_error(engine, name, beam, renormalize,
                                                    monkeypatch):
    monkeypatch.setenv("ARELU_ENGINE", engine)
    model, src = _nan_at_first_step(_model(), row=1), _sources()
    transform = get_transform(name, tau=0.1)
    kwargs = dict(bos_id=BOS, eos_id=EOS, limits=torch.full((5,), 5), renormalize=renormalize)
    with pytest.raises(UserError, match="NaN logits while decoding"):
        if beam == 1:
            greedy(model, src, transform, **kwargs)
        else:
            beam_search(model, src, transform, beam=beam, **kwargs)


def _nan_weights(model):
    """A checkpoint that diverged: every weight NaN."""
    with torch.no_grad():
        for param in model.parameters():
            param.fill_(math.nan)
    return model


@pytest.mark.parametrize("name", ["softmax", "1.5-entmax", "sparsemax", "1.5-entmax-k100",
                                  "1.5-entmax-bisect", "1.5-relu"])
@pytest.mark.parametrize("renormalize", [False, True])
def test_nan_weights_stop_teacher_forced_scoring_with_a_user_error(name, renormalize):
    model, src = _nan_weights(_model()), _sources()
    forced = target_tensors([Hypothesis([5, 6], 0.0, ended=True)] * 5, bos_id=BOS, eos_id=EOS,
                            pad_id=PAD)
    with pytest.raises(UserError, match="NaN logits while scoring: its weights are not finite"):
        sequence_scores(model, src, *forced, get_transform(name, tau=0.1),
                        renormalize=renormalize)
