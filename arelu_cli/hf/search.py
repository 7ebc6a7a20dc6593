"""arelu's own greedy and beam search (:mod:`arelu_cli.decode.search`) driven by a Hugging Face
model: the search needs ``encode(src) -> (memory, mask)``, ``start(memory, mask) -> state``,
``step(tokens, state) -> logits (R, V)`` of the next position, and ``state.select(rows)``.

:class:`CausalSearch` treats the (left-padded) prompt as the source: the first step runs
the whole prompt and ignores its input tokens, later steps feed one token each, with
position ids counted over the real tokens. :class:`Seq2SeqSearch` runs the encoder once and
the decoder one token at a time. Both keep the model's own key/value cache (the ``cache``
of ``transformers`` 5), reordered in place with ``reorder_cache`` when the search keeps,
drops or repeats rows.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from transformers.modeling_outputs import BaseModelOutput


@dataclass
class CausalState:
    mask: torch.Tensor
    """(R, t) 1 at real tokens of the prompt and everything generated so far."""
    prompt: torch.Tensor | None
    """(R, S) the prompt, until the first step has run it."""
    cache: object = None

    def select(self, rows: torch.Tensor) -> CausalState:
        if self.cache is not None:
            self.cache.reorder_cache(rows)
        prompt = None if self.prompt is None else self.prompt.index_select(0, rows)
        return CausalState(self.mask.index_select(0, rows), prompt, self.cache)


@dataclass
class Seq2SeqState:
    memory: torch.Tensor
    """(R, S, d) the encoder's last hidden states."""
    mask: torch.Tensor
    """(R, S) 1 at real source tokens."""
    cache: object = None

    def select(self, rows: torch.Tensor) -> Seq2SeqState:
        if self.cache is not None:
            self.cache.reorder_cache(rows)
        return Seq2SeqState(self.memory.index_select(0, rows), self.mask.index_select(0, rows),
                            self.cache)


class CausalSearch:
    """A causal LM as arelu's search sees it; ``mask`` (B, S) is the prompt's attention mask."""

    def __init__(self, model: torch.nn.Module, mask: torch.Tensor):
        self.model, self.mask = model, mask

    def encode(self, prompt: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return prompt, self.mask

    def start(self, prompt: torch.Tensor, mask: torch.Tensor) -> CausalState:
        return CausalState(mask, prompt)

    def step(self, tokens: torch.Tensor, state: CausalState) -> torch.Tensor:
        if state.prompt is not None:
            ids, mask = state.prompt, state.mask
            positions = (mask.long().cumsum(1) - 1).clamp(min=0)            # (R, S)
        else:
            ids = tokens[:, None]
            mask = torch.cat([state.mask, state.mask.new_ones(len(tokens), 1)], dim=1)
            positions = mask.long().sum(1, keepdim=True) - 1                 # (R, 1)
        out = self.model(input_ids=ids, attention_mask=mask, position_ids=positions,
                         cache=state.cache, use_cache=True)
        state.mask, state.prompt, state.cache = mask, None, out.cache
        return out.logits[:, -1]                                              # (R, V)


class Seq2SeqSearch:
    """An encoder-decoder model as arelu's search sees it; ``mask`` (B, S) is the source's."""

    def __init__(self, model: torch.nn.Module, mask: torch.Tensor):
        self.model, self.mask = model, mask

    def encode(self, src: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        encoded = self.model.get_encoder()(input_ids=src, attention_mask=self.mask)
        return encoded.last_hidden_state, self.mask

    def start(self, memory: torch.Tensor, mask: torch.Tensor) -> Seq2SeqState:
        return Seq2SeqState(memory, mask)

    def step(self, tokens: torch.Tensor, state: Seq2SeqState) -> torch.Tensor:
        out = self.model(encoder_outputs=BaseModelOutput(last_hidden_state=state.memory),
                         attention_mask=state.mask, decoder_input_ids=tokens[:, None],
                         cache=state.cache, use_cache=True)
        state.cache = out.cache
        return out.logits[:, -1]                                              # (R, V)
