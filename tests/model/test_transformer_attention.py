"""The Transformer with each attention transform: padding and the future stay unseen,
cached step-by-step decoding (greedy and beam search) equals full recomputation, the
weights can be kept for the analyses, and a tiny model trains with a finite loss."""

import math

import pytest
import torch

from arelu_cli.config import ModelConfig
from arelu_cli.decode.search import beam_search, sequence_scores, target_tensors
from arelu_cli.model.transformer import Transformer
from arelu_cli.registry import get_transform

PAD, BOS, EOS, VOCAB = 0, 1, 2, 40
ATTENTIONS = {
    "softmax": {},
    "sparsemax": {"attention": "sparsemax"},
    "1.5-entmax": {"attention": "1.5-entmax"},
    "1.5-relu-raw": {"attention": "1.5-relu"},
    "1.5-relu-estimated": {"attention": "1.5-relu", "attention_relu": "estimated"},
    "1.5-relu-renormalized": {"attention": "1.5-relu", "attention_relu": "renormalized"},
    "mixed": {"attention_encoder": "sparsemax", "attention_decoder": "1.5-relu",
              "attention_cross": "1.5-entmax", "attention_relu": "renormalized",
              "attention_tau": -0.1},
}
pytestmark = [pytest.mark.usefixtures("one_thread"),
              pytest.mark.parametrize("attention", list(ATTENTIONS))]


def _model(attention, seed=0, **extra):
    torch.manual_seed(seed)
    settings = {"dropout": 0.0, "attention_dropout": 0.0} | ATTENTIONS[attention] | extra
    cfg = ModelConfig(d_model=32, encoder_layers=2, decoder_layers=2, heads=4, d_ff=64,
                      max_positions=64, **settings)
    return Transformer(cfg, VOCAB, VOCAB, PAD).eval()


def _batch(seed=0):
    gen = torch.Generator().manual_seed(seed)
    src = torch.randint(3, VOCAB, (3, 7), generator=gen)
    tgt = torch.randint(3, VOCAB, (3, 6), generator=gen)
    src[0, 5:], tgt[1, 4:] = PAD, PAD
    return src, tgt


@torch.no_grad()
def test_padding_and_the_future_are_never_attended(attention):
    model = _model(attention)
    src, tgt = _batch()
    assert torch.allclose(model(src[:1], tgt[:1]), model(src[:1, :5], tgt[:1]), atol=1e-5)
    changed = tgt.clone()
    changed[:, 3:] = 9
    assert torch.allclose(model(src, tgt)[:, :3], model(src, changed)[:, :3], atol=1e-6)


@torch.no_grad()
def test_cached_steps_equal_full_recomputation(attention):
    """In float64: renormalized alpha-ReLU turns the rounding of a tiny support's weights
    into O(1) relative changes, so float32 sums in another order differ by ~1e-5. (Torch's
    fused softmax kernels differ by ~1e-7 between their causal and cached calls even there.)"""
    model = _model(attention).double()
    tol = 1e-6 if attention == "softmax" else 1e-10
    src, tgt = _batch()
    tgt_in = torch.cat([torch.full((3, 1), BOS), tgt[:, :-1]], dim=1)
    full = model(src, tgt_in)                                             # (B, T, V)
    memory, src_mask = model.encode(src)
    state = model.start(memory, src_mask)
    steps = torch.stack([model.step(tgt_in[:, t], state) for t in range(tgt_in.shape[1])], 1)
    assert torch.allclose(steps, full, rtol=0.0, atol=tol)
    # Reordering the cache (as beam search does) reorders the next step's logits alike.
    state = model.start(memory, src_mask)
    model.step(tgt_in[:, 0], state)
    order = torch.tensor([2, 0, 0])
    picked = state.select(order)
    assert torch.allclose(model.step(tgt_in[order, 1], picked), full[order, 1], rtol=0.0,
                          atol=tol)


@torch.no_grad()
def test_beam_search_scores_equal_teacher_forced_scores(attention):
    """Each beam hypothesis, decoded with the cache, gets the score a full teacher-forced
    pass gives its tokens."""
    model, transform = _model(attention, seed=1), get_transform("softmax")
    src, _ = _batch(1)
    hyps = beam_search(model, src, transform, bos_id=BOS, eos_id=EOS, beam=3, n_best=3,
                       limits=torch.full((3,), 6))
    flat = [h for sentence in hyps for h in sentence]
    rows = torch.tensor([i for i, sentence in enumerate(hyps) for _ in sentence])
    forced = target_tensors(flat, bos_id=BOS, eos_id=EOS, pad_id=PAD)
    scores = sequence_scores(model, src[rows], *forced, transform)
    assert len(flat) == 9
    assert torch.allclose(scores, torch.tensor([h.score for h in flat], dtype=torch.float64),
                          atol=1e-4)


@torch.no_grad()
def test_kept_weights_are_exact_zeros_where_masked(attention):
    model = _model(attention)
    src, tgt = _batch()
    modules = [model.encoder[0].attn, model.decoder[0].self_attn, model.decoder[0].cross_attn]
    plain = model(src, tgt)
    for module in modules:
        module.keep_weights = True
    assert torch.allclose(model(src, tgt), plain, atol=1e-5)  # keeping them changes nothing
    enc, dec, cross = (module.weights for module in modules)
    assert enc.shape == (3, 4, 7, 7) and dec.shape == (3, 4, 6, 6) and cross.shape == (3, 4, 6, 7)
    assert torch.all(enc[0, :, :, 5:] == 0) and torch.all(cross[0, :, :, 5:] == 0)
    assert torch.all(dec.triu(1) == 0)
    if model.encoder[0].attn.transform.family != "relu":
        assert torch.allclose(cross.sum(-1), torch.ones(3, 4, 6), atol=1e-5)
    if model.decoder[0].self_attn.transform.variant == "renormalized":
        assert torch.all(dec.sum(-1) <= 1 + 1e-6)  # S / (S + eps) of each row's raw sum S


def test_a_tiny_model_trains_with_a_finite_loss(attention):
    """Five Adam steps on one batch, attention dropout on: the loss stays finite and falls."""
    model = _model(attention, attention_dropout=0.1).train()
    src, tgt = _batch()
    tgt_in = torch.cat([torch.full((3, 1), BOS), tgt[:, :-1]], dim=1)
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    losses = []
    for _ in range(5):
        logits = model(src, tgt_in)
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, VOCAB), tgt.reshape(-1),
                                                 ignore_index=PAD)
        optimizer.zero_grad()
        loss.backward()
        assert all(torch.isfinite(p.grad).all() for p in model.parameters() if p.grad is not None)
        optimizer.step()
        losses.append(loss.item())
    assert all(math.isfinite(x) for x in losses) and losses[-1] < losses[0]
