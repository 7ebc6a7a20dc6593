"""``arelu sparsity --attention``: how many attention weights are exactly zero, per layer and
kind, and where the cross-attention looks (beyond the paper: its Conclusion's open question
of alpha-ReLU as the attention transform; :mod:`arelu_cli.model.attention`).

The steps are those of :mod:`arelu_cli.analysis.steps`: along the best beam hypothesis
(decoded with the key/value cache, then teacher-forced, which gives the same weights) or
teacher-forced on the reference. Per checkpoint, split, walk, kind (``encoder`` self,
``decoder`` self, ``cross``) and layer, one CSV row counts, over all heads:

* ``weights``: the (query, visible key) pairs: real source positions attending to real
  source tokens (encoder), steps attending to themselves and earlier steps (decoder),
  steps attending to real source tokens (cross). Masked keys are exactly zero for every
  transform and are not counted;
* ``zeros`` / ``zero_fraction``: those whose weight is exactly 0 (softmax: none);
* ``queries`` / ``empty_queries``: query rows of one head, and those whose weights are all
  zero, i.e. whose attention outputs the zero vector (alpha-ReLU's empty support).

NaN weights (a checkpoint whose weights are not finite) are never counted as non-zero: they
are a one-line :class:`UserError` (:func:`refuse_nan`), as NaN output logits are
(:func:`arelu_cli.decode.search.refuse_nan`).

:func:`heatmap_rows` gives the head-averaged cross-attention of a few sentences, target
step x source token, per layer, for :func:`arelu_cli.studies.plots.plot_attention_heatmaps`;
:func:`run` writes both CSVs for a list of checkpoints.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from torch import nn

from arelu_cli.analysis.steps import Along, split_batches, split_indices, step_targets
from arelu_cli.config import DecodeConfig
from arelu_cli.data.batching import Batch
from arelu_cli.util.errors import UserError
from arelu_cli.model.transformer import Transformer
from arelu_cli.util.results import write_rows
from arelu_cli.decode.translate import Decoder, decode_config, open_checkpoint

Layer = tuple[str, int, nn.Module]
"""(kind, layer index, the attention module of :mod:`arelu_cli.model.transformer`)."""


def attention_layers(model: Transformer) -> list[Layer]:
    """(kind, layer index, attention module) of every attention of the model."""
    return ([("encoder", i, layer.attn) for i, layer in enumerate(model.encoder)]
            + [("decoder", i, layer.self_attn) for i, layer in enumerate(model.decoder)]
            + [("cross", i, layer.cross_attn) for i, layer in enumerate(model.decoder)])


@contextmanager
def kept_weights(model: Transformer) -> Iterator[list[Layer]]:
    """Every attention keeps its last weights while inside; forgets them on leaving."""
    layers = attention_layers(model)
    for _, _, module in layers:
        module.keep_weights = True
    try:
        yield layers
    finally:
        for _, _, module in layers:
            module.keep_weights, module.weights = False, None


def visible_pairs(kind: str, src_real: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
    """(B, 1, T, S) True at the (query, key) pairs of a kind that are counted (see the
    module docstring); ``src_real`` (B, S) and ``keep`` (B, T) mark real tokens and steps."""
    if kind == "encoder":
        return src_real[:, None, :, None] & src_real[:, None, None, :]
    if kind == "cross":
        return keep[:, None, :, None] & src_real[:, None, None, :]
    steps = keep.shape[1]
    past = torch.ones(steps, steps, dtype=torch.bool, device=keep.device).tril()
    return keep[:, None, :, None] & past


NAN_WEIGHTS = ("the model gave NaN attention weights while measuring attention sparsity: its "
               "weights are not finite (a run that diverged?); use an earlier checkpoint of it")


def refuse_nan(weights: torch.Tensor, visible: torch.Tensor | None = None) -> None:
    """A one-line :class:`UserError` when ``weights`` hold a NaN (where ``visible``)."""
    nan = torch.isnan(weights)
    if bool((nan & visible if visible is not None else nan).any()):
        raise UserError(NAN_WEIGHTS)


@contextmanager
def nan_scores_refused(model: Transformer) -> Iterator[None]:
    """The sort-based attention transforms (entmax, sparsemax) fail with an index error on
    NaN scores instead of giving NaN weights: that too is :data:`NAN_WEIGHTS` when the
    model's weights are not finite."""
    try:
        yield
    except RuntimeError:
        if not all(bool(torch.isfinite(p).all()) for p in model.parameters()):
            raise UserError(NAN_WEIGHTS) from None
        raise


def zero_counts(weights: torch.Tensor, visible: torch.Tensor) -> dict[str, int]:
    """Counts of one attention's weights (B, H, T, S) over the ``visible`` pairs."""
    visible = visible.expand_as(weights)
    nonzero = (weights != 0) & visible
    rows = visible.any(-1)                                            # (B, H, T)
    return {"weights": int(visible.sum()), "zeros": int((visible & (weights == 0)).sum()),
            "queries": int(rows.sum()), "empty_queries": int((rows & ~nonzero.any(-1)).sum())}


@torch.no_grad()
def batch_counts(decoder: Decoder, batch: Batch, along: Along,
                 cfg: DecodeConfig) -> dict[tuple[str, int], dict[str, int]]:
    """Counts of every (kind, layer) over one batch's steps; NaN weights are refused."""
    tgt_in, _, keep = step_targets(decoder, batch, along, cfg)
    src_real = batch.src != decoder.data.pad_id
    counts = {}
    with kept_weights(decoder.model) as layers:
        with nan_scores_refused(decoder.model):
            decoder.model(batch.src, tgt_in)
        for kind, i, module in layers:
            visible = visible_pairs(kind, src_real, keep)
            refuse_nan(module.weights, visible)
            counts[(kind, i)] = zero_counts(module.weights, visible)
    return counts


def measure(decoder: Decoder, splits: list[str], alongs: list[Along], cfg: DecodeConfig, *,
            max_sentences: int | None = None, seed: int = 0) -> list[dict]:
    """One row per split, walk, kind and layer (see the module docstring)."""
    rows = []
    labels = {kind: module.transform.label for kind, _, module in attention_layers(decoder.model)}
    for split in splits:
        indices = split_indices(decoder, split, max_sentences, seed)
        for along in alongs:
            totals: dict[tuple[str, int], dict[str, int]] = {}
            for batch in split_batches(decoder, split, indices, cfg.max_tokens):
                for key, counts in batch_counts(decoder, batch, along, cfg).items():
                    into = totals.setdefault(key, dict.fromkeys(counts, 0))
                    for name, value in counts.items():
                        into[name] += value
            sig = decoder.signature(split=split, along=along,
                                    beam=cfg.beam if along == "beam" else None,
                                    sentences=len(indices))
            rows += [{"transform": decoder.transform.name, "attention": labels[kind],
                      "split": split, "along": along, "kind": kind, "layer": layer, **c,
                      "zero_fraction": c["zeros"] / max(c["weights"], 1),
                      "empty_fraction": c["empty_queries"] / max(c["queries"], 1),
                      "sentences": len(indices), "checkpoint": str(decoder.path),
                      "signature": sig}
                     for (kind, layer), c in totals.items()]
    return rows


def _tokens(tokenizer, ids: list[int]) -> list[str]:
    return [tokenizer.id_to_token(i) or str(i) for i in ids]


@torch.no_grad()
def heatmap_rows(decoder: Decoder, split: str, indices: np.ndarray, along: Along,
                 cfg: DecodeConfig) -> list[dict]:
    """Head-averaged cross-attention weights of the sentences ``indices`` of a split, one
    row per (sentence, layer, target step, source token), tokens as BPE pieces."""
    data, rows = decoder.data, []
    for batch in split_batches(decoder, split, np.asarray(indices), cfg.max_tokens):
        tgt_in, tgt_out, keep = step_targets(decoder, batch, along, cfg)
        with kept_weights(decoder.model) as layers:
            with nan_scores_refused(decoder.model):
                decoder.model(batch.src, tgt_in)
            cross = [module.weights.mean(1) for kind, _, module in layers if kind == "cross"]
        visible = visible_pairs("cross", batch.src != data.pad_id, keep)[:, 0]  # (B, T, S)
        for weights in cross:
            refuse_nan(weights, visible)
        for b, sentence in enumerate(batch.indices.tolist()):
            src_ids = batch.src[b][batch.src[b] != data.pad_id].tolist()
            tgt_ids = tgt_out[b][keep[b]].tolist()
            src_tok = _tokens(data.src_tokenizer, src_ids)
            tgt_tok = _tokens(data.tgt_tokenizer, tgt_ids)
            for layer, weights in enumerate(cross):                   # (B, T, S) each
                grid = weights[b, :len(tgt_ids), :len(src_ids)].float().cpu().numpy()
                rows += [{"split": split, "along": along, "sentence": sentence, "layer": layer,
                          "target_pos": t, "target_token": tgt_tok[t], "source_pos": s,
                          "source_token": src_tok[s], "weight": float(grid[t, s])}
                         for t in range(len(tgt_ids)) for s in range(len(src_ids))]
    return rows


def heatmaps_path(out: str | Path) -> Path:
    """Where :func:`run` writes the heatmap rows beside the CSV ``out``."""
    out = Path(out)
    return out.with_name(f"{out.stem}_heatmaps.csv")


def run(checkpoints: Sequence[str | Path], splits: list[str], alongs: list[Along],
        out: str | Path, *, data: str | Path | None = None, device: str = "auto",
        beam: int | None = None, max_tokens: int | None = None,
        max_sentences: int | None = None, seed: int = 0,
        heatmaps: int = 3) -> tuple[pd.DataFrame, list[Path]]:
    """Measure every checkpoint into ``out``, and the cross-attention of the first
    ``heatmaps`` measured sentences of the first split (along the beam output when it is
    measured) into :func:`heatmaps_path`; the rows of ``out`` and the files written."""
    if heatmaps < 0:
        raise UserError(f"--heatmaps must be >= 0 (0 draws none), got {heatmaps}")
    rows, maps = [], []
    for path in checkpoints:
        decoder = open_checkpoint(path, data, device)
        cfg = decode_config(decoder, beam=beam, max_tokens=max_tokens)
        rows += measure(decoder, splits, alongs, cfg, max_sentences=max_sentences, seed=seed)
        if heatmaps:
            chosen = split_indices(decoder, splits[0], max_sentences, seed)[:heatmaps]
            along = "beam" if "beam" in alongs else alongs[0]
            label = decoder.model.decoder[0].cross_attn.transform.label
            maps += [{"checkpoint": str(decoder.path), "attention": label, **r}
                     for r in heatmap_rows(decoder, splits[0], chosen, along, cfg)]
    frame, written = write_rows(rows, out), [Path(out)]
    if maps:
        write_rows(maps, heatmaps_path(out))
        written.append(heatmaps_path(out))
    return frame, written
