"""arelu's own beam search (:mod:`arelu_cli.decode.search`) driven by a Hugging Face model:
the search needs ``encode(src) -> (memory, mask)``, ``start(memory, mask) -> state``,
``step(tokens, state) -> logits (R, V)`` of the next position, and ``state.select(rows)``.

:class:`CausalSearch` treats the (left-padded) prompt as the source: the first step runs
the whole prompt and ignores its input tokens, later steps feed one token each, with
position ids counted over the real tokens. :class:`Seq2SeqSearch` runs the encoder once and
the decoder one token at a time. Both keep the model's own key/value cache (the ``cache``
of ``transformers`` 5), reordered in place with ``reorder_cache`` when the search keeps,
drops or repeats rows, and each row's tokens so far (``ids``: the prompt and what was
generated, or the decoder's), which ``transformers``' logits processors read.

``processors`` (a ``LogitsProcessorList``: repetition penalties, n-gram and bad-word bans,
minimum lengths, forced tokens, ...) change the logits before the transform sees them, as
in ``transformers``' own sampling. A row they leave a single finite logit (a forced token)
gets the logit at which the transform gives that token probability 1
(:func:`forced_logits`): ``transformers`` forces a token by giving it score 0 on its
log-probabilities, which alpha-ReLU's fixed threshold would read as no support at all.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from transformers.modeling_outputs import BaseModelOutput

from arelu_cli.registry import OutputTransform


def unit_logit(transform: OutputTransform) -> float:
    """A logit that alone in its row (the rest ``-inf``) has probability 1: alpha-ReLU's
    ``(alpha - 1) z - tau = 1`` at ``z = (1 + tau) / (alpha - 1)``; any value elsewhere."""
    return (1.0 + transform.tau) / (transform.alpha - 1.0) if transform.family == "relu" else 0.0


def forced_logits(logits: torch.Tensor, transform: OutputTransform) -> torch.Tensor:
    """``logits (R, V)`` with each row that holds exactly one finite logit set to
    :func:`unit_logit` there (module docstring); other rows as they are."""
    finite = torch.isfinite(logits)
    forced = finite.sum(-1) == 1
    if not bool(forced.any()):
        return logits
    unit = torch.where(finite, torch.full_like(logits, unit_logit(transform)), logits)
    return torch.where(forced[:, None], unit, logits)


class _Processed:
    """The search adapter's shared part: processors applied to the raw logits."""

    def __init__(self, model: torch.nn.Module, mask: torch.Tensor, processors=None):
        self.model, self.mask, self.processors = model, mask, processors

    def _process(self, ids: torch.Tensor, logits: torch.Tensor) -> torch.Tensor:
        if not self.processors:
            return logits
        return forced_logits(self.processors(ids, logits), self.model.arelu_transform)


@dataclass
class CausalState:
    mask: torch.Tensor
    """(R, t) 1 at real tokens of the prompt and everything generated so far."""
    ids: torch.Tensor
    """(R, t) the prompt (left pads included) and the tokens generated so far."""
    first: bool = True
    """Whether the prompt has yet to be run."""
    cache: object = None

    def select(self, rows: torch.Tensor) -> CausalState:
        if self.cache is not None:
            self.cache.reorder_cache(rows)
        return CausalState(self.mask.index_select(0, rows), self.ids.index_select(0, rows),
                           self.first, self.cache)


@dataclass
class Seq2SeqState:
    memory: torch.Tensor
    """(R, S, d) the encoder's last hidden states."""
    mask: torch.Tensor
    """(R, S) 1 at real source tokens."""
    ids: torch.Tensor
    """(R, t) the decoder's tokens so far (its start token first)."""
    cache: object = None

    def select(self, rows: torch.Tensor) -> Seq2SeqState:
        if self.cache is not None:
            self.cache.reorder_cache(rows)
        return Seq2SeqState(self.memory.index_select(0, rows), self.mask.index_select(0, rows),
                            self.ids.index_select(0, rows), self.cache)


class CausalSearch(_Processed):
    """A causal LM as arelu's search sees it; ``mask`` (B, S) is the prompt's attention mask."""

    def encode(self, prompt: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return prompt, self.mask

    def start(self, prompt: torch.Tensor, mask: torch.Tensor) -> CausalState:
        return CausalState(mask, prompt)

    def step(self, tokens: torch.Tensor, state: CausalState) -> torch.Tensor:
        if state.first:
            ids, mask = state.ids, state.mask
            positions = (mask.long().cumsum(1) - 1).clamp(min=0)            # (R, S)
        else:
            ids = tokens[:, None]
            mask = torch.cat([state.mask, state.mask.new_ones(len(tokens), 1)], dim=1)
            positions = mask.long().sum(1, keepdim=True) - 1                 # (R, 1)
            state.ids = torch.cat([state.ids, ids], dim=1)
        out = self.model(input_ids=ids, attention_mask=mask, position_ids=positions,
                         cache=state.cache, use_cache=True)
        state.mask, state.first, state.cache = mask, False, out.cache
        return self._process(state.ids, out.logits[:, -1])                    # (R, V)


class Seq2SeqSearch(_Processed):
    """An encoder-decoder model as arelu's search sees it; ``mask`` (B, S) is the source's."""

    def encode(self, src: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        encoded = self.model.get_encoder()(input_ids=src, attention_mask=self.mask)
        return encoded.last_hidden_state, self.mask

    def start(self, memory: torch.Tensor, mask: torch.Tensor) -> Seq2SeqState:
        return Seq2SeqState(memory, mask, mask.new_zeros(len(mask), 0, dtype=torch.long))

    def step(self, tokens: torch.Tensor, state: Seq2SeqState) -> torch.Tensor:
        out = self.model(encoder_outputs=BaseModelOutput(last_hidden_state=state.memory),
                         attention_mask=state.mask, decoder_input_ids=tokens[:, None],
                         cache=state.cache, use_cache=True)
        state.cache = out.cache
        state.ids = torch.cat([state.ids, tokens[:, None]], dim=1)
        return self._process(state.ids, out.logits[:, -1])                    # (R, V)
