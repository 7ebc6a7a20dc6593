"""The wrapped forwards (arelu_cli.hf.forward): the fused output layer equals the unfused
loss and gradients on Llama and GPT-2, label smoothed or not, never returns logits in
training, and is refused where it would not be exact."""

from __future__ import annotations

import pytest

pytest.importorskip("transformers")

import torch  # noqa: E402

from arelu_cli.hf import use_transform

from .conftest import TAU, make_model, tokens
from .test_loss import grads


@pytest.mark.parametrize("kind", ["llama", "gpt2"])
@pytest.mark.parametrize("items", [None, 11])
@pytest.mark.parametrize("eps", [0.0, 0.1])
def test_fused_equals_unfused(kind, items, eps):
    """With and without label smoothing (``eps``), the Trainer's ``num_items_in_batch`` or
    the mean."""
    ids = tokens(3, 6)
    labels = ids.clone()
    labels[1, :2] = -100
    extra = {} if items is None else {"num_items_in_batch": torch.tensor(items)}
    results = []
    for fused in (False, True):
        model = make_model(kind, scale=30.0).train()
        use_transform(model, "1.5-relu", tau=TAU, fused=fused, label_smoothing=eps)
        out = model(input_ids=ids, labels=labels, **extra)
        out.loss.backward()
        results.append((out, grads(model)))
    (plain, plain_grads), (fused, fused_grads) = results
    assert fused.logits is None and plain.logits is not None
    torch.testing.assert_close(fused.loss, plain.loss, rtol=1e-12, atol=1e-12)
    for g, w in zip(fused_grads, plain_grads):
        torch.testing.assert_close(g, w, rtol=1e-9, atol=1e-12)
    assert any(g.abs().sum() > 0 for g in fused_grads)


def test_fused_model_in_eval_returns_logits_and_the_same_loss():
    ids = tokens(2, 5)
    model = make_model("llama", scale=30.0)
    use_transform(model, "1.5-relu", tau=TAU, fused=True)
    evaluated = model(input_ids=ids, labels=ids)
    train = model.train()(input_ids=ids, labels=ids)
    assert evaluated.logits.shape == (2, 5, model.config.vocab_size)
    torch.testing.assert_close(evaluated.loss, train.loss.detach(), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("kind, name, why", [
    ("bart", "1.5-relu", "causal LMs"), ("llama", "softmax", "alpha-ReLU")])
def test_fused_refused_where_not_exact(kind, name, why):
    with pytest.raises(ValueError, match=why):
        use_transform(make_model(kind), name, tau=TAU if name.endswith("relu") else None,
                      fused=True)


def test_use_transform_again_replaces_the_fused_forward():
    model = make_model("gpt2", scale=30.0).train()
    use_transform(model, "1.5-relu", tau=TAU, fused=True)
    use_transform(model, "1.5-relu", tau=TAU)
    assert model(input_ids=tokens(1, 4), labels=tokens(1, 4)).logits is not None


@pytest.mark.parametrize("fused", [False, True])
def test_trls_fused_lm_head_is_refused_with_what_to_do(fused):
    """TRL's trainers call model(..., fused_lm_head=True) and take softmax log-probabilities
    from their own head: the transform's loss would never be computed."""
    model = make_model("llama", scale=30.0).train()
    use_transform(model, "1.5-relu", tau=TAU, fused=fused)
    ids = tokens(1, 4)
    with pytest.raises(ValueError, match="compute_loss_func=compute_loss_func") as info:
        model(input_ids=ids, labels=ids, fused_lm_head=True)
    assert "\n" not in str(info.value)
    assert model(input_ids=ids, labels=ids, fused_lm_head=False).loss is not None
