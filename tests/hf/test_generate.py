"""model.generate after use_transform (arelu_cli.hf.generate and .search).

Beam search: the tokens and scores of arelu's own beam search (arelu_cli.decode.search)
driven by a reference adapter that reruns the whole sequence at every step (no cache), so
the cached adapter's positions, padding, reordering and processors are checked against a
plain forward. Greedy and sampling: transformers' own, through the transform's processor,
whose distribution is decode.sampling's (the sampler of arelu generate) on the same logits,
with the processors before and the warpers after it; draws follow it and never hit a zero."""

from __future__ import annotations

import math
from dataclasses import dataclass

import pytest

pytest.importorskip("transformers")

import torch  # noqa: E402

from arelu_cli.decode.sampling import Decoding, log_probs, next_tokens, sampling_probs
from arelu_cli.decode.search import beam_search
from arelu_cli.hf import use_transform
from arelu_cli.hf.generate import TransformLogitsProcessor, pack_hypotheses, raw_processors
from arelu_cli.hf.search import forced_logits
from arelu_cli.registry import get_transform

from .conftest import EOS, FAMILIES, PAD, TAU, VOCAB, make_model, tokens


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

    def __init__(self, model, mask, processors=None):
        self.model, self.mask, self.processors = model, mask, processors

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
            logits = forward(self.model, input_ids=state.src, attention_mask=state.mask,
                             decoder_input_ids=state.seq, use_cache=False).logits[:, -1]
        else:
            if not state.first:
                state.seq = torch.cat([state.seq, tokens[:, None]], 1)
                state.mask = torch.cat([state.mask, state.mask.new_ones(len(tokens), 1)], 1)
            state.first = False
            positions = (state.mask.cumsum(1) - 1).clamp(min=0)
            logits = forward(self.model, input_ids=state.seq, attention_mask=state.mask,
                             position_ids=positions, use_cache=False).logits[:, -1]
        if not self.processors:
            return logits
        return forced_logits(self.processors(state.seq, logits), self.model.arelu_transform)


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
               renormalize=False, steps=6, processors=None):
    transform = get_transform(name, tau=TAU)
    search = FullRecompute(model, mask, processors)
    bos = EOS if model.config.is_encoder_decoder else 0
    limits = torch.full((len(ids),), steps)
    with torch.no_grad():
        hyps = beam_search(search, ids, transform, bos_id=bos, eos_id=EOS, limits=limits,
                           beam=beam, n_best=n_best, length_penalty=length_penalty,
                           renormalize=renormalize)
    prefix = ids if not model.config.is_encoder_decoder else torch.full((len(ids), 1), EOS)
    return pack_hypotheses(prefix, hyps, EOS, PAD)


CASES = [(3, 2, 1.0, False), (4, 2, 0.6, True), (2, 1, 0.0, False)]
# alpha-ReLU in every case (renormalize applies to it alone); the others in the first.
RUNS = [("1.5-relu", *case) for case in CASES] + [(name, *CASES[0]) for name in FAMILIES
                                                  if name != "1.5-relu"]


@pytest.mark.parametrize("kind", ["llama", "bart"])
@pytest.mark.parametrize("name, beam, n_best, penalty, renormalize", RUNS)
def test_beam_search_equals_arelus_search(kind, name, beam, n_best, penalty, renormalize):
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
def test_beam_search_equals_arelus_search_on_more_architectures(kind):
    """GPT-2 (learned positions) and T5 (relative position bias) on the cache, beam 3."""
    test_beam_search_equals_arelus_search(kind, "1.5-relu", 3, 2, 1.0, False)


@pytest.mark.parametrize("kind", ["llama", "bart"])
def test_beam_search_applies_transformers_processors(kind):
    """Repetition and n-gram penalties, a minimum length and a forced eos act on the raw
    logits of each beam row (its own tokens so far, through the cache), as the reference
    applies them on full recomputes; the forced eos has probability 1 (score 0)."""
    model = make_model(kind, scale=30.0)
    use_transform(model, "1.5-relu", tau=TAU)
    ids, mask = _inputs(kind)
    options = dict(repetition_penalty=1.5, no_repeat_ngram_size=2, min_new_tokens=3,
                   forced_eos_token_id=EOS)
    got = model.generate(ids, attention_mask=mask, max_new_tokens=6, num_beams=3,
                         num_return_sequences=2, return_dict_in_generate=True, **options)
    from transformers import GenerationConfig

    config = GenerationConfig(**options, eos_token_id=EOS)
    prefix = 1 if kind == "bart" else ids.shape[1]
    processors = raw_processors(model, config, ids, prefix, [EOS], 6)
    want = _reference(model, "1.5-relu", ids, mask, beam=3, n_best=2, processors=processors)
    assert torch.equal(got.sequences, want.sequences)
    torch.testing.assert_close(got.sequences_scores, want.sequences_scores, rtol=1e-5,
                               atol=1e-5)
    new = got.sequences[:, prefix:]
    assert bool(got.ended.all())                          # every row ends: eos is forced
    for row in new.tolist():
        row = row[:row.index(EOS) + 1]
        assert len(row) >= 4                               # 3 tokens at least, then eos
        pairs = list(zip(row, row[1:]))
        assert len(pairs) == len(set(pairs))               # no bigram twice


def test_searches_see_sparse_outputs():
    """The fixture's logits leave alpha-ReLU a partial support: some candidates score -inf
    (so the beam tests above exercise pruning), the best ones do not."""
    model = make_model("llama", scale=30.0)
    logits = model(input_ids=tokens(3, 6)).logits[:, -1]
    probs = get_transform("1.5-relu", tau=TAU).probs(logits)
    support = (probs > 0).sum(-1)
    assert bool((support > 0).all()) and bool((support < probs.shape[-1] // 2).all())


@pytest.mark.parametrize("kind", ["gpt2", "llama"])
@pytest.mark.parametrize("name", FAMILIES)
def test_greedy_equals_transformers_greedy(kind, name):
    """Greedy picks the arg-max logit for every transform, as transformers' greedy does."""
    model = make_model(kind, scale=30.0)
    ids = tokens(2, 5)
    native = type(model).generate(model, ids, max_new_tokens=6, do_sample=False,
                                  eos_token_id=None, pad_token_id=PAD)
    use_transform(model, name, tau=TAU if name == "1.5-relu" else None)
    ours = model.generate(ids, max_new_tokens=6, eos_token_id=None)
    assert torch.equal(ours, native)
    assert torch.equal(model.generate(ids, max_new_tokens=6, eos_token_id=None,
                                      use_cache=False), native)


def _sample(model, ids, **options):
    return model.generate(ids, do_sample=True, max_new_tokens=4, eos_token_id=None,
                          output_scores=True, output_logits=True,
                          return_dict_in_generate=True,
                          generator=torch.Generator().manual_seed(0), **options)


SAMPLED = [("1.5-relu", dict(temperature=0.7)), ("1.5-relu", dict(top_k=4, top_p=0.8)),
           ("1.5-entmax", dict(temperature=1.5, top_p=0.9)), ("sparsemax", {}),
           ("softmax", dict(temperature=0.8, top_k=10, top_p=0.9))]


@pytest.mark.parametrize("name, options", SAMPLED)
def test_sampling_draws_from_decode_samplings_distribution(name, options):
    """At every step, transformers' processed scores are decode.sampling's p_T (the
    sampler of arelu generate) of the same logits after the repetition penalty, with the
    same temperature, top-k and top-p; every drawn token has p > 0 there."""
    from transformers import RepetitionPenaltyLogitsProcessor

    model = make_model("llama", scale=30.0)
    use_transform(model, name, tau=TAU if name == "1.5-relu" else None)
    ids = tokens(4, 5)
    out = _sample(model, ids, repetition_penalty=1.3, **options)
    transform = model.arelu_transform
    decoding = Decoding(**options)
    penalty = RepetitionPenaltyLogitsProcessor(1.3)
    for t, (scores, logits) in enumerate(zip(out.scores, out.logits)):
        seen = out.sequences[:, :ids.shape[1] + t]
        want = sampling_probs(penalty(seen, logits.clone()), transform, decoding)
        torch.testing.assert_close(torch.softmax(scores, -1), want, rtol=0, atol=2e-6)
        drawn = out.sequences[:, ids.shape[1] + t]
        assert bool((want.gather(1, drawn[:, None]) > 0).all())


@pytest.mark.parametrize("name", ["1.5-relu", "1.5-entmax"])
def test_min_p_truncates_the_transforms_distribution(name):
    """transformers' min-p, after the transform: kept are the tokens of p_T with at least
    min_p times the top probability, renormalized."""
    model = make_model("llama", scale=30.0)
    use_transform(model, name, tau=TAU if name == "1.5-relu" else None)
    out = _sample(model, tokens(4, 5), temperature=1.5, min_p=0.2)
    for scores, logits in zip(out.scores, out.logits):
        want = sampling_probs(logits, model.arelu_transform, Decoding(temperature=1.5))
        want = want * (want >= 0.2 * want.amax(-1, keepdim=True))
        torch.testing.assert_close(torch.softmax(scores, -1), want / want.sum(-1, keepdim=True),
                                   rtol=0, atol=2e-6)


@pytest.mark.parametrize("name, options", [("1.5-relu", dict(temperature=0.7)),
                                           ("1.5-entmax", dict(top_k=3)),
                                           ("softmax", dict(top_p=0.8))])
def test_draws_of_generate_and_of_arelu_generate_follow_the_same_distribution(name, options):
    """4,000 first tokens drawn by model.generate and by decode.sampling.next_tokens (the
    sampler of arelu generate) on the same logits: each matches the distribution
    (chi-square), and both only ever draw its support."""
    from scipy.stats import chisquare

    model = make_model("llama", scale=30.0)
    use_transform(model, name, tau=TAU if name == "1.5-relu" else None)
    prompt = tokens(1, 4)
    with torch.no_grad():
        logits = type(model).forward(model, input_ids=prompt).logits[:, -1].float()
    probs = sampling_probs(logits, model.arelu_transform, Decoding(**options))[0]
    support = (probs > 0).nonzero()[:, 0]
    assert len(support) >= 2
    n = 4000
    ours = model.generate(prompt.repeat(n, 1), do_sample=True, max_new_tokens=1,
                          eos_token_id=None, generator=torch.Generator().manual_seed(1),
                          **options)[:, -1]
    theirs = next_tokens(logits.repeat(n, 1), model.arelu_transform, Decoding(**options),
                         torch.Generator().manual_seed(2))
    for drawn in (ours, theirs):
        assert bool((probs[drawn] > 0).all())
        seen = torch.bincount(drawn, minlength=probs.numel())[support].double()
        expected = probs[support].double()
        assert chisquare(seen, expected * n / expected.sum()).pvalue > 1e-4


def test_an_empty_alpha_relu_support_takes_the_arg_max_as_arelu_generate_does():
    """A tau above every logit: no support anywhere. Sampling draws the arg-max logit (as
    decode.sampling does), so it equals greedy; the processor's row is that one-hot."""
    model = make_model("llama", scale=1.0)
    use_transform(model, "1.5-relu", tau=50.0)
    ids = tokens(3, 4)
    sampled = model.generate(ids, do_sample=True, max_new_tokens=4, eos_token_id=None)
    assert torch.equal(sampled, model.generate(ids, max_new_tokens=4, eos_token_id=None))
    z = torch.tensor([[0.2, 1.0, -3.0]])
    scores = TransformLogitsProcessor(model.arelu_transform)(ids[:1], z)
    assert scores.tolist() == [[-math.inf, 0.0, -math.inf]]
    assert torch.equal(scores, log_probs(z, model.arelu_transform))


def test_a_checkpoints_sampling_config_generates_without_arguments():
    """An instruct-style generation_config (sampling, temperature, top-p, top-k, a
    repetition penalty) is used as it is."""
    from transformers import GenerationConfig

    model = make_model("llama", scale=30.0)
    use_transform(model, "1.5-relu", tau=TAU)
    model.generation_config = GenerationConfig(do_sample=True, temperature=0.6, top_p=0.9,
                                               top_k=20, repetition_penalty=1.1,
                                               max_new_tokens=3, eos_token_id=None)
    ids = tokens(1, 4)
    draws = {tuple(model.generate(ids)[0].tolist()) for _ in range(10)}
    assert all(len(d) == 7 for d in draws) and len(draws) > 1


@pytest.mark.parametrize("kind", ["bart", "marian", "mbart", "pegasus"])
def test_seq2seq_defaults_with_forced_tokens_generate_out_of_the_box(kind):
    """BART, Marian, mBART and Pegasus set forced_eos_token_id in their default generation
    config: greedy, sampling and beam search all run, and a row that reaches the length
    limit ends with the forced eos."""
    import transformers

    from arelu_cli.hf import families

    cls = {"bart": "BartForConditionalGeneration", "marian": "MarianMTModel",
           "mbart": "MBartForConditionalGeneration",
           "pegasus": "PegasusForConditionalGeneration"}[kind]
    model_cls = getattr(transformers, cls)
    torch.manual_seed(0)
    model = model_cls(families.tiny_config(model_cls.config_class)).double().eval()
    eos = model.generation_config.eos_token_id
    assert model.generation_config.forced_eos_token_id == eos
    use_transform(model, "1.5-relu", tau=0.0)
    src = torch.randint(3, families.VOCAB, (2, 5))
    for options in (dict(), dict(do_sample=True), dict(num_beams=3)):
        out = model.generate(src, max_new_tokens=4, **options)
        assert out.shape[0] == 2
        for row in out.tolist():
            assert eos in row[1:]                      # ended, forced at the limit at latest


def test_a_list_of_eos_ids_stops_at_any_of_them():
    """Llama-3-style eos_token_id lists, for greedy (transformers') and beam search."""
    model = make_model("llama", scale=30.0)
    use_transform(model, "1.5-relu", tau=TAU)
    ids = tokens(1, 5)
    free = model.generate(ids, max_new_tokens=6, eos_token_id=None)
    second = int(free[0, 6])                                 # the second new token
    stopped = model.generate(ids, max_new_tokens=6, eos_token_id=[EOS, second])
    assert stopped[0, 5:].tolist() == free[0, 5:7].tolist()
    # Renormalized scores are log-probabilities: the most likely first token, now an eos,
    # is the best hypothesis (anything longer adds negative scores) and ends the search.
    first = int(free[0, 5])
    ended = model.generate(ids, max_new_tokens=6, num_beams=2, eos_token_id=[EOS, first],
                           renormalize=True, return_dict_in_generate=True)
    assert ended.sequences[0, 5:].tolist() == [first] and bool(ended.ended[0])


def test_streamers_see_every_token():
    from transformers.generation.streamers import BaseStreamer

    class Recorder(BaseStreamer):
        def __init__(self):
            self.seen, self.ended = [], False

        def put(self, value):
            self.seen.append(value.reshape(-1).tolist())

        def end(self):
            self.ended = True

    model = make_model("llama", scale=30.0)
    use_transform(model, "1.5-relu", tau=TAU)
    ids = tokens(1, 4)
    streamer = Recorder()
    out = model.generate(ids, max_new_tokens=3, eos_token_id=None, streamer=streamer)
    assert streamer.ended and sum(streamer.seen, []) == out[0].tolist()


def test_stop_strings_stop_generation():
    """transformers' stop strings, with an in-memory tokenizer of one character a token."""
    from tokenizers import Tokenizer, decoders, models
    from transformers import PreTrainedTokenizerFast

    chars = "abcdefghijklmnopqrstuvwxyz0123456789!"[:VOCAB]
    inner = Tokenizer(models.BPE({c: i for i, c in enumerate(chars)}, []))
    inner.decoder = decoders.BPEDecoder()
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=inner)
    model = make_model("llama", scale=30.0)
    use_transform(model, "1.5-relu", tau=TAU)
    ids = tokens(1, 4)
    free = model.generate(ids, max_new_tokens=6, eos_token_id=None)
    stop = chars[int(free[0, 5])]                            # the second new token
    out = model.generate(ids, max_new_tokens=6, eos_token_id=None, stop_strings=[stop],
                         tokenizer=tokenizer)
    assert out[0].tolist() == free[0, :6].tolist()


def test_samples_are_seeded_by_a_generator_and_leave_the_global_state_alone():
    model = make_model("llama", scale=30.0)
    use_transform(model, "1.5-relu", tau=TAU)
    ids = tokens(3, 4)
    state = torch.random.get_rng_state()
    a, b, c = (model.generate(ids, do_sample=True, max_new_tokens=4, eos_token_id=None,
                              num_return_sequences=2,
                              generator=torch.Generator().manual_seed(s)) for s in (5, 5, 6))
    assert torch.equal(torch.random.get_rng_state(), state)
    assert a.shape == (6, 8) and torch.equal(a, b) and not torch.equal(a, c)


@pytest.mark.parametrize("options, match", [
    (dict(num_beams=2, output_scores=True, return_dict_in_generate=True), "per-step scores"),
    (dict(num_beams=2, do_sample=True), "beam sampling"),
    (dict(num_beams=2, stop_strings=["x"]), "stops at eos and the length limit"),
    (dict(num_beams=2, encoder_repetition_penalty=1.2), "batch x num_beams"),
    (dict(num_beams=2, token_type_ids=torch.zeros(1, 3, dtype=torch.long)),
     "not token_type_ids"),
])
def test_beam_search_refuses_what_it_cannot_do_in_one_line(options, match):
    model = make_model("llama", scale=30.0)
    use_transform(model, "1.5-relu", tau=TAU)
    with pytest.raises(ValueError, match=match) as info:
        model.generate(tokens(1, 3), max_new_tokens=2, **options)
    assert "\n" not in str(info.value)


def test_empty_and_right_padded_prompts_are_refused():
    model = make_model("llama", scale=30.0)
    use_transform(model, "1.5-relu", tau=TAU)
    for options in (dict(), dict(num_beams=2), dict(do_sample=True)):
        with pytest.raises(ValueError, match="the prompt is empty"):
            model.generate(torch.zeros(1, 0, dtype=torch.long), **options)
    ids, mask = tokens(2, 4), torch.ones(2, 4, dtype=torch.long)
    mask[1, -1] = 0                                          # row 1 right-padded
    with pytest.raises(ValueError, match="padding_side = 'left'"):
        model.generate(ids, attention_mask=mask)
    mask[1] = torch.tensor([0, 1, 1, 1])                     # left-padded: fine
    assert model.generate(ids, attention_mask=mask, max_new_tokens=1).shape == (2, 5)
