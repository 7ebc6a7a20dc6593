"""Beam search: beam 1 is greedy, n-best lists are sorted, pruning -inf candidates matches a
brute-force beam search that keeps them, teacher-forced scores equal decoding scores."""

import math

import pytest
import torch

from arelu_cli.config import ModelConfig
from arelu_cli.decode import (Hypothesis, beam_search, greedy, ranking_score, sequence_scores,
                              step_log_scores, target_tensors)
from arelu_cli.errors import UserError
from arelu_cli.model import Transformer
from arelu_cli.registry import get_transform

pytestmark = pytest.mark.usefixtures("one_thread")

PAD, BOS, EOS, VOCAB = 0, 1, 2, 40
CFG = ModelConfig(d_model=32, encoder_layers=1, decoder_layers=2, heads=2, d_ff=64, dropout=0.0,
                  attention_dropout=0.0, max_positions=64)
# tau 0.9 leaves about 3 of 40 outputs of this random model non-zero: beams of 4 run short.
TRANSFORMS = [("softmax", 0.0), ("1.5-entmax", 0.0), ("sparsemax", 0.0), ("1.5-relu", 0.9)]


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
            assert b.score == pytest.approx(g.score, rel=1e-9, abs=1e-9)
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
