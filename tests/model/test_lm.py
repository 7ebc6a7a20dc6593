"""The decoder-only language model: causal, tied, cached decoding equal to the full forward,
built by ``[data] task``; a recipe's task must be its corpus's."""

from __future__ import annotations

import pytest
import torch

from arelu_cli.config import load_config
from arelu_cli.data.prepared import load_prepared
from arelu_cli.util.errors import UserError
from arelu_cli.model.lm import LanguageModel, build_model, check_task
from arelu_cli.model.transformer import Transformer

from ..conftest import TINY_LM_MODEL, TINY_MODEL


def _model(**model) -> LanguageModel:
    config = load_config(None, {("data", "task"): "lm", ("data", "block_size"): 16} | {
        ("model", k): v for k, v in (TINY_LM_MODEL | model).items()})
    torch.manual_seed(0)
    return build_model(config, 50, 50).double().eval()


def test_build_model_follows_the_task():
    assert isinstance(_model(), LanguageModel)
    config = load_config(None, {("model", k): v for k, v in TINY_MODEL.items()})
    assert type(build_model(config, 50, 50)) is Transformer


def test_tied_embeddings_and_no_encoder():
    model = _model()
    assert model.output.weight is model.tgt_embed.weight
    assert not any("encoder" in name or "cross" in name for name, _ in model.named_parameters())
    assert _model(tie_output=False).output.weight is not _model(tie_output=False).tgt_embed.weight


def test_causal_a_later_token_changes_no_earlier_logit():
    model = _model()
    tokens = torch.randint(0, 50, (2, 9))
    changed = tokens.clone()
    changed[:, 5] = (changed[:, 5] + 1) % 50
    a, b = model(tokens), model(changed)
    assert torch.equal(a[:, :5], b[:, :5]) and not torch.allclose(a[:, 5:], b[:, 5:])


def test_cached_steps_equal_the_full_forward():
    model = _model(attention="1.5-entmax")  # a sparse attention too: same blocks, same cache
    tokens = torch.randint(0, 50, (3, 12))
    full = model(tokens)  # (B, T, V)
    state = model.start()
    steps = torch.stack([model.step(tokens[:, t], state) for t in range(12)], dim=1)
    torch.testing.assert_close(steps, full, rtol=1e-10, atol=1e-10)
    assert state.step == 12
    kept = state.select(torch.tensor([2, 0]))
    assert kept.self_kv[0][0].shape[0] == 2
    torch.testing.assert_close(kept.self_kv[1][0][0], state.self_kv[1][0][2])


def test_keep_selects_positions_and_positions_are_limited():
    model = _model()
    tokens = torch.randint(0, 50, (2, 5))
    keep = torch.tensor([[True, False, True, True, False], [False] * 4 + [True]])
    torch.testing.assert_close(model(tokens, keep), model(tokens)[keep])
    with pytest.raises(UserError, match="longer than \\[model\\] max_positions = 32"):
        model(torch.zeros(1, 33, dtype=torch.int64))


def test_recipe_task_must_match_the_corpus(tiny_lm_corpus, tiny_corpus):
    lm = load_config(None, {("data", "task"): "lm", ("data", "block_size"): 16})
    check_task(lm, load_prepared(tiny_lm_corpus))
    with pytest.raises(UserError, match="is a lm corpus but the recipe's \\[data\\] task is "
                                        "'translation'; set \\[data\\] task = \"lm\""):
        check_task(load_config(None, {}), load_prepared(tiny_lm_corpus))
    with pytest.raises(UserError, match="use a language-modelling corpus"):
        check_task(lm, load_prepared(tiny_corpus))


@pytest.mark.parametrize("overrides, match", [
    ({("data", "task"): "lm", ("data", "block_size"): 2048},
     "block_size \\(2048\\) is longer than \\[model\\] max_positions \\(1024\\)"),
    ({("data", "block_size"): 0}, "\\[data\\] block_size must be positive"),
    ({("data", "task"): "language"}, "\\[data\\] task must be one of 'translation', 'lm'"),
])
def test_bad_lm_settings(overrides, match):
    with pytest.raises(UserError, match=match):
        load_config(None, overrides)
