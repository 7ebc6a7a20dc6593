"""Validation during training: loss and greedy BLEU on a held-out split.

The paper keeps the checkpoint with the best validation BLEU (Results); BLEU here is
the reported BLEU (:func:`arelu_cli.decode.bleu.corpus_bleu`: sacrebleu, detokenized, cased,
13a, exp smoothing) of greedy translations against the prepared split's raw references,
translated as ``arelu translate --split SPLIT --beam 1`` translates them
(:func:`arelu_cli.decode.translate.translate_split`): the same batches, the same lines.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import torch

from arelu_cli.config import Config
from arelu_cli.decode.bleu import corpus_bleu
from arelu_cli.data.batching import token_batches
from arelu_cli.data.prepared import Prepared
from arelu_cli.decode.translate import Translator, translate_split
from arelu_cli.model.transformer import Transformer
from arelu_cli.registry import OutputTransform


@dataclass(frozen=True)
class Validation:
    loss: float
    """The transform's own loss per target token (eos included), unsmoothed: ``[train]
    label_smoothing`` changes only the training loss, so validation losses compare across
    smoothing settings."""
    bleu: float | None
    """Greedy BLEU; None for a language model."""
    hypotheses: list[str]
    ppl: float | None = None
    """A softmax language model's perplexity, ``exp(loss)``; None otherwise (the other losses
    are not log-likelihoods: ``arelu lm-eval`` gives their epsilon-perplexity)."""

    @property
    def score(self) -> float:
        """Higher is better: BLEU, or minus the loss for a language model."""
        return -self.loss if self.bleu is None else self.bleu


@torch.no_grad()
def split_loss(model: Transformer, data: Prepared, split: str, transform: OutputTransform,
               max_tokens: int, device: torch.device, block_size: int = 0) -> float:
    """Mean per-token loss of ``transform`` over a split, teacher-forced, in eval mode;
    always without label smoothing (the one-hot target). NaN as soon as a batch's logits
    are not finite (a diverged model): the sort-based entmax losses index out of range on
    them."""
    was_training = model.training
    model.eval()
    total, tokens = 0.0, 0
    for batch in token_batches(data, split, max_tokens=max_tokens, shuffle=False,
                               block_size=block_size):
        batch = batch.to(device)
        keep = batch.tgt_out != data.pad_id
        logits = transform.loss_input(model(*batch.inputs, keep))  # (N, V)
        if not torch.isfinite(logits.sum(dtype=torch.float32)):
            model.train(was_training)
            return float("nan")
        # per-token losses come in the logits' dtype (bf16 for alpha-ReLU under autocast):
        # summed in fp32, as in training
        rows = transform.loss(logits, batch.tgt_out[keep], reduction="none")  # (N,)
        total += float(rows.sum(dtype=torch.float32))
        tokens += batch.n_tgt_tokens
    model.train(was_training)
    return total / tokens


def validate(model: Transformer, data: Prepared, transform: OutputTransform, config: Config,
             device: torch.device) -> Validation:
    """Loss and greedy BLEU of ``model`` on ``[data] valid_split``, in eval mode (its mode is
    restored after); a diverged model (NaN loss) gets BLEU 0 without decoding."""
    split = config.data.valid_split
    loss = split_loss(model, data, split, transform, config.decode.max_tokens, device,
                      config.data.block_size)
    if data.task == "lm":
        return Validation(loss, None, [], math.exp(loss) if transform.family == "softmax"
                          and math.isfinite(loss) else None)
    if math.isnan(loss):  # a diverged model, whose greedy search would fail the same way
        return Validation(loss, 0.0, [])
    was_training = model.training
    model.eval()
    try:
        hypotheses = translate_split(Translator(model, transform, data, device), split,
                                     replace(config.decode, beam=1))
    finally:
        model.train(was_training)
    return Validation(loss, corpus_bleu(hypotheses, data.references(split)), hypotheses)
