"""A ``transformers`` causal LM as arelu's :class:`~arelu_cli.decode.translate.Decoder`, so that
``lm-eval`` (:mod:`arelu_cli.analysis.lm_eval`) and ``arelu generate``'s sampler
(:mod:`arelu_cli.decode.generate`) measure it exactly as they measure arelu's own language
models: one implementation of every metric and of the sampler, whatever trained the model.

:class:`CausalLanguageModel` gives an HF model the interface of
:class:`arelu_cli.model.lm.LanguageModel`: ``model(tokens) -> logits (B, T, V)`` and
incremental ``start()`` / ``step(tokens, state)`` with the model's own key/value cache (the
step of :class:`arelu_cli.hf.search.CausalSearch`, which ``model.generate`` runs too).
:func:`hf_decoder` wraps it with the output transform, the prepared corpus whose token ids the
model reads, and the run's block size and seed.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn

from arelu_cli.config import Config, DataConfig, TrainConfig
from arelu_cli.data.prepared import Prepared
from arelu_cli.decode.translate import Decoder
from arelu_cli.hf.search import CausalSearch, CausalState
from arelu_cli.hf.transform import vocab_size
from arelu_cli.registry import OutputTransform


@dataclass(frozen=True)
class Positions:
    max_positions: int
    """The longest context generation feeds the model."""


@dataclass
class StepState:
    """Generation's state: the HF search state, made at the first step (its batch size)."""

    search: CausalState | None = None


class CausalLanguageModel(nn.Module):
    """An HF causal LM (``AutoModelForCausalLM``; a PEFT model works too) read through
    arelu's language-model interface; ``max_positions`` bounds generation's context."""

    def __init__(self, model: nn.Module, max_positions: int):
        super().__init__()
        if max_positions < 2:
            raise ValueError(f"max_positions must be at least 2, got {max_positions}")
        self.model, self.cfg = model, Positions(max_positions)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        """Logits (B, T, V) of the next token at every position of ``tokens`` (B, T)."""
        return self.model(input_ids=tokens, use_cache=False).logits

    def start(self) -> StepState:
        return StepState()

    def step(self, tokens: torch.Tensor, state: StepState) -> torch.Tensor:
        """Feed ``tokens`` (B,) after what the state has seen; logits (B, V) of the next."""
        if state.search is None:           # the first token opens the context
            state.search = CausalState(torch.ones_like(tokens)[:, None], tokens[:, None])
        return CausalSearch(self.model, None).step(tokens, state.search)


def hf_decoder(model: nn.Module, transform: OutputTransform, data: Prepared, *, path: Path,
               block_size: int, seed: int, step: int | None = None) -> Decoder:
    """``model`` (in eval mode from here on) as a :class:`Decoder` of ``data``'s token ids:
    teacher-forced windows of ``block_size`` tokens, generation up to as many positions,
    ``seed`` the run's (recorded in lm-eval's rows), ``path`` the folder it was loaded from."""
    if vocab_size(model) != data.vocab_size:      # eps-perplexity smooths over |V|
        raise ValueError(f"the model scores {vocab_size(model)} tokens but the corpus "
                         f"{data.path} has {data.vocab_size}: they must be the same")
    model.eval()
    config = Config(data=DataConfig(path=str(data.path), task="lm", block_size=block_size),
                    train=TrainConfig(transform=transform.name, seed=seed))
    device = next(model.parameters()).device
    return Decoder(CausalLanguageModel(model, block_size), transform, data, device, config,
                   Path(path), step)
