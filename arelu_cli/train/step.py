"""One optimizer step of training: batches, the loss of a micro-batch, the update.

Implements the paper's training step (Setup and Appendix "Optimization"): token-based
batches with gradient accumulation, Adam with Noam decay, optional gradient clipping and
weight averaging. The loss of a step is the sum over all target tokens of the global batch
(every micro-batch of every process) divided by their number, so ``N`` processes with
``accum`` micro-batches each train exactly like one process with ``N * accum``. Logits go
straight from the model to the transform's loss with ``reuse_logits=True`` (alpha-ReLU
writes its gradient into the logits' memory), so statistics of the logits are taken before
``backward``; under bf16 autocast they are copied to fp32 only for losses that do not read
bf16 with fp32 math (``OutputTransform.half_logits``), and per-token losses are summed in
fp32. With ``[train] fused_output`` the model and alpha-ReLU's loss run fused
(:mod:`arelu_cli.model.fused_output`) and the statistics come from the decoder's output.

A step with a non-finite loss or gradient norm is never applied
(:func:`arelu_cli.train.divergence.diverged`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

import torch

from arelu_cli.train import precision
from arelu_cli.data.batching import Batch, batch_indices, collate, example_sizes
from arelu_cli.data.blocks import block_lengths, collate_blocks, split_stream
from arelu_cli.train import distributed
from arelu_cli.model.output_stats import batch_stats, hidden_stats
from arelu_cli.train.schedule import average_weight, noam_lr, update_average
from arelu_cli.train.divergence import diverged, grad_norm, is_finite
from arelu_cli.train.state import Session


def micro_batches(s: Session) -> Iterator[Batch]:
    """This process's training batches from the current data position on, epoch after epoch."""
    state = s.state
    while True:
        plan, make = _epoch_plan(s, state.epoch)
        state.epoch_batches = len(plan)
        while state.position < len(plan):
            state.position += 1
            yield make(plan[state.position - 1])
        state.epoch, state.position = state.epoch + 1, 0


def _epoch_plan(s: Session, epoch: int) -> tuple[list, Callable[[object], Batch]]:
    """One epoch's batches (example indices) for this process, and what makes a batch of them:
    sentence pairs, or blocks of the token stream for a language model."""
    d, data = s.config.data, s.data
    if data.task == "lm":
        tokens = split_stream(data, "train")
        sizes = block_lengths(len(tokens), d.block_size)
        budget = d.max_tokens // d.block_size * d.block_size
        def make(indices):
            return collate_blocks(tokens, indices, d.block_size, data.pad_id)
    else:
        encoded = data.split("train")
        sizes, budget = example_sizes(encoded.src_lengths, encoded.tgt_lengths), d.max_tokens
        def make(indices):
            return collate(encoded, indices, pad_id=data.pad_id, bos_id=data.bos_id,
                           eos_id=data.eos_id)
    plan = batch_indices(sizes, budget, seed=s.config.train.seed, epoch=epoch, rank=s.ctx.rank,
                         world_size=s.ctx.world_size)
    return plan, make


def autocast(s: Session):
    """bf16 autocast where ``[train] precision`` asks for it (``auto``: where the hardware
    has native bf16, :mod:`arelu_cli.train.precision`)."""
    return precision.autocast(s.config.train.precision, s.ctx.device)()


def micro_loss(s: Session, batch: Batch, with_stats: bool) -> tuple[torch.Tensor, dict | None]:
    """The loss of one micro-batch summed over its target tokens, in fp32, and (if
    ``with_stats``) the statistics of its logits, taken before alpha-ReLU's backward
    overwrites them. Non-finite logits give a non-finite loss without calling the
    transform's loss, and the step then stops the run (:func:`optimizer_step`)."""
    keep = batch.tgt_out != s.data.pad_id
    target, rows = batch.tgt_out[keep], s.config.train.stats_rows
    if s.config.train.fused_output:
        with autocast(s):
            loss, hidden = s.forward(*batch.inputs, keep, target)  # (), (N, D)
        stats = hidden_stats(hidden, s.model.output, s.transform, rows) if with_stats else None
        return loss, stats
    with autocast(s):
        logits = s.forward(*batch.inputs, keep)  # (N, V)
    logits = s.transform.loss_input(logits)  # e.g. softmax's cross-entropy would compute in bf16
    stats = batch_stats(logits, s.transform, rows) if with_stats else None
    # The sort-based entmax losses index out of range on NaN logits, so for them a NaN
    # anywhere is found first (one more pass over N x V); softmax's and alpha-ReLU's losses
    # simply come out non-finite, which the step catches without that pass.
    if s.transform.family == "entmax" and not is_finite(logits.detach().sum(dtype=torch.float32)):
        return logits.sum(dtype=torch.float32), stats  # backward runs on every process
    loss = s.transform.loss(logits, target, reduction="none", reuse_logits=True,
                            label_smoothing=s.config.train.label_smoothing)  # (N,)
    # Per-token losses come in the logits' dtype; a bf16 sum of a whole batch would keep
    # only 8 significant bits, so they are summed in fp32.
    return loss.sum(dtype=torch.float32), stats


def optimizer_step(s: Session, batches: list[Batch], with_stats: bool) -> dict | None:
    """One optimizer step over ``batches`` (this process's micro-batches)."""
    state = s.state
    pad = s.data.pad_id
    tgt = sum(b.n_tgt_tokens for b in batches)
    tokens = tgt + sum(int((b.src != pad).sum()) for b in batches)
    tgt, tokens = distributed.all_sum(s.ctx, [float(tgt), float(tokens)])
    # DDP averages gradients over processes; a step with no target token has loss 0 and zero
    # gradients (the losses' convention, transforms.reduction), not a division by zero.
    scale = s.ctx.world_size / max(tgt, 1.0)
    stats, loss_sum = None, torch.zeros((), dtype=torch.float64, device=s.ctx.device)
    for i, batch in enumerate(batches):
        batch = batch.to(s.ctx.device)
        last = i == len(batches) - 1
        sync = (contextlib.nullcontext() if last or not s.ctx.distributed
                else getattr(s.forward, "_orig_mod", s.forward).no_sync())
        with sync:
            loss, first_stats = micro_loss(s, batch, with_stats and i == 0)
            stats = stats or first_stats
            (loss * scale).backward()
        loss_sum += loss.detach()
    t = s.config.train
    norm = grad_norm(list(s.model.parameters()), t.clip_norm)
    # The gradient norm is global (DDP has summed the gradients); the loss is this process's.
    if distributed.any_true(s.ctx, not is_finite(loss_sum)) or not is_finite(norm):
        diverged(s.out, state.step + 1, {"loss": loss_sum, "grad_norm": norm}, s.saved_step,
                 s.ctx.is_main)
    lr = noam_lr(state.step + 1, t.lr, s.config.model.d_model, t.warmup)
    for group in s.optimizer.param_groups:
        group["lr"] = lr
    s.optimizer.step()
    s.optimizer.zero_grad(set_to_none=True)
    state.step += 1
    if s.average is not None:
        update_average(list(s.average.parameters()), list(s.model.parameters()),
                       average_weight(state.step, t.average_decay))
    state.interval["loss"] = state.interval["loss"] + loss_sum
    state.interval["tgt"] += tgt
    state.interval["tokens"] += tokens
    state.totals["tokens"] += tokens
    return {**(stats or {}), "lr": lr}


def check_weights(s: Session) -> None:
    """Before weights are validated or saved: an update with a finite gradient can still
    overflow them (a huge learning rate)."""
    state = s.state
    norm = torch.nn.utils.get_total_norm(list(s.model.parameters()))
    if not is_finite(norm):
        diverged(s.out, state.step, {"weight_norm": norm}, s.saved_step, s.ctx.is_main)


def train_row(s: Session, stats: dict) -> dict:
    """The training half of a log row (a collective: every process calls it); resets the
    interval sums."""
    state = s.state
    iv = state.interval
    loss = distributed.all_sum(s.ctx, [float(iv["loss"])])[0]
    row = {"train_loss": loss / max(iv["tgt"], 1.0),
           "tokens_per_s": iv["tokens"] / max(iv["seconds"], 1e-9), **stats}
    state.interval = {"loss": 0.0, "tgt": 0.0, "tokens": 0.0, "seconds": 0.0}
    return row
