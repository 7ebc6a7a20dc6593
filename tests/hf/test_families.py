"""The fused output layer over every causal LM class of the installed transformers
(arelu_cli.hf.families and .head): each one a tiny config builds is either covered, with
fused and unfused float64 losses and gradients equal (a logit scale or soft-cap folded in),
or refused with a reason; the table of docs/transformers.md is the one the code
generates."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("transformers")

import torch  # noqa: E402

from arelu_cli.hf import families, use_transform

DOCS = Path(__file__).resolve().parents[2] / "docs" / "transformers.md"
CLASSES = sorted(families.causal_classes().items())
ROWS: dict[str, families.Family] = {}


def fused_equals_unfused(model, **options) -> None:
    """One training step's loss and every gradient, unfused then fused (tau 0: about half
    the vocabulary in the support), on the same weights; ``options`` go to
    ``use_transform``."""
    gen = torch.Generator().manual_seed(1)
    ids = torch.randint(3, families.VOCAB, (2, 6), generator=gen)
    labels = ids.clone()
    labels[1, :2] = -100
    results = []
    model.train()
    for fused in (False, True):
        use_transform(model, "1.5-relu", tau=0.0, fused=fused, **options)
        model.zero_grad(set_to_none=True)
        loss = model(input_ids=ids, labels=labels).loss
        loss.backward()
        results.append((loss.detach(), [torch.zeros_like(p) if p.grad is None else p.grad.clone()
                                        for p in model.parameters()]))
    (plain, plain_grads), (fused_loss, fused_grads) = results
    # A family that casts its logits to float32 (Mamba's) has a float32 unfused loss.
    tol = 1e-10 if plain.dtype == torch.float64 else 1e-5
    torch.testing.assert_close(fused_loss.to(plain.dtype), plain, rtol=tol, atol=tol)
    for got, want in zip(fused_grads, plain_grads):
        torch.testing.assert_close(got, want, rtol=10 * tol, atol=tol)
    assert any(float(g.abs().sum()) > 0 for g in fused_grads)


@pytest.mark.parametrize("cls, model_types", CLASSES, ids=[c for c, _ in CLASSES])
def test_every_causal_family_is_exact_or_refused(cls, model_types):
    row, model = families.judge(cls, model_types)
    ROWS[cls] = row
    if row.status == "covered":
        fused_equals_unfused(model)
    elif row.status == "refused":
        with pytest.raises(ValueError) as info:
            use_transform(model, "1.5-relu", tau=0.0, fused=True)
        assert str(info.value) == row.detail and "\n" not in row.detail
    else:
        assert row.detail                                       # why it was not built


def test_most_families_are_covered():
    rows = [ROWS.get(c) or families.judge(c, t)[0] for c, t in CLASSES]
    counts = {s: sum(r.status == s for r in rows) for s in ("covered", "refused", "not built")}
    assert counts["covered"] >= 120 and counts["covered"] > 2 * counts["not built"]
    covered = {r.cls for r in rows if r.status == "covered"}
    for name in ("LlamaForCausalLM", "Qwen2ForCausalLM", "Qwen3ForCausalLM",
                 "MistralForCausalLM", "Phi3ForCausalLM", "GPTNeoXForCausalLM",
                 "GraniteForCausalLM", "CohereForCausalLM", "GPT2LMHeadModel",
                 "OlmoForCausalLM", "Olmo2ForCausalLM", "GemmaForCausalLM"):
        assert name in covered, name


def test_the_docs_table_is_the_generated_one():
    """docs/transformers.md lists what the code finds (regenerate it with
    python -m arelu_cli.hf.families --write docs/transformers.md)."""
    rows = [ROWS.get(c) or families.judge(c, t)[0] for c, t in CLASSES]
    assert families.documented(DOCS.read_text()) == families.markdown(rows)


def _tiny(kind: str, **config):
    import transformers

    cls = getattr(transformers, kind)
    model = cls(families.tiny_config(lambda **kw: cls.config_class(**{**kw, **config})))
    return model.double().eval()


@pytest.mark.parametrize("kind, config, scale, source", [
    ("CohereForCausalLM", {"logit_scale": 0.25}, 0.25, "logit_scale"),
    ("GraniteForCausalLM", {"logits_scaling": 4.0}, 0.25, "1 / logits_scaling"),
    ("LlamaForCausalLM", {}, 1.0, ""),
])
def test_a_logit_scale_is_found_in_the_config_and_folded_in(kind, config, scale, source):
    from arelu_cli.hf.head import fused_head

    model = _tiny(kind, **config)
    head = fused_head(model)
    assert (head.scale, head.source) == (scale, source)
    fused_equals_unfused(model)


@pytest.mark.parametrize("dtype", [torch.float64, torch.bfloat16])
def test_a_soft_cap_is_found_in_any_precision(dtype):
    """Gemma 2's cap * tanh(z / cap) is close to z for small logits; the probe's large
    logits tell them apart even in bf16."""
    from arelu_cli.hf.head import fused_head

    model = _tiny("Gemma2ForCausalLM").to(dtype)
    head = fused_head(model)
    assert (head.softcap, head.cap_source, head.scale) == (30.0, "final_logit_softcapping", 1.0)
    assert head.describe() == ("final_logit_softcapping * tanh(lm_head(x) / "
                               "final_logit_softcapping)")
    model.config.final_logit_softcapping = None                # no cap: none applied
    assert fused_head(model).softcap is None


@pytest.mark.parametrize("eps", [0.0, 0.1])
def test_a_soft_cap_is_applied_by_the_fused_loss(eps):
    """A cap of 2 bends the tiny Gemma 2's logits (a cap of 30 would barely touch them):
    the fused loss and every gradient equal the model's own capped logits' in float64,
    label smoothed or not, and differ from the loss without the cap."""
    model = _tiny("Gemma2ForCausalLM", final_logit_softcapping=2.0)
    with torch.no_grad():
        model.get_output_embeddings().weight.mul_(20.0)          # logits of several units
    fused_equals_unfused(model, label_smoothing=eps)
    ids = torch.randint(3, families.VOCAB, (2, 6), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        capped = model(input_ids=ids, labels=ids).loss
        model.config.final_logit_softcapping = None
        use_transform(model, "1.5-relu", tau=0.0, fused=True, label_smoothing=eps)
        assert abs(float(capped - model(input_ids=ids, labels=ids).loss)) > 1e-3


def test_a_router_loss_is_refused():
    model = _tiny("Qwen2MoeForCausalLM", output_router_logits=True)
    with pytest.raises(ValueError, match="output_router_logits=False"):
        use_transform(model, "1.5-relu", tau=0.0, fused=True)


def test_a_head_that_transforms_before_its_linear_map_is_covered():
    """BERT-style heads (dense, activation, norm, then the decoder): the fused loss reads
    the decoder's input, so it is exact there too."""
    model = _tiny("BertLMHeadModel")
    assert model.get_output_embeddings() is model.cls.predictions.decoder
    fused_equals_unfused(model)
