"""Decoding: batched greedy search over a model's logits, scored by an output transform.

Greedy search picks the arg-max logit at each step; every transform of the registry
(softmax, alpha-entmax, alpha-ReLU) is monotone in the logits, so that choice is the same
for all of them and stays defined when alpha-ReLU's output is all zero. The hypothesis
score is the sum of the transform's own ``log_scores`` of the chosen tokens (``-inf`` if a
token fell outside the support). The decoder runs one position per step with cached
keys/values (:meth:`arelu_cli.model.Transformer.step`), and sentences leave the batch as
soon as they emit eos or reach their length limit ``ratio * source length + offset``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from arelu_cli.config import DecodeConfig
from arelu_cli.data.batching import token_batches
from arelu_cli.data.prepared import Prepared
from arelu_cli.model import Transformer
from arelu_cli.registry import OutputTransform


@dataclass(frozen=True)
class Hypothesis:
    tokens: list[int]
    """Target ids without bos and eos."""
    score: float
    """Sum of the transform's log scores of the chosen tokens (eos included)."""


def max_lengths(src: torch.Tensor, pad_id: int, cfg: DecodeConfig, cap: int) -> torch.Tensor:
    """(B,) most tokens to generate per sentence, eos included, at most ``cap``."""
    src_len = (src != pad_id).sum(1).float()
    limit = torch.floor(src_len * cfg.max_length_ratio) + cfg.max_length_offset
    return limit.long().clamp(1, cap)


@torch.no_grad()
def greedy(model: Transformer, src: torch.Tensor, transform: OutputTransform, *, bos_id: int,
           eos_id: int, limits: torch.Tensor) -> list[Hypothesis]:
    """Greedy hypotheses for a batch of sources ``src`` (B, S); ``limits`` (B,) from
    :func:`max_lengths`. Call with the model in eval mode."""
    batch, device = src.shape[0], src.device
    memory, src_mask = model.encode(src)
    state = model.start(memory, src_mask)
    longest = int(limits.max())
    out = torch.full((batch, longest), eos_id, dtype=torch.long, device=device)  # (B, L)
    scores = torch.zeros(batch, dtype=torch.float64, device=device)
    alive = torch.arange(batch, device=device)           # rows of the batch still decoding
    tokens = torch.full((batch,), bos_id, dtype=torch.long, device=device)
    limits = limits.to(device)
    for t in range(longest):
        logits = model.step(tokens, state)                # (b, V)
        tokens = logits.argmax(-1)                        # (b,)
        chosen = transform.log_scores(logits.float()).gather(1, tokens[:, None])[:, 0]
        out[alive, t] = tokens
        scores.index_add_(0, alive, chosen.double())
        done = (tokens == eos_id) | (limits[alive] <= t + 1)
        if bool(done.any()):
            keep = (~done).nonzero()[:, 0]
            if keep.numel() == 0:
                break
            alive, tokens, state = alive[keep], tokens[keep], state.select(keep)
    return [_hypothesis(row, eos_id, float(score)) for row, score in zip(out.tolist(), scores.tolist())]


def _hypothesis(row: list[int], eos_id: int, score: float) -> Hypothesis:
    end = row.index(eos_id) if eos_id in row else len(row)
    return Hypothesis(row[:end], score)


def translate_split(model: Transformer, data: Prepared, split: str, transform: OutputTransform,
                    cfg: DecodeConfig, device: torch.device) -> list[str]:
    """Greedy detokenized translations of every sentence of a prepared split, in order."""
    was_training = model.training
    model.eval()
    hyps: list[list[int]] = [[] for _ in range(len(data.split(split)))]
    for batch in token_batches(data, split, max_tokens=cfg.max_tokens, shuffle=False):
        src = batch.src.to(device)
        limits = max_lengths(src, data.pad_id, cfg, cap=model.cfg.max_positions)
        found = greedy(model, src, transform, bos_id=data.bos_id, eos_id=data.eos_id,
                       limits=limits)
        for index, hyp in zip(batch.indices.tolist(), found):
            hyps[index] = hyp.tokens
    model.train(was_training)
    return data.tgt_tokenizer.decode_batch(hyps)
