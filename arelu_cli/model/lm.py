"""A decoder-only Transformer language model, built from the translation model's blocks.

The same pre-norm layers as :mod:`arelu_cli.model.transformer` without an encoder and without
cross-attention (GPT's layout): sinusoidal positions, embeddings scaled by
``sqrt(d_model)``, ``[model] decoder_layers`` layers of causal self-attention and a ReLU
feed-forward layer, a final layer norm, and the output projection, tied to the input
embedding with ``[model] tie_output`` (the LM recipes tie it: Press & Wolf, 2017; Inan et
al., 2017). The model returns logits; the output transform is the trainer's, by name
(:mod:`arelu_cli.registry`). ``[model] max_positions`` is the longest context it reads.

Shapes: ``B`` batch, ``T`` positions, ``D`` d_model, ``V`` vocabulary. Generation runs step by
step with each layer's key/value cache (:class:`LMState`), one position per new token.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from arelu_cli.config import Config, ModelConfig
from arelu_cli.data.prepared import Prepared
from arelu_cli.util.errors import UserError
from arelu_cli.model.transformer import (KV, Dropout, FeedForward, SelfAttention, TokenModel, Transformer,
                                 sinusoids)


class LMLayer(nn.Module):
    """Causal self-attention and a feed-forward layer, each pre-normed with a residual."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.norm1, self.norm2 = nn.LayerNorm(cfg.d_model), nn.LayerNorm(cfg.d_model)
        self.self_attn = SelfAttention(cfg, "decoder")
        self.ffn = FeedForward(cfg.d_model, cfg.d_ff, cfg.dropout)
        self.drop = Dropout(cfg.dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.drop(self.self_attn(self.norm1(x), causal=True))
        return x + self.drop(self.ffn(self.norm2(x)))

    def step(self, x: torch.Tensor, cache: KV | None) -> tuple[torch.Tensor, KV]:
        y, cache = self.self_attn.step(self.norm1(x), cache)
        x = x + y
        return x + self.ffn(self.norm2(x)), cache


@dataclass
class LMState:
    """What generation keeps per sequence: each layer's self-attention cache and the position
    of the next token. ``select`` keeps (or reorders) sequences of the batch."""

    self_kv: list[KV | None]
    step: int = 0

    def select(self, index: torch.Tensor) -> LMState:
        return LMState([None if kv is None else (kv[0].index_select(0, index),
                                                 kv[1].index_select(0, index))
                        for kv in self.self_kv], self.step)


class LanguageModel(TokenModel):
    """``model(tokens) -> logits (B, T, V)``: position t predicts token t + 1."""

    def __init__(self, cfg: ModelConfig, vocab: int, pad_id: int = 0):
        super().__init__()
        self.cfg, self.pad_id = cfg, pad_id
        self.tgt_embed = nn.Embedding(vocab, cfg.d_model)
        self.register_buffer("positions", sinusoids(cfg.max_positions, cfg.d_model), persistent=False)
        self.drop = Dropout(cfg.dropout)
        self.decoder = nn.ModuleList(LMLayer(cfg) for _ in range(cfg.decoder_layers))
        self.decoder_norm = nn.LayerNorm(cfg.d_model)
        self.output = nn.Linear(cfg.d_model, vocab)
        self.reset_parameters()
        if cfg.tie_output:
            self.output.weight = self.tgt_embed.weight

    def features(self, tokens: torch.Tensor, keep: torch.Tensor | None = None) -> torch.Tensor:
        """The output projection's input: normed states (B, T, D), or (N, D) at the N
        positions where ``keep`` (B, T) is True."""
        x = self._embed(self.tgt_embed, tokens)
        for layer in self.decoder:
            x = layer(x)
        x = self.decoder_norm(x)
        return x if keep is None else x[keep]

    def forward(self, tokens: torch.Tensor, keep: torch.Tensor | None = None) -> torch.Tensor:
        """Logits of the next token at every position: (B, T, V), or (N, V) with ``keep``."""
        return self.output(self.features(tokens, keep))

    def start(self) -> LMState:
        """The state before the first token."""
        return LMState([None] * len(self.decoder))

    def step(self, tokens: torch.Tensor, state: LMState) -> torch.Tensor:
        """Feed tokens (B,) at position ``state.step``; logits (B, V) of the next one."""
        x = self._embed(self.tgt_embed, tokens[:, None], offset=state.step)  # (B, 1, D)
        for i, layer in enumerate(self.decoder):
            x, state.self_kv[i] = layer.step(x, state.self_kv[i])
        state.step += 1
        return self.output(self.decoder_norm(x))[:, 0]


def check_task(config: Config, data: Prepared) -> None:
    """A recipe's ``[data] task`` must be the prepared folder's."""
    if config.data.task != data.task:
        hint = ("set [data] task = \"lm\" (e.g. --set data.task=lm) or use a translation corpus"
                if data.task == "lm" else "use a language-modelling corpus (arelu prepare ptb, "
                "tinyshakespeare, text or toy-lm) or set [data] task = \"translation\"")
        raise UserError(f"{data.path} is a {data.task} corpus but the recipe's [data] task is "
                        f"{config.data.task!r}; {hint}")


def build_model(config: Config, src_vocab: int, tgt_vocab: int,
                pad_id: int = 0) -> TokenModel:
    """The model ``[data] task`` asks for: a :class:`Transformer` for translation, a
    :class:`LanguageModel` (of the target vocabulary) for ``lm``."""
    if config.data.task == "lm":
        return LanguageModel(config.model, tgt_vocab, pad_id)
    return Transformer(config.model, src_vocab, tgt_vocab, pad_id)
