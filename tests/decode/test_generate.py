"""Generation: seeded and reproducible, batched like one at a time for greedy, prompts
continued (cut to leave room for the continuation, counted), no token of probability 0 ever
drawn, alpha-ReLU's arg-max fallbacks counted."""

from __future__ import annotations

import torch

from arelu_cli.decode.generate import (generate, keep_last, prompt_limit, sample_batch,
                                       split_prompts)
from arelu_cli.decode.translate import open_checkpoint
from arelu_cli.decode.sampling import Decoding, sampling_probs


def _decoder(run):
    return open_checkpoint(run, device="cpu", task="lm")


def _run(decoder, prompts, decoding=Decoding(), seed=0, batch_size=4, max_tokens=8):
    return generate(decoder, prompts, decoding, seed=seed, batch_size=batch_size,
                    max_tokens=max_tokens, source={"unconditional": len(prompts)})


def test_same_seed_same_text_other_seed_other_text(lm_runs):
    decoder = _decoder(lm_runs["1.5-relu"])
    prompts = [[] for _ in range(6)]
    a, b, c = (_run(decoder, prompts, seed=s) for s in (1, 1, 2))
    assert a.tokens == b.tokens and a.lines == b.lines
    assert a.tokens != c.tokens
    assert a.meta["seed"] == 1 and "seed:1" in a.meta["signature"]


def test_greedy_follows_the_full_forward_argmax(lm_runs):
    decoder = _decoder(lm_runs["softmax"])
    model, eos = decoder.model, decoder.data.eos_id
    prompts = [[5, 6, 7], [8], []]
    out = _run(decoder, prompts, Decoding("greedy"), batch_size=2, max_tokens=5).tokens
    for prompt, continuation in zip(prompts, out):
        context = [eos, *prompt]
        expected = []
        while len(expected) < 5:
            token = int(model(torch.tensor([context]))[0, -1].argmax())
            if token == eos:
                break
            expected.append(token)
            context.append(token)
        assert continuation == expected
    # one at a time gives the same as batched
    assert [_run(decoder, [p], Decoding("greedy"), max_tokens=5).tokens[0] for p in prompts] == out


def test_sampling_never_draws_a_zero_probability_token(lm_runs):
    decoder = _decoder(lm_runs["1.5-relu"])
    model, transform = decoder.model, decoder.transform
    prompts = [[] for _ in range(32)]
    generator = torch.Generator().manual_seed(0)
    out = sample_batch(model, prompts, transform, Decoding(), generator, 6, decoder.data.eos_id,
                       decoder.device)
    eos = decoder.data.eos_id
    for continuation in out:
        context = [eos]
        for token in continuation:
            probs = sampling_probs(model(torch.tensor([context]))[:, -1], transform, Decoding())
            assert probs[0, token] > 0
            context.append(token)


def test_long_prompts_keep_their_last_tokens_and_room_for_the_continuation(lm_runs):
    """A prompt longer than the positions less one less --max-tokens keeps its last tokens
    and then generates exactly as that cut prompt does: the continuation is not cut short
    by the positions; asking for more new tokens than half the positions keeps half."""
    assert keep_last([[1, 2, 3, 4], [5]], 2) == ([[3, 4], [5]], [0])
    decoder = _decoder(lm_runs["softmax"])
    positions = decoder.model.cfg.max_positions
    assert prompt_limit(decoder.model, 8) == positions - 1 - 8
    assert prompt_limit(decoder.model, 10_000) == (positions - 1) // 2
    limit = positions - 1 - 8
    long = [4 + i % 50 for i in range(limit + 5)]
    result = _run(decoder, [long, [4]], Decoding("greedy"), max_tokens=8)
    assert result.truncated == [1] and result.meta["truncated_prompts"] == 1
    assert result.meta["truncated_to_tokens"] == limit
    alone = _run(decoder, [long[-limit:]], Decoding("greedy"), max_tokens=8)
    assert result.tokens[0] == alone.tokens[0]


def test_draws_count_alpha_relus_fallbacks_to_the_argmax(lm_runs):
    """A tau shift beyond every logit empties alpha-ReLU's support at every step: each draw
    falls back to the arg-max (greedy decoding), and the record says so; none without it."""
    decoder = _decoder(lm_runs["1.5-relu"])
    prompts = [[5, 6], []]
    shifted = _run(decoder, prompts, Decoding(tau_shift=1000.0), max_tokens=4)
    assert shifted.meta["draws"] == sum(map(len, shifted.tokens)) + sum(
        len(t) < 4 for t in shifted.tokens)  # every continuation token, and each eos drawn
    assert shifted.meta["argmax_fallbacks"] == shifted.meta["draws"] > 0
    assert shifted.tokens == _run(decoder, prompts, Decoding("greedy"), max_tokens=4).tokens
    plain = _run(decoder, prompts, Decoding(), max_tokens=4)
    assert plain.meta["argmax_fallbacks"] < plain.meta["draws"]
    softmax = _run(_decoder(lm_runs["softmax"]), prompts, Decoding(), max_tokens=4)
    assert softmax.meta["draws"] == softmax.meta["argmax_fallbacks"] == 0  # never counted


def test_split_prompts_are_prefixes_and_the_rest_is_human(lm_runs):
    decoder = _decoder(lm_runs["softmax"])
    prompts, humans = split_prompts(decoder.data, "test", 3)
    ids, offsets = decoder.data.text_ids("test")
    lines = [ids[a:b].tolist() for a, b in zip(offsets[:-1], offsets[1:]) if b - a > 3]
    assert [p + h for p, h in zip(prompts, humans)] == lines
    assert all(len(p) == 3 for p in prompts)
