"""What the output layer does on a batch: tau for alpha-ReLU and the logged statistics.

* :func:`first_batch_tau`: the paper's choice of alpha-ReLU's tau (Setup, "Hyperparameters
  alpha and tau"): run the first training batch through the untrained model with
  alpha-entmax at the output and take the mean threshold ``tau(z)`` over the batch's
  target positions. :func:`resolve_tau` adds a given number and the analytic estimate.
* :func:`batch_stats`: per logging step, the quantities behind the paper's training-dynamics,
  tau/||z|| and tau-sweep figures: mean ||z||, mean 1.5-entmax ``tau(z)``, the transform's
  own threshold, mean ``sum p`` and mean number of non-zeros of the output;
  :func:`hidden_stats` the same from the projection's input, for a fused output layer.
  Logits holding NaN or inf (a diverging run's) give NaN statistics, never an error, so
  that the trainer can report the divergence.
"""

from __future__ import annotations

import torch
from torch import nn

from arelu_cli.data.batching import Batch, token_batches
from arelu_cli.data.prepared import Prepared
from arelu_cli.util.errors import UserError
from arelu_cli.model.transformer import Transformer
from arelu_cli.registry import OutputTransform
from arelu_cli.transforms.tau import analytic_tau, empirical_tau, entmax_threshold


@torch.no_grad()
def _thresholds(model: Transformer, batch: Batch, alphas: list[float]) -> list[torch.Tensor]:
    """Per alpha, the exact alpha-entmax thresholds (N,) in float64 of the model's logits at
    the batch's target positions, in eval mode (no dropout)."""
    was_training = model.training
    model.eval()
    batch = batch.to(next(model.parameters()).device)
    logits = model(*batch.inputs, batch.tgt_out != batch.pad_id)  # (N, V)
    model.train(was_training)
    return [entmax_threshold(logits, alpha) for alpha in alphas]


def model_tau(model: Transformer, batch: Batch, alpha: float = 1.5) -> float:
    """Mean alpha-entmax threshold ``tau(z)`` of the model's logits at the batch's target
    positions (eval mode: no dropout), in float64."""
    return float(_thresholds(model, batch, [alpha])[0].mean())


def first_batch(data: Prepared, max_tokens: int, seed: int, block_size: int = 0) -> Batch:
    """The first training batch of epoch 0 (the same on every process); ``block_size``: a
    language model's (:mod:`arelu_cli.data.blocks`)."""
    return next(token_batches(data, "train", max_tokens=max_tokens, seed=seed, epoch=0,
                              block_size=block_size))


def first_batch_taus(model: Transformer, data: Prepared, max_tokens: int, seed: int,
                     alphas: list[float], batches: int = 1,
                     block_size: int = 0) -> tuple[list[float], int]:
    """The paper's tau-tilde per alpha: the mean threshold over the target positions of the
    first ``batches`` training batches of epoch 0 (one batch: what ``tau = "auto"`` trains
    with, :func:`resolve_tau`), and the number of positions."""
    found: list[list[torch.Tensor]] = [[] for _ in alphas]
    stream = token_batches(data, "train", max_tokens=max_tokens, seed=seed, epoch=0,
                           block_size=block_size)
    for _, batch in zip(range(batches), stream):
        for taus, one in zip(found, _thresholds(model, batch, list(alphas))):
            taus.append(one)
    return [float(torch.cat(taus).mean()) for taus in found], sum(len(t) for t in found[0])


def resolve_tau(spec: str | float, transform: OutputTransform, model: Transformer,
                data: Prepared, max_tokens: int, seed: int,
                block_size: int = 0) -> float | None:
    """alpha-ReLU's tau from ``spec`` (a number, ``auto`` or ``analytic``); None for the
    other transforms, which have no fixed threshold. ``auto`` uses alpha-entmax of the
    transform's own alpha (1.5 for 1.5-ReLU, as in the paper)."""
    if transform.family != "relu":
        return None
    if not isinstance(spec, str):
        return float(spec)
    if spec == "analytic":
        return analytic_tau(d_vocab=data.vocab_size, d_model=model.cfg.d_model,
                            alpha=transform.alpha).tau
    if spec == "auto":
        return first_batch_taus(model, data, max_tokens, seed, [transform.alpha],
                                block_size=block_size)[0][0]
    raise UserError(f"tau must be a number, 'auto' or 'analytic', got {spec!r}")


def _rows(logits: torch.Tensor, count: int) -> torch.Tensor:
    """Up to ``count`` rows spread evenly over the batch."""
    if logits.shape[0] <= count:
        return logits
    index = torch.linspace(0, logits.shape[0] - 1, count, device=logits.device).long()
    return logits.index_select(0, index)


@torch.no_grad()
def batch_stats(logits: torch.Tensor, transform: OutputTransform, rows: int) -> dict[str, float]:
    """Statistics of logits (N, V) of one batch; call before the loss's backward (alpha-ReLU
    may overwrite its logits with the gradient). ``logit_norm`` is over all N rows, in fp32
    without an fp32 copy of bf16 logits; the thresholds and outputs over ``rows`` rows
    spread over the batch."""
    logits = logits.detach()
    norm = float(torch.linalg.vector_norm(logits, dim=-1, dtype=torch.float32).mean())
    return _sample_stats(_rows(logits, rows).float(), norm, transform)


@torch.no_grad()
def hidden_stats(hidden: torch.Tensor, output: nn.Linear, transform: OutputTransform, rows: int,
                 chunk: int = 256) -> dict[str, float]:
    """:func:`batch_stats` of ``logits = output(hidden)`` for hidden states (N, D), when the
    loss is fused with the projection and the logits never exist: ``logit_norm`` over all N
    rows, ``chunk`` rows of logits at a time, the rest on ``rows`` rows. Outside autocast,
    the logits are in the weight's dtype (fp32 in training)."""
    hidden = hidden.detach().to(output.weight.dtype)
    norm = torch.cat([output(h).float().norm(dim=-1) for h in hidden.split(chunk)]).mean()
    return _sample_stats(output(_rows(hidden, rows)).float(), float(norm), transform)


def _sample_stats(sample: torch.Tensor, logit_norm: float,
                  transform: OutputTransform) -> dict[str, float]:
    """Thresholds, ``sum p`` and non-zeros of the sampled logit rows (float32); NaN where
    a row is not finite: the sort-based entmax transforms index out of range on NaN."""
    finite = bool(torch.isfinite(sample).all())
    if transform.family == "relu":
        tau = transform.tau
    elif transform.family == "entmax":
        tau = float(entmax_threshold(sample, transform.alpha).mean())  # NaN if not finite
    else:
        tau = None
    if not finite:
        nan = float("nan")
        return {"tau": tau, "tau_z": nan, "logit_norm": logit_norm, "sum_p": nan, "nnz": nan}
    probs = transform.probs(sample)
    return {"tau": tau, "tau_z": empirical_tau(sample, 1.5),
            "logit_norm": logit_norm,
            "sum_p": float(probs.sum(-1).mean()),
            "nnz": float((probs > 0).sum(-1).float().mean())}
