"""``arelu lm-eval``: a language model's metrics on a split for one decoding, after
Martins, Marinho & Martins (2020), "Sparse Text Generation".

Per checkpoint, one CSV row per (model, decoding, split):

* **teacher-forced** on the split's blocks (:mod:`arelu_cli.data.blocks`, the checkpoint's
  ``[data] block_size``; with ``stride`` less than it, sliding windows that score each token
  once with at least ``block_size - stride`` tokens of context), from the distribution the
  decoding samples from
  (:func:`arelu_cli.decode.sampling.sampling_probs`: softmax, sparsemax and entmax's own
  ``p``, alpha-ReLU's ``p`` divided by its sum on its support, the arg-max's point mass where
  it is empty, each after the temperature, top-k and top-p; a one-hot for greedy): ``ppl`` (softmax only, empty
  where a target gets probability 0), ``eps_ppl`` at ``eps`` tuned on ``dev_split`` (the best
  dev epsilon-perplexity over :data:`arelu_cli.analysis.lm_metrics.EPS_GRID`, reported as
  ``dev_eps_ppl``), ``sp``, ``jsd``, ``rep_l`` / ``wrep_l`` for l in 16, 32, 128, the support
  size (mean, quantiles) and ``zero_share`` (targets of probability 0), by
  :mod:`arelu_cli.analysis.lm_metrics`;
* **on generated text**: continuations of the split's prompts (the first ``prefix_tokens``
  tokens of every longer line, :func:`arelu_cli.decode.generate.split_prompts`, the same for
  every system) written to ``generations`` with their ``.json`` record, their distinct-1..4,
  looping share, Zipf coefficient, self-BLEU and length, and each one's distance to the same
  statistic of the human continuations (``<name>_gap``; the human values are ``human_<name>``).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import torch

from arelu_cli.analysis import lm_metrics as M
from arelu_cli.data.blocks import window_batches
from arelu_cli.util.errors import UserError
from arelu_cli.decode.generate import (Generated, check_out, generate, split_prompts,
                                       write_generation)
from arelu_cli.decode.output import meta_path
from arelu_cli.decode.translate import Decoder
from arelu_cli.decode.sampling import Decoding
from arelu_cli.util.atomic import atomic_write_text
from arelu_cli.util.ownership import check_ours, csv_header

TEXT_STATS = ("distinct_1", "distinct_2", "distinct_3", "distinct_4", "loop", "zipf",
              "self_bleu", "length")
TEACHER = ("ppl", "eps_ppl", "eps", "dev_eps_ppl", "sp", "jsd",
           *(f"{k}_{w}" for k in ("rep", "wrep") for w in M.WINDOWS),
           "support_mean", *(f"support_q{round(100 * q)}" for q in M.QUANTILES), "zero_share",
           "steps")
COLUMNS = ("checkpoint", "transform", "alpha", "tau", "seed", "decoding", "split", "stride",
           *TEACHER,
           *TEXT_STATS, *(f"{s}_gap" for s in TEXT_STATS), *(f"human_{s}" for s in TEXT_STATS),
           "prompts", "prefix_tokens", "gen_seed", "generations", "signature")
KEY = ("checkpoint", "decoding", "split", "stride", "gen_seed")
"""A row is replaced by a later one with the same key; other rows are kept."""


@dataclass(frozen=True)
class EvalSettings:
    """What ``lm-eval`` measures on: the split, the dev split that tunes epsilon, the
    prompts, and the generation settings."""

    split: str = "test"
    dev_split: str = "dev"
    prefix_tokens: int = 5
    max_prompts: int = 0
    """Prompts generated from (the split's first ones); 0: all."""
    max_tokens: int = 100
    seed: int = 0
    batch_size: int = 32
    eval_tokens: int = 2048
    """Tokens per teacher-forced batch (its probabilities are N x V)."""
    stride: int = 0
    """Teacher-forced windows start every ``stride`` tokens; 0: the checkpoint's block size
    (blocks that do not overlap, as in training)."""

    def window_stride(self, block_size: int) -> int:
        """The stride in force for a model of ``block_size`` positions per block."""
        stride = self.stride or block_size
        if not 1 <= stride <= block_size:
            raise UserError(f"--stride must be in [1, {block_size}] (the checkpoint's "
                            f"block_size), got {stride}")
        return stride


@torch.no_grad()
def step_values(decoder: Decoder, split: str, decoding: Decoding,
                settings: EvalSettings) -> dict:
    """Teacher-forced per-step values of the split's windows
    (:func:`arelu_cli.analysis.lm_metrics.batch_step_values`)."""
    data, model = decoder.data, decoder.model
    block = decoder.config.data.block_size
    found = []
    for batch, scored in window_batches(data, split, max(settings.eval_tokens, block), block,
                                        settings.window_stride(block)):
        batch = batch.to(decoder.device)
        try:
            values = M.batch_step_values(model(batch.tgt_in), batch.tgt_out, decoder.transform,
                                         decoding, ignore_index=data.pad_id,
                                         scored=scored.to(decoder.device))
        except ValueError as err:  # NaN logits
            raise UserError(str(err)) from None
        found.append({k: v.cpu() for k, v in values.items()})
    return M.concat(found)


def teacher_forced(decoder: Decoder, decoding: Decoding, settings: EvalSettings) -> dict:
    """The teacher-forced columns of a row (module docstring)."""
    vocab = decoder.data.vocab_size
    dev = step_values(decoder, settings.dev_split, decoding, settings)
    eps, dev_eps_ppl = M.tune_eps(dev["p_target"], vocab)
    found = M.summarize(step_values(decoder, settings.split, decoding, settings),
                        vocab, eps)
    ppl = found["ppl"] if decoder.transform.family == "softmax" and math.isfinite(found["ppl"]) \
        else None
    return {**{k: found[k] for k in TEACHER if k in found}, "ppl": ppl, "dev_eps_ppl": dev_eps_ppl}


def human_stats(decoder: Decoder, settings: EvalSettings) -> tuple[list[list[int]], dict]:
    """The prompts of the split and the statistics of its human continuations."""
    prompts, humans = split_prompts(decoder.data, settings.split, settings.prefix_tokens)
    if settings.max_prompts:
        prompts, humans = prompts[:settings.max_prompts], humans[:settings.max_prompts]
    return prompts, M.text_stats(humans, seed=settings.seed)


def evaluate(decoder: Decoder, decoding: Decoding, settings: EvalSettings,
             generations: Path) -> tuple[dict, Generated]:
    """One CSV row, ``decoder``'s metrics for ``decoding``, and its generations (to be
    written to ``generations``, which the row names)."""
    try:
        decoding.check(decoder.transform)
    except ValueError as err:
        raise UserError(f"{decoder.path}: {err}") from None
    stride = settings.window_stride(decoder.config.data.block_size)
    prompts, human = human_stats(decoder, settings)
    generated = generate(decoder, prompts, decoding, seed=settings.seed,
                         batch_size=settings.batch_size, max_tokens=settings.max_tokens,
                         source={"split": settings.split, "prefix_tokens": settings.prefix_tokens,
                                 "split_sha256": decoder.data.split_checksum(settings.split)})
    stats = M.text_stats(generated.tokens, seed=settings.seed)
    t = decoder.transform
    row = {"checkpoint": str(decoder.path), "transform": t.name, "alpha": t.alpha, "tau": t.tau,
           "seed": decoder.config.train.seed, "decoding": decoding.label(),
           "split": settings.split, "stride": stride,
           **teacher_forced(decoder, decoding, settings), **stats,
           **M.distance_to_human(stats, human), **{f"human_{k}": v for k, v in human.items()},
           "prompts": len(prompts), "prefix_tokens": settings.prefix_tokens,
           "gen_seed": settings.seed, "generations": str(generations),
           "signature": decoder.signature(decoding=decoding.label(), split=settings.split,
                                          stride=stride, gen_seed=settings.seed)}
    return row, generated


def generation_path(folder: Path, decoder: Decoder, decoding: Decoding,
                    settings: EvalSettings) -> Path:
    """``FOLDER/RUN-DECODING-SPLIT-seedS.txt``, ``RUN`` the checkpoint's run folder name."""
    return folder / (f"{decoder.path.parent.name}-{decoding.label()}-{settings.split}"
                     f"-seed{settings.seed}.txt")


def run(decoders: list[Decoder], decoding: Decoding, settings: EvalSettings, out: Path,
        folder: Path) -> pd.DataFrame:
    """Every checkpoint's row; the generations and the CSV are written only once all are
    measured (a failure leaves nothing new behind)."""
    paths = [generation_path(folder, d, decoding, settings) for d in decoders]
    if len(set(paths)) < len(paths):
        raise UserError("two checkpoints are in run folders of the same name, so their "
                        "generations would share a file; evaluate them with different "
                        "--generations folders")
    for decoder, path in zip(decoders, paths):
        check_out(path, None)
        check_same_checkpoint(path, decoder.path)
    if csv_header(out) not in (None, list(COLUMNS)):
        raise UserError(f"{out} exists and is not an arelu lm-eval CSV; choose another --out")
    results = [evaluate(d, decoding, settings, path) for d, path in zip(decoders, paths)]
    for (_, generated), path in zip(results, paths):
        write_generation(generated, path)
    return merge_rows([row for row, _ in results], out)


def _recorded_checkpoint(path: Path) -> str | None:
    """The checkpoint that the generations in ``path`` came from (its ``.json`` record)."""
    try:
        return json.loads(meta_path(path).read_text(encoding="utf-8")).get("checkpoint")
    except (OSError, UnicodeDecodeError, ValueError, AttributeError):
        return None


def check_same_checkpoint(path: Path, checkpoint: Path) -> None:
    """Refuse to replace generations of another checkpoint: an earlier call's row (of this
    or another CSV) names ``path`` as its model's text, and two run folders of the same name
    (``runs/sm``, ``other/sm``) map to the same file name."""
    recorded = _recorded_checkpoint(path)
    same = recorded is None or Path(recorded).resolve() == Path(checkpoint).resolve()
    check_ours(path, lambda _: same, writer=f"arelu lm-eval of {checkpoint}",
               advice=f"it holds the generations of {recorded}, which an lm-eval row names; "
                      f"give {checkpoint} another --generations folder")


def merge_rows(rows: list[dict], path: Path) -> pd.DataFrame:
    """Write ``rows`` into the CSV ``path`` atomically: an earlier row of the same
    (checkpoint, decoding, split, gen_seed) is replaced, the others kept. A file with
    another header is refused."""
    header = csv_header(path)
    if header is not None and header != list(COLUMNS):
        raise UserError(f"{path} exists and is not an arelu lm-eval CSV (its header is "
                        f"{','.join(header)[:60]!r}); choose another --out")
    new = pd.DataFrame(rows, columns=list(COLUMNS))
    if header is not None:
        old = pd.read_csv(path)
        keys = set(new[list(KEY)].astype(str).itertuples(index=False, name=None))
        kept = old[[k not in keys for k in old[list(KEY)].astype(str).itertuples(
            index=False, name=None)]]
        new = pd.concat([kept, new], ignore_index=True) if len(kept) else new
    atomic_write_text(path, new.to_csv(index=False))
    return new
