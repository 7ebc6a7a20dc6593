"""A transformers causal LM read through arelu's language-model interface
(:mod:`arelu_cli.hf.decoder`): step-by-step logits equal the full forward's, and lm-eval and
the sampler run on it."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("transformers")

from arelu_cli.decode.generate import sample_batch  # noqa: E402
from arelu_cli.decode.sampling import Decoding  # noqa: E402
from arelu_cli.hf.decoder import CausalLanguageModel, hf_decoder  # noqa: E402
from arelu_cli.registry import get_transform  # noqa: E402
from .conftest import make_model, tokens  # noqa: E402


def test_steps_equal_the_full_forward():
    model = make_model("llama", scale=4.0)
    lm = CausalLanguageModel(model, max_positions=16)
    ids = tokens(3, 7)
    full = lm(ids)                                                       # (B, T, V)
    state = lm.start()
    steps = torch.stack([lm.step(ids[:, t], state) for t in range(ids.shape[1])], 1)
    torch.testing.assert_close(steps, full)
    assert full.shape == (3, 7, model.config.vocab_size)


def test_the_sampler_continues_every_prompt_within_its_positions():
    lm = CausalLanguageModel(make_model("llama", scale=4.0), max_positions=8)
    out = sample_batch(lm, [[3, 4], [5, 6, 7]], get_transform("1.5-relu", tau=0.5), Decoding(),
                       torch.Generator().manual_seed(0), max_tokens=50, eos_id=2,
                       device=torch.device("cpu"))
    assert len(out) == 2 and all(len(row) <= 8 for row in out)


def test_max_positions_below_two_is_refused():
    with pytest.raises(ValueError, match="max_positions"):
        CausalLanguageModel(make_model("llama"), max_positions=1)


def test_a_vocabulary_other_than_the_corpus_is_refused(tiny_lm_corpus):
    from arelu_cli.data.prepared import load_prepared

    data = load_prepared(tiny_lm_corpus)
    with pytest.raises(ValueError, match="must be the same"):
        hf_decoder(make_model("llama"), get_transform("softmax"), data, path=tiny_lm_corpus,
                   block_size=16, seed=1)
