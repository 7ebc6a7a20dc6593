"""The model with alpha-ReLU's fused output loss: the same loss, parameter gradients and
logged statistics as logits + loss, label smoothed or not, in float64 and under bf16
autocast."""

import pytest
import torch

from arelu_cli.config import ModelConfig
from arelu_cli.model.fused_output import FusedOutputLoss
from arelu_cli.model.transformer import Transformer
from arelu_cli.model.output_stats import batch_stats, hidden_stats
from arelu_cli.registry import get_transform

PAD, VOCAB = 0, 60


def _model(tie: bool, dtype=torch.float64) -> Transformer:
    cfg = ModelConfig(d_model=16, encoder_layers=1, decoder_layers=2, heads=2, d_ff=32,
                      dropout=0.0, attention_dropout=0.0, share_embeddings=tie, tie_output=tie,
                      max_positions=32)
    torch.manual_seed(0)
    model = Transformer(cfg, VOCAB, VOCAB, PAD).to(dtype)
    with torch.no_grad():  # a nonzero bias, so that its gradient is tested too
        model.output.bias.normal_(0.0, 0.3)
    return model


def _batch():
    gen = torch.Generator().manual_seed(1)
    src = torch.randint(4, VOCAB, (3, 7), generator=gen)
    tgt_out = torch.randint(4, VOCAB, (3, 6), generator=gen)
    src[0, 5:], tgt_out[1, 4:] = PAD, PAD
    tgt_in = torch.cat([torch.ones(3, 1, dtype=torch.long), tgt_out[:, :-1]], dim=1)
    keep = tgt_out != PAD
    return src, tgt_in, keep, tgt_out[keep]


def _grads(model: Transformer) -> dict[str, torch.Tensor]:
    grads = {name: p.grad.clone() for name, p in model.named_parameters()}
    model.zero_grad(set_to_none=True)
    return grads


def _both(model: Transformer, transform, scale: float = 1.0, eps: float = 0.0):
    """(loss, grads) unfused (logits + loss) and fused, label smoothing ``eps``."""
    src, tgt_in, keep, target = _batch()
    logits = model(src, tgt_in, keep)
    logits = logits.to(torch.promote_types(logits.dtype, torch.float32))  # the trainer's .float()
    unfused = transform.loss(logits, target, reduction="sum", reuse_logits=True,
                             label_smoothing=eps)
    (unfused * scale).backward()
    reference = _grads(model)
    fused, hidden = FusedOutputLoss(model, transform, eps)(src, tgt_in, keep, target)
    (fused * scale).backward()
    assert hidden.shape == (int(keep.sum()), 16) and not hidden.requires_grad
    return (unfused, reference), (fused, _grads(model))


@pytest.mark.parametrize("tie", [False, True], ids=["untied", "tied"])
@pytest.mark.parametrize("tau, eps", [(0.0, 0.0), (0.3, 0.0), (0.3, 0.1)])
def test_same_loss_and_gradients_in_float64(tie, tau, eps):
    model = _model(tie)
    (loss, ref), (fused, grads) = _both(model, get_transform("1.5-relu", tau=tau), scale=0.1,
                                        eps=eps)
    assert fused.dtype == torch.float64
    torch.testing.assert_close(fused, loss, rtol=1e-12, atol=1e-12)
    assert ref.keys() == grads.keys()
    for name in ref:
        torch.testing.assert_close(grads[name], ref[name], rtol=1e-10, atol=1e-12, msg=name)


def test_bf16_autocast_gives_an_fp32_loss_close_to_the_unfused_one():
    model = _model(tie=False, dtype=torch.float32)
    transform = get_transform("1.5-relu", tau=0.2)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        (loss, ref), (fused, grads) = _both(model, transform)
    assert fused.dtype == torch.float32
    torch.testing.assert_close(fused, loss, rtol=1e-3, atol=1e-3)
    for name in ref:  # bf16 matmuls both ways; only their summation order may differ
        assert grads[name].dtype == torch.float32
        torch.testing.assert_close(grads[name], ref[name], rtol=2e-2, atol=1e-2, msg=name)


def test_hidden_stats_are_the_logit_stats():
    model = _model(tie=False, dtype=torch.float32)
    src, tgt_in, keep, _ = _batch()
    transform = get_transform("1.5-relu", tau=0.1)
    with torch.no_grad():
        hidden = model.features(src, tgt_in, keep)
        expected = batch_stats(model.output(hidden), transform, rows=5)
    got = hidden_stats(hidden, model.output, transform, rows=5, chunk=4)
    assert got.keys() == expected.keys()
    for key in expected:
        assert got[key] == pytest.approx(expected[key], rel=1e-5), key


def test_only_alpha_relu_has_a_fused_loss():
    with pytest.raises(ValueError, match="alpha-ReLU"):
        FusedOutputLoss(_model(tie=False), get_transform("softmax"))
