"""The transforms' losses on Hugging Face's label conventions (arelu_cli.hf.loss and the
loss wiring of use_transform): equal to arelu's own loss on the same logits, float64."""

from __future__ import annotations

import pytest

pytest.importorskip("transformers")

import warnings  # noqa: E402

import torch  # noqa: E402

from arelu_cli.hf import compute_loss_func, use_transform
from arelu_cli.hf.loss import causal_loss, shift_left, token_loss
from arelu_cli.registry import get_transform

from .conftest import FAMILIES, TAU, VOCAB, make_model, tokens

IGNORE = -100


def _tau(name):
    return TAU if name.endswith("relu") else None


def _labels(kind: str) -> tuple[torch.Tensor, torch.Tensor]:
    """(inputs, labels) with padding: the last two labels of row 0 are -100."""
    ids = tokens(3, 6)
    labels = ids.clone() if kind in ("llama", "gpt2") else tokens(3, 5, seed=2)
    labels[0, -2:] = IGNORE
    return ids, labels


def _reference(model, name, ids, labels):
    """arelu's own loss (mean over kept targets) of the unchanged model's logits: shifted
    by hand for a causal LM, and the gradient of every parameter."""
    transform = get_transform(name, tau=TAU)
    model.zero_grad()
    if model.config.is_encoder_decoder:
        dec = model.prepare_decoder_input_ids_from_labels(labels=labels)
        logits = type(model).forward(model, input_ids=ids, decoder_input_ids=dec).logits
        z, y = logits.reshape(-1, VOCAB), labels.reshape(-1)
    else:
        logits = type(model).forward(model, input_ids=ids).logits
        z, y = logits[:, :-1].reshape(-1, VOCAB), labels[:, 1:].reshape(-1)
    loss = transform.loss(z, y, ignore_index=IGNORE, reduction="mean")
    loss.backward()
    return loss.detach(), grads(model)


def grads(model) -> list[torch.Tensor]:
    """Every parameter's gradient (zeros where none flowed, e.g. BART's unused ones)."""
    return [torch.zeros_like(p) if p.grad is None else p.grad.clone()
            for p in model.parameters()]


def _ours(model, **batch):
    model.zero_grad()
    loss = model(**batch).loss
    loss.backward()
    return loss.detach(), grads(model)


@pytest.mark.parametrize("kind", ["llama", "bart"])
@pytest.mark.parametrize("name", FAMILIES)
def test_loss_and_gradients_equal_arelus_own(kind, name):
    model = make_model(kind, scale=30.0)
    ids, labels = _labels(kind)
    want, want_grads = _reference(model, name, ids, labels)
    use_transform(model, name, tau=_tau(name))
    got, grads = _ours(model, input_ids=ids, labels=labels)
    torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)
    for g, w in zip(grads, want_grads):
        torch.testing.assert_close(g, w, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("kind", ["llama", "gpt2", "bart", "t5"])
def test_softmax_equals_transformers_cross_entropy(kind):
    """Shifting and -100 handled as transformers' own loss does (which computes a causal
    LM's loss in float32 even for float64 logits; ours keeps float64)."""
    model = make_model(kind)
    ids, labels = _labels(kind)
    native = model(input_ids=ids, labels=labels).loss.double()
    use_transform(model, "softmax")
    torch.testing.assert_close(model(input_ids=ids, labels=labels).loss, native, rtol=1e-6,
                               atol=1e-6)


def test_relu_gradient_is_p_minus_target_over_items():
    """Lemma 1 on HF's conventions: d loss / d logits = (p - e_y) / num_items at kept
    positions, 0 at ignored ones, with p = [z/2 - tau]_+^2 written out."""
    transform = get_transform("1.5-relu", tau=TAU)
    z = (3 * torch.randn(2, 5, VOCAB, dtype=torch.float64)).requires_grad_(True)
    labels = tokens(2, 5)
    labels[1, 2] = IGNORE
    causal_loss(transform, z, labels, num_items_in_batch=7).backward()
    y = shift_left(labels, IGNORE)
    p = torch.clamp(z.detach() / 2 - TAU, min=0) ** 2
    onehot = torch.nn.functional.one_hot(y.clamp(min=0), VOCAB).double()
    want = torch.where((y != IGNORE)[..., None], (p - onehot) / 7, 0.0)
    torch.testing.assert_close(z.grad, want, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("kind", ["llama", "bart"])
@pytest.mark.parametrize("name", ["1.5-relu", "1.5-entmax"])
def test_accumulation_with_num_items_equals_one_batch(kind, name):
    """Two micro-batches, each divided by the count of targets in both (the Trainer's
    num_items_in_batch), give the loss and gradients of the one batch of both."""
    model = make_model(kind, scale=30.0)
    use_transform(model, name, tau=_tau(name))
    ids, labels = _labels(kind)
    whole, whole_grads = _ours(model, input_ids=ids, labels=labels)
    kept = (shift_left(labels) if kind != "bart" else labels) != IGNORE
    items = kept.sum()
    model.zero_grad()
    total = 0.0
    for rows in (slice(0, 1), slice(1, 3)):
        loss = model(input_ids=ids[rows], labels=labels[rows], num_items_in_batch=items).loss
        loss.backward()
        total = total + loss.detach()
    torch.testing.assert_close(total, whole, rtol=1e-12, atol=1e-12)
    for g, w in zip(grads(model), whole_grads):
        torch.testing.assert_close(g, w, rtol=1e-10, atol=1e-12)
    assert items.item() < labels.numel()                # the padding was really left out


def test_ignored_positions_do_not_count():
    """Logits at positions whose target is -100 change nothing; the mean is over the rest."""
    transform = get_transform("1.5-relu", tau=TAU)
    z = 3 * torch.randn(2, 4, VOCAB, dtype=torch.float64)
    labels = tokens(2, 4)
    labels[0, 1:] = IGNORE
    other = z.clone()
    other[0, 1:] = 100 * torch.randn(3, VOCAB, dtype=torch.float64)
    assert torch.equal(token_loss(transform, z, labels), token_loss(transform, other, labels))
    kept = transform.loss(z[1], labels[1], reduction="sum") + transform.loss(
        z[0, :1], labels[0, :1], reduction="sum")
    torch.testing.assert_close(token_loss(transform, z, labels), kept / 5)


@pytest.mark.parametrize("smoothing", [0.0, 0.1])
def test_compute_loss_func_equals_the_wrapped_model(smoothing):
    """Trainer(compute_loss_func=...) on an unchanged causal LM gives use_transform's loss."""
    ids, labels = _labels("llama")
    model = make_model("llama", scale=30.0)
    func = compute_loss_func(model, "1.5-relu", tau=TAU, label_smoothing=smoothing)
    got = func(model(input_ids=ids), labels, num_items_in_batch=torch.tensor(9))
    use_transform(model, "1.5-relu", tau=TAU, label_smoothing=smoothing)
    want = model(input_ids=ids, labels=labels, num_items_in_batch=torch.tensor(9)).loss
    torch.testing.assert_close(got, want)


def test_compute_loss_func_refuses_a_seq2seq_model():
    """The Trainer drops the labels before the forward: BART would build its decoder inputs
    from input_ids and the loss would be silently wrong."""
    with pytest.raises(ValueError, match="use_transform") as info:
        compute_loss_func(make_model("bart"), "1.5-relu", tau=TAU)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("kind", ["llama", "bart"])
@pytest.mark.parametrize("name", ["1.5-relu", "softmax"])
def test_label_smoothing_is_the_transforms_own(kind, name):
    """use_transform(label_smoothing=eps): the transform's loss to the smoothed target, on
    the same shifted (causal) or unshifted (seq2seq) targets, and not the plain loss."""
    ids, labels = _labels(kind)
    model = make_model(kind, scale=30.0)
    use_transform(model, name, tau=_tau(name), label_smoothing=0.2)
    model.train()
    got = model(input_ids=ids, labels=labels).loss
    transform = get_transform(name, tau=TAU)
    if kind == "bart":
        dec = model.prepare_decoder_input_ids_from_labels(labels=labels)
        logits = type(model).forward(model, input_ids=ids, decoder_input_ids=dec).logits
        z, y = logits.reshape(-1, VOCAB), labels.reshape(-1)
    else:
        logits = type(model).forward(model, input_ids=ids).logits
        z, y = logits[:, :-1].reshape(-1, VOCAB), labels[:, 1:].reshape(-1)
    want = transform.loss(z, y, ignore_index=IGNORE, label_smoothing=0.2)
    torch.testing.assert_close(got, want)
    assert not torch.isclose(got, transform.loss(z, y, ignore_index=IGNORE))


@pytest.mark.parametrize("kind, fused", [("llama", False), ("gpt2", True), ("bart", False)])
def test_a_training_forward_without_labels_warns_once(kind, fused):
    """What a Trainer with label_smoothing_factor > 0 runs (it pops the labels and computes
    softmax cross-entropy itself) warns, once; with labels, or in eval, nothing."""
    ids, labels = _labels(kind)
    model = make_model(kind, scale=30.0)
    use_transform(model, "1.5-relu", tau=TAU, fused=fused)
    model.train()
    extra = {} if kind != "bart" else {
        "decoder_input_ids": model.prepare_decoder_input_ids_from_labels(labels=labels)}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model(input_ids=ids, labels=labels)
        with torch.no_grad():
            model(input_ids=ids, **extra)
        model.eval()
        model(input_ids=ids, **extra)
        model.train()
    with pytest.warns(UserWarning, match="label_smoothing_factor"):
        model(input_ids=ids, **extra)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model(input_ids=ids, **extra)                           # once per model


@pytest.mark.parametrize("name, fused", [("softmax", False), ("1.5-relu", False),
                                         ("1.5-relu", True)])
def test_a_trainer_step_whose_labels_are_all_ignored_keeps_the_weights_finite(name, fused,
                                                                               tmp_path):
    """Every label -100 (the Trainer's num_items_in_batch is then 0): the transform's
    gradients are exactly zero (:mod:`arelu_cli.transforms.reduction`), so Adam leaves every
    weight as it was instead of turning it NaN, and the next real batch trains."""
    from transformers import Trainer, TrainingArguments

    ids = tokens(4, 6)
    empty = [{"input_ids": i, "labels": torch.full_like(i, IGNORE)} for i in ids]
    model = make_model("llama", scale=30.0)
    use_transform(model, name, tau=_tau(name), fused=fused)
    start = [p.detach().clone() for p in model.parameters()]
    args = TrainingArguments(str(tmp_path), max_steps=1, per_device_train_batch_size=2,
                             gradient_accumulation_steps=2, learning_rate=0.1,
                             report_to="none", save_strategy="no", use_cpu=True, seed=0)
    Trainer(model=model, args=args, train_dataset=empty).train()
    for p, p0 in zip(model.parameters(), start):
        torch.testing.assert_close(p.detach(), p0, rtol=0, atol=0)
    real = [{"input_ids": i, "labels": i.clone()} for i in ids]
    Trainer(model=model, args=args, train_dataset=real).train()
    assert all(bool(torch.isfinite(p).all()) for p in model.parameters())
    assert any(not torch.equal(p.detach(), p0) for p, p0 in zip(model.parameters(), start))
