"""model.generate after use_transform (arelu_cli.hf.generate and .search): the tokens and
scores of arelu's own greedy and beam search (arelu_cli.decode.search) driven by a reference
adapter that reruns the whole sequence at every step (no cache), so the cached adapter's
positions, padding and reordering are checked against a plain forward; greedy equals
transformers' own greedy; sampling never draws a token of probability zero."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

pytest.importorskip("transformers")

import torch  # noqa: E402

from arelu_cli.hf import use_transform
from arelu_cli.hf.generate import pack_hypotheses
from arelu_cli.decode.search import beam_search, greedy
from arelu_cli.registry import get_transform

from .conftest import EOS, FAMILIES, PAD, TAU, make_model, tokens


@dataclass
class _Full:
    seq: torch.Tensor          # (R, t) everything so far (causal) or the decoder prefix
    mask: torch.Tensor         # (R, S) causal: of seq; seq2seq: of the source
    src: torch.Tensor | None   # seq2seq: (R, S) the source
    first: bool = True

    def select(self, rows):
        pick = lambda t: None if t is None else t.index_select(0, rows)  # noqa: E731
        return _Full(pick(self.seq), pick(self.mask), pick(self.src), self.first)


class FullRecompute:
    """arelu's search interface over an HF model, no cache: each step runs the whole
    sequence through the model's own (unwrapped) forward."""

    def __init__(self, model, mask):
        self.model, self.mask = model, mask

    def encode(self, src):
        return src, self.mask

    def start(self, src, mask):
        if self.model.config.is_encoder_decoder:
            return _Full(src.new_zeros(len(src), 0), mask, src)
        return _Full(src, mask, None)

    def step(self, tokens, state):
        forward = type(self.model).forward
        if self.model.config.is_encoder_decoder:
            state.seq = torch.cat([state.seq, tokens[:, None]], 1)
            return forward(self.model, input_ids=state.src, attention_mask=state.mask,
                           decoder_input_ids=state.seq, use_cache=False).logits[:, -1]
        if not state.first:
            state.seq = torch.cat([state.seq, tokens[:, None]], 1)
            state.mask = torch.cat([state.mask, state.mask.new_ones(len(tokens), 1)], 1)
        state.first = False
        positions = (state.mask.cumsum(1) - 1).clamp(min=0)
        return forward(self.model, input_ids=state.seq, attention_mask=state.mask,
                       position_ids=positions, use_cache=False).logits[:, -1]


def _inputs(kind):
    """Left-padded prompts (causal) or right-padded sources (seq2seq) of 3 lengths."""
    ids = tokens(3, 6)
    mask = torch.ones_like(ids)
    if kind in ("bart", "t5"):
        mask[1, 4:], mask[2, 3:] = 0, 0
    else:
        mask[1, :2], mask[2, :3] = 0, 0
    return ids.masked_fill(mask == 0, PAD), mask


def _reference(model, name, ids, mask, *, beam, n_best=1, length_penalty=0.0,
               renormalize=False, steps=6):
    transform = get_transform(name, tau=TAU)
    search = FullRecompute(model, mask)
    bos = EOS if model.config.is_encoder_decoder else 0
    limits = torch.full((len(ids),), steps)
    with torch.no_grad():
        if beam == 1:
            hyps = [[h] for h in greedy(search, ids, transform, bos_id=bos, eos_id=EOS,
                                        limits=limits, renormalize=renormalize)]
        else:
            hyps = beam_search(search, ids, transform, bos_id=bos, eos_id=EOS, limits=limits,
                               beam=beam, n_best=n_best, length_penalty=length_penalty,
                               renormalize=renormalize)
    prefix = ids if not model.config.is_encoder_decoder else torch.full((len(ids), 1), EOS)
    return pack_hypotheses(prefix, hyps, EOS, PAD)


CASES = [(1, 1, 0.0, False), (3, 2, 1.0, False), (4, 2, 0.6, True)]
# alpha-ReLU in every case (renormalize applies to it alone); the others in the beam case.
RUNS = [("1.5-relu", *case) for case in CASES] + [(name, *CASES[1]) for name in FAMILIES
                                                  if name != "1.5-relu"]


@pytest.mark.parametrize("kind", ["llama", "bart"])
@pytest.mark.parametrize("name, beam, n_best, penalty, renormalize", RUNS)
def test_generate_equals_arelus_search(kind, name, beam, n_best, penalty, renormalize):
    model = make_model(kind, scale=30.0)
    ids, mask = _inputs(kind)
    want = _reference(model, name, ids, mask, beam=beam, n_best=n_best,
                      length_penalty=penalty, renormalize=renormalize)
    use_transform(model, name, tau=TAU if name == "1.5-relu" else None)
    got = model.generate(ids, attention_mask=mask, max_new_tokens=6, num_beams=beam,
                         num_return_sequences=n_best, length_penalty=penalty,
                         renormalize=renormalize, return_dict_in_generate=True)
    assert torch.equal(got.sequences, want.sequences)
    assert torch.equal(got.ended, want.ended)
    torch.testing.assert_close(got.sequences_scores, want.sequences_scores, rtol=1e-6,
                               atol=1e-6)


@pytest.mark.parametrize("kind", ["gpt2", "t5"])
def test_generate_equals_arelus_search_on_more_architectures(kind):
    """GPT-2 (learned positions) and T5 (relative position bias) on the cache, beam 3."""
    test_generate_equals_arelus_search(kind, "1.5-relu", 3, 2, 1.0, False)


def test_searches_see_sparse_outputs():
    """The fixture's logits leave alpha-ReLU a partial support: some candidates score -inf
    (so the beam tests above exercise pruning), the best ones do not."""
    model = make_model("llama", scale=30.0)
    logits = model(input_ids=tokens(3, 6)).logits[:, -1]
    probs = get_transform("1.5-relu", tau=TAU).probs(logits)
    support = (probs > 0).sum(-1)
    assert bool((support > 0).all()) and bool((support < probs.shape[-1] // 2).all())


@pytest.mark.parametrize("kind", ["gpt2", "llama"])
def test_greedy_equals_transformers_greedy(kind):
    """Greedy picks the arg-max logit for every transform, as transformers' greedy does."""
    model = make_model(kind, scale=30.0)
    ids = tokens(2, 5)
    native = type(model).generate(model, ids, max_new_tokens=6, do_sample=False,
                                  eos_token_id=None, pad_token_id=PAD)
    use_transform(model, "1.5-relu", tau=TAU)
    ours = model.generate(ids, max_new_tokens=6, eos_token_id=-1)
    assert torch.equal(ours, native)


def test_sampling_never_draws_a_zero_probability_token():
    """2,000 draws of 3 tokens: every drawn token has alpha-ReLU output > 0 under a plain
    forward of the drawn sequence (a row stops, score -inf, exactly where its support is
    empty), and the first token's frequencies match p / sum p."""
    tau = 1.2                                        # a support of a few tokens per row
    model = make_model("llama", scale=30.0)
    prompt = tokens(1, 4).repeat(2000, 1)
    use_transform(model, "1.5-relu", tau=tau)
    gen = torch.Generator().manual_seed(0)
    out = model.generate(prompt, max_new_tokens=3, do_sample=True, eos_token_id=-1,
                         generator=gen, return_dict_in_generate=True)
    transform = get_transform("1.5-relu", tau=tau)
    with torch.no_grad():
        probs = transform.probs(type(model).forward(model, input_ids=out.sequences).logits)
    steps = probs[:, 3:3 + out.sequences.shape[1] - 4]                  # (N, k, V)
    drawn = out.sequences[:, 4:]                                        # (N, k)
    p_drawn = steps.gather(2, drawn[..., None])[..., 0]
    finite = torch.isfinite(out.sequences_scores)
    assert bool((p_drawn[finite] > 0).all()) and int(finite.sum()) > 1500
    for row in (~finite).nonzero()[:, 0].tolist():                     # rows that stopped
        stop = int((p_drawn[row] > 0).long().cumprod(0).sum())
        assert float(steps[row, stop].sum()) == 0.0                     # no support there
    first = steps[0, 0] / steps[0, 0].sum()
    assert 2 <= int((first > 0).sum()) < first.numel() // 2
    freq = torch.bincount(drawn[:, 0], minlength=first.numel()).double() / len(drawn)
    assert float((freq - first).abs().max()) < 0.04


def test_the_generation_config_is_honoured_where_the_call_is_silent():
    """do_sample, max_new_tokens, num_beams and num_return_sequences come from
    model.generation_config, as in transformers; the call's own values win."""
    from transformers import GenerationConfig

    model = make_model("llama", scale=30.0)
    use_transform(model, "1.5-relu", tau=TAU)
    ids = tokens(2, 4)
    model.generation_config.update(max_new_tokens=3, num_beams=2, num_return_sequences=2,
                                   eos_token_id=None)
    beams = model.generate(ids, eos_token_id=-1)
    assert beams.shape == (4, 7)
    assert torch.equal(beams, model.generate(ids, eos_token_id=-1, max_new_tokens=3,
                                             num_beams=2, num_return_sequences=2,
                                             generation_config=GenerationConfig()))
    assert model.generate(ids, eos_token_id=-1, max_new_tokens=5, num_beams=1,
                          num_return_sequences=1).shape == (2, 9)
    model.generation_config = GenerationConfig(do_sample=True, max_new_tokens=3)
    draws = {tuple(model.generate(ids[:1], eos_token_id=-1)[0].tolist()) for _ in range(20)}
    assert len(draws) > 1                                    # sampled, not greedy


@pytest.mark.parametrize("options, do_sample, match", [
    ({"top_k": 5}, True, "top_k=5"),
    ({"temperature": 0.3, "top_p": 0.9}, True, "temperature=0.3, top_p=0.9"),
    ({"repetition_penalty": 1.2}, False, "repetition_penalty=1.2"),
    ({"no_repeat_ngram_size": 3, "forced_eos_token_id": 2}, False, "no_repeat_ngram_size=3"),
])
def test_a_generation_config_option_it_does_not_implement_is_refused(options, do_sample,
                                                                      match):
    from transformers import GenerationConfig

    model = make_model("llama", scale=30.0)
    use_transform(model, "1.5-relu", tau=TAU)
    model.generation_config = GenerationConfig(**options)
    with pytest.raises(ValueError, match=match) as info:
        model.generate(tokens(1, 3), do_sample=do_sample, max_new_tokens=2)
    assert "\n" not in str(info.value) and "GenerationConfig()" in str(info.value)
    model.generate(tokens(1, 3), do_sample=do_sample, max_new_tokens=2,
                   generation_config=GenerationConfig())          # the way out it names


def test_sampling_options_do_not_stop_greedy_search():
    """A checkpoint's top_p / temperature apply to sampling only (transformers ignores them
    in greedy search too)."""
    from transformers import GenerationConfig

    model = make_model("llama", scale=30.0)
    use_transform(model, "1.5-relu", tau=TAU)
    model.generation_config = GenerationConfig(temperature=0.6, top_p=0.9)
    assert model.generate(tokens(1, 3), max_new_tokens=2).shape == (1, 5)


def test_beam_sampling_and_right_padding_are_refused():
    model = make_model("llama", scale=30.0)
    use_transform(model, "1.5-relu", tau=TAU)
    with pytest.raises(ValueError, match="beam sampling"):
        model.generate(tokens(1, 3), do_sample=True, num_beams=2)
    ids, mask = tokens(2, 4), torch.ones(2, 4, dtype=torch.long)
    mask[1, -1] = 0                                          # row 1 right-padded
    with pytest.raises(ValueError, match="padding_side = 'left'"):
        model.generate(ids, attention_mask=mask)
    mask[1] = torch.tensor([0, 1, 1, 1])                     # left-padded: fine
    assert model.generate(ids, attention_mask=mask, max_new_tokens=1).shape == (2, 5)
