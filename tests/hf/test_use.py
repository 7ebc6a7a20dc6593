"""use_transform's inputs (arelu_cli.hf.use and .transform): the analytic tau chosen and
printed, and one-line ValueError/TypeError for bad input."""

from __future__ import annotations

import copy
import subprocess
import sys

import pytest

pytest.importorskip("transformers")

import torch  # noqa: E402
from transformers import BartForCausalLM, LlamaModel

from arelu_cli.hf import use_transform
from arelu_cli.registry import get_transform
from arelu_cli.transforms.tau import analytic_tau

from .conftest import TAU, VOCAB, _config, make_model, tokens


def test_analytic_tau_for_the_models_vocabulary_is_chosen_and_printed(capsys):
    model = make_model("llama")
    transform = use_transform(model, "1.5-relu")
    want = analytic_tau(VOCAB, d_model=16, alpha=1.5).tau
    assert transform.tau == pytest.approx(want) and transform.tau > 0
    assert f"analytic tau = {want:.4f}" in capsys.readouterr().err


def test_given_tau_is_kept_and_not_printed(capsys):
    assert use_transform(make_model("gpt2"), "1.3-relu", tau=0.25).tau == 0.25
    assert capsys.readouterr().err == ""


class _Tokenizer:
    def __init__(self, size):
        self.size = size

    def __len__(self):
        return self.size


@pytest.mark.parametrize("make, name, kwargs, error, match", [
    (lambda: make_model("llama"), "1.5-rleu", {}, ValueError, "unknown output transform"),
    (lambda: make_model("llama"), "1.0-relu", {}, ValueError, r"outside \[1.05, 2\]"),
    (lambda: make_model("bart"), "0.8-entmax", {}, ValueError, r"outside \[1.05, 2\]"),
    (lambda: make_model("llama"), 1.5, {}, TypeError, "name such as"),
    (lambda: make_model("llama"), "softmax", {"tau": 0.3}, ValueError, "takes none"),
    (lambda: LlamaModel(_config("llama")), "1.5-relu", {}, ValueError, "has no LM head"),
    (lambda: torch.nn.Linear(2, 2), "1.5-relu", {}, TypeError, "transformers model"),
    (lambda: BartForCausalLM(_config("bart")), "1.5-relu", {}, ValueError,
     "computes its loss inside forward"),
    (lambda: make_model("llama"), "1.5-relu", {"tokenizer": _Tokenizer(VOCAB + 5)},
     ValueError, "resize_token_embeddings"),
])
def test_bad_input_is_a_one_line_error(make, name, kwargs, error, match):
    with pytest.raises(error, match=match) as info:
        use_transform(make(), name, **kwargs)
    assert "\n" not in str(info.value)


def test_a_tokenizer_that_fits_is_accepted():
    use_transform(make_model("llama"), "sparsemax", tokenizer=_Tokenizer(VOCAB - 3))


def test_generate_refuses_what_its_beam_search_cannot_do():
    model = make_model("llama")
    use_transform(model, "1.5-relu", tau=TAU)
    with pytest.raises(ValueError, match="num_beams"):
        model.generate(tokens(1, 3), num_beams=2, num_return_sequences=3)
    with pytest.raises(ValueError, match="max_length beyond the prompt"):
        model.generate(tokens(1, 3), num_beams=2, max_length=3)


@pytest.mark.parametrize("tau", [float("nan"), float("inf"), -float("inf"), "x"])
def test_a_tau_that_is_not_a_finite_number_is_refused(tau):
    with pytest.raises(ValueError, match="tau must be a finite number") as info:
        use_transform(make_model("llama"), "1.5-relu", tau=tau)
    assert "\n" not in str(info.value)


def test_max_length_counts_the_prompt():
    model = make_model("llama", scale=30.0)
    use_transform(model, "1.5-relu", tau=TAU)
    out = model.generate(tokens(2, 3), max_length=7, eos_token_id=-1)
    assert out.shape == (2, 7)


def test_a_deep_copy_runs_its_own_weights():
    model = make_model("llama", scale=30.0)
    use_transform(model, "1.5-relu", tau=TAU, fused=True)
    twin = copy.deepcopy(model)
    with torch.no_grad():
        twin.get_output_embeddings().weight.mul_(2)
    ids = tokens(2, 4)
    assert not torch.equal(twin(input_ids=ids).logits, model(input_ids=ids).logits)
    assert twin.generate.__self__ is twin and twin.forward.__self__ is twin


def test_import_without_transformers_says_what_to_install():
    code = ("import sys; sys.modules['transformers'] = None\n"
            "try:\n    import arelu_cli.hf\nexcept ImportError as e:\n    print(e)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.strip()
    assert out == 'arelu_cli.hf needs Hugging Face Transformers: pip install -e ".[hf]"'


def _trained(kind, fused, batch, accum, out):
    """The model after one Trainer step (plain SGD) over the same 4 examples, whose
    labels have different numbers of -100 (so the mean of micro-batch means would differ)."""
    from transformers import Trainer, TrainingArguments

    ids = tokens(4, 6)
    labels = ids.clone() if kind != "bart" else tokens(4, 6, seed=3)
    for row in range(4):
        labels[row, 6 - row:] = -100
    data = [{"input_ids": i, "labels": y} for i, y in zip(ids, labels)]
    model = make_model(kind, scale=30.0)
    use_transform(model, "1.5-relu", tau=TAU, fused=fused)
    args = TrainingArguments(str(out), max_steps=1, per_device_train_batch_size=batch,
                             gradient_accumulation_steps=accum, learning_rate=0.5, optim="sgd",
                             lr_scheduler_type="constant", report_to="none",
                             save_strategy="no", use_cpu=True, seed=0)
    Trainer(model=model, args=args, train_dataset=data).train()
    return model


@pytest.mark.parametrize("kind, fused", [("bart", False), ("llama", True)])
def test_trainer_accumulation_equals_one_batch(kind, fused, tmp_path):
    """Through the Trainer (its num_items_in_batch, its column filtering by the forward's
    signature): 2 x 2 accumulated examples step exactly as one batch of 4."""
    whole = _trained(kind, fused, 4, 1, tmp_path / "a")
    accumulated = _trained(kind, fused, 2, 2, tmp_path / "b")
    start = make_model(kind, scale=30.0)
    moved = 0.0
    for p, q, p0 in zip(whole.parameters(), accumulated.parameters(), start.parameters()):
        torch.testing.assert_close(q, p, rtol=1e-9, atol=1e-12)
        moved += float((p - p0).abs().sum())
    assert moved > 0


@pytest.mark.parametrize("kind, name, kwargs", [
    ("llama", "1.5-relu", {"tau": 0.3, "renormalize": True, "label_smoothing": 0.1}),
    ("gpt2", "1.5-relu", {"tau": 0.3, "fused": True, "chunk": 4, "label_smoothing": 0.1}),
    ("bart", "1.5-entmax", {}),
])
def test_the_choice_survives_save_and_load(tmp_path, kind, name, kwargs):
    """save_pretrained keeps the choice in config.json (config.arelu); use_transform(model)
    applies it to the reloaded model, whose loss then equals the original's (transformers
    alone would reload it with softmax cross-entropy)."""
    model = make_model(kind, scale=30.0)
    use_transform(model, name, **kwargs)
    model.save_pretrained(tmp_path)
    reloaded = type(model).from_pretrained(tmp_path).double()
    assert reloaded.config.arelu == model.config.arelu
    ids = tokens(2, 5)
    labels = ids if kind != "bart" else tokens(2, 4, seed=2)
    before = reloaded(input_ids=ids, labels=labels).loss              # softmax, as loaded
    again = use_transform(reloaded)
    assert again.name == name and again.tau == model.arelu_transform.tau
    assert (reloaded.arelu_renormalize, reloaded.arelu_chunk, reloaded.arelu_label_smoothing) \
        == (model.arelu_renormalize, model.arelu_chunk, model.arelu_label_smoothing)
    for m in (model, reloaded):
        m.train()
    want = model(input_ids=ids, labels=labels).loss
    torch.testing.assert_close(reloaded(input_ids=ids, labels=labels).loss, want)
    assert not torch.isclose(before.double(), want)     # transformers: a float32 loss


def test_no_stored_choice_or_settings_without_a_name_are_refused():
    model = make_model("llama")
    with pytest.raises(ValueError, match="holds no arelu choice"):
        use_transform(model)
    use_transform(model, "1.5-relu", tau=0.3)
    with pytest.raises(ValueError, match="name the transform"):
        use_transform(model, tau=0.5)
    with pytest.raises(ValueError, match=r"label_smoothing must be in \[0, 1\)"):
        use_transform(model, "1.5-relu", label_smoothing=1.0)


@pytest.mark.parametrize("before", [True, False])
def test_a_peft_model_trains_and_generates_with_the_transform(before):
    """LoRA through PEFT, with use_transform applied before get_peft_model or to its wrapper:
    the wrapper's loss is the transform's and its generate is arelu's."""
    peft = pytest.importorskip("peft")
    model = make_model("llama", scale=30.0)
    if before:
        use_transform(model, "1.5-relu", tau=TAU)
    wrapped = peft.get_peft_model(model, peft.LoraConfig(r=2, target_modules=["q_proj"]))
    if not before:
        use_transform(wrapped, "1.5-relu", tau=TAU)
    ids = tokens(2, 6)
    wrapped.train()
    loss = wrapped(input_ids=ids, labels=ids).loss
    with torch.no_grad():
        logits = type(model).forward(model, input_ids=ids).logits
    want = get_transform("1.5-relu", tau=TAU).loss(logits[:, :-1].reshape(-1, VOCAB),
                                                   ids[:, 1:].reshape(-1))
    torch.testing.assert_close(loss, want)
    wrapped.eval()
    got = wrapped.generate(input_ids=ids, max_new_tokens=3, eos_token_id=-1,
                           return_dict_in_generate=True)
    assert torch.equal(got.sequences, model.generate(ids, max_new_tokens=3,
                                                     eos_token_id=-1))


def test_a_lora_adapter_on_the_lm_head():
    """PEFT LoRA on lm_head (and q_proj): the head is still an LM head (unfused: the
    transform's loss of the adapted logits); the fused loss reads its base weight plus the
    adapter's B A, so loss and every gradient (the adapter's included) equal the unfused."""
    peft = pytest.importorskip("peft")
    from .test_loss import grads

    def wrapped():
        model = make_model("llama", scale=30.0).train()
        out = peft.get_peft_model(model, peft.LoraConfig(r=2, lora_alpha=4,
                                                         target_modules=["lm_head", "q_proj"]))
        torch.manual_seed(3)
        with torch.no_grad():
            for name, p in out.named_parameters():
                if "lora_B" in name:
                    p.normal_(0, 0.5)                    # an adapter that changes the logits
        return out

    ids = tokens(2, 6)
    results = []
    for fused in (False, True):
        model = wrapped()
        use_transform(model, "1.5-relu", tau=TAU, fused=fused)
        loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        results.append((loss.detach(), grads(model)))
        if not fused:
            inner = model.get_base_model()
            logits = type(inner).forward(inner, input_ids=ids).logits
            want = get_transform("1.5-relu", tau=TAU).loss(logits[:, :-1].reshape(-1, VOCAB),
                                                           ids[:, 1:].reshape(-1))
            torch.testing.assert_close(loss, want.detach())
    torch.testing.assert_close(results[1][0], results[0][0], rtol=1e-12, atol=1e-12)
    for got, want in zip(results[1][1], results[0][1]):
        torch.testing.assert_close(got, want, rtol=1e-9, atol=1e-12)
    head = model.get_base_model().get_output_embeddings()
    assert float(head.lora_B["default"].weight.grad.abs().sum()) > 0


def test_lora_dropout_on_the_lm_head_is_refused_fused():
    peft = pytest.importorskip("peft")
    model = peft.get_peft_model(make_model("llama"), peft.LoraConfig(
        r=2, target_modules=["lm_head"], lora_dropout=0.1))
    with pytest.raises(ValueError, match="lora_dropout=0.1"):
        use_transform(model, "1.5-relu", tau=TAU, fused=True)
    use_transform(model, "1.5-relu", tau=TAU)                     # unfused: fine
