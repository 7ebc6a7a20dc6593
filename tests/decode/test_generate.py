"""Generation: seeded and reproducible, batched like one at a time for greedy, prompts
continued (cut to the model's positions, counted), no token of probability 0 ever drawn."""

from __future__ import annotations

import torch

from arelu_cli.decode.generate import generate, keep_last, sample_batch, split_prompts
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


def test_long_prompts_keep_their_last_tokens_and_are_counted(lm_runs):
    assert keep_last([[1, 2, 3, 4], [5]], 2) == ([[3, 4], [5]], [0])
    decoder = _decoder(lm_runs["softmax"])
    limit = decoder.model.cfg.max_positions - 1
    long = list(range(4, 4 + limit + 5))
    result = _run(decoder, [long, [4]], Decoding("greedy"))
    assert result.truncated == [1] and result.meta["truncated_prompts"] == 1
    assert result.meta["truncated_to_tokens"] == limit
    assert len(result.tokens[0]) <= 1  # a full context leaves room for one token


def test_split_prompts_are_prefixes_and_the_rest_is_human(lm_runs):
    decoder = _decoder(lm_runs["softmax"])
    prompts, humans = split_prompts(decoder.data, "test", 3)
    ids, offsets = decoder.data.text_ids("test")
    lines = [ids[a:b].tolist() for a, b in zip(offsets[:-1], offsets[1:]) if b - a > 3]
    assert [p + h for p, h in zip(prompts, humans)] == lines
    assert all(len(p) == 3 for p in prompts)
