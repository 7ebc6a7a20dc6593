"""The Transformer: shapes, masks (no attention to padding or the future), cached decoding,
the Lemma's logit variance at initialization, and overfitting a tiny batch per transform."""

import math

import pytest
import torch

from arelu_cli.config import ModelConfig
from arelu_cli.model.transformer import Transformer
from arelu_cli.registry import PAPER_TRANSFORMS, get_transform

PAD = 0
CFG = ModelConfig(d_model=32, encoder_layers=2, decoder_layers=2, heads=4, d_ff=64, dropout=0.0,
                  attention_dropout=0.0, max_positions=64)


def _model(cfg=CFG, vocab=50, seed=0):
    torch.manual_seed(seed)
    return Transformer(cfg, vocab, vocab, PAD).eval()


def _batch(seed=0, vocab=50):
    gen = torch.Generator().manual_seed(seed)
    src = torch.randint(4, vocab, (3, 7), generator=gen)
    tgt = torch.randint(4, vocab, (3, 5), generator=gen)
    src[0, 5:], tgt[1, 3:] = PAD, PAD  # right padding
    return src, tgt


def test_shapes_and_keep_mask():
    model = _model()
    src, tgt = _batch()
    assert model(src, tgt).shape == (3, 5, 50)
    keep = tgt != PAD
    assert torch.allclose(model(src, tgt, keep), model(src, tgt)[keep], atol=1e-6)
    hidden = model.features(src, tgt, keep)  # what a fused output loss takes
    assert hidden.shape == (int(keep.sum()), 32)
    assert torch.equal(model.output(hidden), model(src, tgt, keep))


def test_padding_in_the_source_is_never_attended():
    """A padded source gives the same encoder states and logits as the unpadded one."""
    model = _model()
    src, tgt = _batch()
    memory, mask = model.encode(src)
    short_memory, _ = model.encode(src[0:1, :5])
    assert torch.allclose(memory[0, :5], short_memory[0], atol=1e-5)
    assert torch.allclose(model(src[0:1], tgt[0:1]), model(src[0:1, :5], tgt[0:1]), atol=1e-5)
    assert mask.shape == (3, 1, 1, 7) and not mask[0, 0, 0, 5:].any()


def test_the_future_is_never_attended():
    model = _model()
    src, tgt = _batch()
    changed = tgt.clone()
    changed[:, 3:] = 9
    assert torch.allclose(model(src, tgt)[:, :3], model(src, changed)[:, :3], atol=1e-6)
    assert not torch.allclose(model(src, tgt)[:, 3:], model(src, changed)[:, 3:], atol=1e-3)


def test_cached_steps_match_the_teacher_forced_decoder():
    model = _model()
    src, tgt = _batch()
    full = model(src, tgt)  # (B, T, V)
    memory, mask = model.encode(src)
    state = model.start(memory, mask)
    for t in range(tgt.shape[1]):
        assert torch.allclose(model.step(tgt[:, t], state), full[:, t], atol=1e-5)
    picked = state.select(torch.tensor([2, 0]))
    assert picked.self_kv[0][0].shape[0] == 2 and picked.step == tgt.shape[1]


def test_initial_logits_follow_the_lemma():
    """Var z = 2 d_model / (d_model + d_vocab) for an untrained model (Lemma var_transformer)."""
    cfg = ModelConfig(d_model=64, encoder_layers=1, decoder_layers=1, heads=4, d_ff=128,
                      dropout=0.0, attention_dropout=0.0)
    vocab = 2000
    model = _model(cfg, vocab)
    src, tgt = _batch(vocab=vocab)
    with torch.no_grad():
        logits = model(src, tgt, tgt != PAD)
    expected = 2 * 64 / (64 + vocab)
    assert logits.var().item() == pytest.approx(expected, rel=0.1)
    assert abs(logits.mean().item()) < 0.1 * math.sqrt(expected)


def test_shared_and_tied_embeddings():
    cfg = ModelConfig(d_model=16, encoder_layers=1, decoder_layers=1, heads=2, d_ff=32,
                      share_embeddings=True, tie_output=True)
    model = Transformer(cfg, 30, 30)
    assert model.src_embed is model.tgt_embed and model.output.weight is model.tgt_embed.weight
    assert model.num_parameters() < Transformer(ModelConfig(d_model=16, encoder_layers=1,
                                                            decoder_layers=1, heads=2, d_ff=32),
                                                30, 30).num_parameters()


@pytest.mark.parametrize("name", PAPER_TRANSFORMS)
def test_overfits_a_tiny_batch(name, one_thread):
    """At most 150 Adam steps; training stops at the first step whose logits already pass the
    final check (no dropout: the training forward is the evaluation forward), 9 to 40 steps."""
    model = _model(seed=1).train()
    src, tgt_out = _batch(seed=1)
    tgt_in = torch.cat([torch.ones(3, 1, dtype=torch.long), tgt_out[:, :-1]], dim=1)
    keep = tgt_out != PAD
    transform = get_transform(name, tau=0.2)
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    for _ in range(150):
        logits = model(src, tgt_in, keep)
        right = bool((logits.detach().argmax(-1) == tgt_out[keep]).all())  # before reuse_logits
        loss = transform.loss(logits, tgt_out[keep], reuse_logits=True)
        if right and loss.item() < 0.05:
            break
        opt.zero_grad()
        loss.backward()
        opt.step()
    with torch.no_grad():
        logits = model.eval()(src, tgt_in, keep)
    assert (logits.argmax(-1) == tgt_out[keep]).all()
    assert float(transform.loss(logits, tgt_out[keep])) < 0.05


def test_dropout_keeps_the_expectation_and_its_gradient_matches_its_mask():
    from arelu_cli.model.transformer import Dropout

    torch.manual_seed(0)
    drop = Dropout(0.25).train()
    x = torch.ones(200, 500, requires_grad=True)
    y = drop(x)
    assert abs(float((y == 0).float().mean()) - 0.25) < 0.01
    assert float(y.detach().mean()) == pytest.approx(1.0, abs=0.01)
    y.sum().backward()
    assert torch.equal(x.grad, y.detach())  # d y / d x is the scaled mask, which y equals here
    assert drop.eval()(x) is x
