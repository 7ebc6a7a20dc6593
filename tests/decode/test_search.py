"""Greedy search: cached steps agree with recomputing the prefix, eos and length limits."""

import math

import torch

from arelu_cli.config import DecodeConfig, ModelConfig
from arelu_cli.decode.search import greedy, max_lengths
from arelu_cli.model.transformer import Transformer
from arelu_cli.registry import get_transform

PAD, BOS, EOS = 0, 1, 2
CFG = ModelConfig(d_model=32, encoder_layers=1, decoder_layers=2, heads=2, d_ff=64, dropout=0.0,
                  attention_dropout=0.0, max_positions=64)


def _model(seed=0, vocab=40):
    torch.manual_seed(seed)
    return Transformer(CFG, vocab, vocab, PAD).eval()


def _naive_greedy(model, src, limit):
    """Greedy search that recomputes the whole prefix at every step (no cache)."""
    tokens = torch.tensor([[BOS]])
    for _ in range(limit):
        nxt = int(model(src, tokens)[0, -1].argmax())
        tokens = torch.cat([tokens, torch.tensor([[nxt]])], dim=1)
        if nxt == EOS:
            break
    out = tokens[0, 1:].tolist()
    return out[:out.index(EOS)] if EOS in out else out


def test_cached_greedy_equals_recomputing_the_prefix():
    model = _model()
    src = torch.randint(4, 40, (4, 6), generator=torch.Generator().manual_seed(0))
    src[1, 4:] = PAD
    limits = torch.tensor([12, 9, 12, 3])
    hyps = greedy(model, src, get_transform("softmax"), bos_id=BOS, eos_id=EOS, limits=limits)
    for i, hyp in enumerate(hyps):
        row = src[i:i + 1, :int((src[i] != PAD).sum())]
        assert hyp.tokens == _naive_greedy(model, row, int(limits[i]))
        assert len(hyp.tokens) <= limits[i]


def test_stops_at_eos_and_scores_with_the_transform():
    model = _model()
    with torch.no_grad():  # make eos the arg-max everywhere
        model.output.bias.fill_(0.0)
        model.output.bias[EOS] = 50.0
    src = torch.randint(4, 40, (2, 5))
    for name in ("softmax", "1.5-entmax", "1.5-relu"):
        hyps = greedy(model, src, get_transform(name, tau=0.1), bos_id=BOS, eos_id=EOS,
                      limits=torch.tensor([10, 10]))
        assert [h.tokens for h in hyps] == [[], []]
        if name == "1.5-relu":  # unnormalized: log [(α-1) z_eos - τ]_+^2 with z_eos near 50
            assert all(math.isfinite(h.score) and h.score > 5.0 for h in hyps)
        else:  # a log-probability
            assert all(h.score <= 1e-6 for h in hyps)


def test_max_lengths():
    src = torch.tensor([[5, 6, 7, 2], [5, 2, 0, 0]])
    cfg = DecodeConfig(max_length_ratio=1.5, max_length_offset=2)
    assert max_lengths(src, PAD, cfg, cap=100).tolist() == [8, 5]
    assert max_lengths(src, PAD, cfg, cap=6).tolist() == [6, 5]
