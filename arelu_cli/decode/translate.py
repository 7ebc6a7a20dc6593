"""Translating raw text or a prepared split with a trained checkpoint (``arelu translate``).

Input lines are normalized as ``arelu prepare`` normalizes dev/test text, encoded with the
checkpoint's BPE, batched by source tokens and decoded (greedy or beam search,
:mod:`arelu_cli.decode.search`); the output has exactly one detokenized line per input line, in
order. An input line that is empty after normalization gives an empty output line without
running the model; a line longer than the model's positions (``[model] max_positions``) is
cut to fit, and the cut lines are counted in the run's record. The input may be ``-``
(stdin) and the output stdout, so that ``arelu translate`` works in a pipe. Line breaks
inside a translation (byte-level BPE can produce any character) are written as spaces so
that no reader splits an output line in two.
Validation during training translates its split through the same code (:func:`translate_split`
on a :class:`Translator`, greedy), so a dev BLEU is the BLEU of ``arelu translate --beam 1``.
With ``n_best > 1`` the output is an n-best list, ``i ||| translation ||| score`` per
hypothesis (Moses / fairseq style; ``i`` counts input lines from 0, ``score`` is the
length-normalized score the beam ranks by).

Next to an output file ``OUT`` goes ``OUT.json``: what was decoded, how, how fast, and
which input lines were cut; it lets ``arelu score --hyp OUT`` find the references of a
prepared split by itself. It is also how arelu knows an ``OUT`` as its own: an existing
``OUT`` without it (a user's file) is never replaced, nor is the input file (:func:`check_out`).

Without a checkpoint, the analysis commands take the run that ``arelu train`` made most
recently under ``./runs`` (:func:`latest_run`).
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from arelu_cli.model import checkpoint
from arelu_cli.model.attention import describe as describe_attention
from arelu_cli.config import Config, DecodeConfig
from arelu_cli.data import bpe
from arelu_cli.data.batching import batch_indices
from arelu_cli.data.clean import normalize
from arelu_cli.data.prepared import Prepared, load_prepared
from arelu_cli.decode.output import check_output, write_output
from arelu_cli.decode.search import (Hypothesis, beam_search, check_renormalize, greedy, max_lengths,
                                   ranking_score)
from arelu_cli.model.device import pick_device
from arelu_cli.util.errors import UserError
from arelu_cli.model.transformer import Transformer
from arelu_cli.registry import OutputTransform
from arelu_cli.util.signatures import signature

Progress = Callable[[int], None]
"""Called with the number of sentences just translated."""

RUNS = Path("runs")
"""Where ``arelu train`` puts its runs by default (``runs/RECIPE/TRANSFORM``)."""
SHOWN = 5
"""Line numbers of cut lines named in the warning; the record keeps them all."""


@dataclass(frozen=True)
class Translator:
    """What decoding needs: a model in eval mode, its output transform, the prepared corpus of
    its vocabulary and the device; a model in training is one too (validation's)."""

    model: Transformer
    transform: OutputTransform
    data: Prepared
    device: torch.device


@dataclass(frozen=True)
class Decoder(Translator):
    """A checkpoint opened for decoding: a :class:`Translator` with its config, its file and
    the optimizer step it was saved at (None in a checkpoint that records none)."""

    config: Config
    path: Path
    step: int | None = None

    def signature(self, **extra: object) -> str:
        return signature(transform=self.transform.name, alpha=self.transform.alpha,
                         tau=self.transform.tau, data=self.data.corpus,
                         attention=describe_attention(self.config.model),
                         checkpoint=str(self.path), **extra)


def resolve_checkpoint(path: str | Path) -> Path:
    """A checkpoint file; a run folder means its ``best.pt`` (else its ``last.pt``)."""
    path = Path(path)
    if path.is_dir():
        best = path / checkpoint.BEST
        return best if best.is_file() else path / checkpoint.LAST
    return path


def latest_run(root: str | Path = RUNS) -> Path:
    """The run folder under ``root`` (any depth) with the newest ``last.pt`` or ``best.pt``.

    Only finished or resumable runs count, i.e. folders with a ``last.pt``: a half-written
    checkpoint is a hidden temporary file, never ``last.pt`` itself, and an empty
    ``last.pt`` (a copy cut short, a placeholder) is no run."""
    root = Path(root)
    runs = [ckpt.parent for ckpt in root.rglob(checkpoint.LAST)
            if ckpt.is_file() and ckpt.stat().st_size > 0]  # an empty file holds no run
    if not runs:
        raise UserError(f"no trained run under {root}/ (a folder with {checkpoint.LAST}): train "
                        "one first (arelu train --transform 1.5-relu) or pass --checkpoint RUN")

    def newest(run: Path) -> int:
        return max(p.stat().st_mtime_ns for p in (run / checkpoint.LAST, run / checkpoint.BEST)
                   if p.is_file())
    return max(runs, key=lambda run: (newest(run), str(run)))


def open_checkpoint(path: str | Path, data: str | Path | None = None,
                    device: str = "auto", task: str | None = "translation") -> Decoder:
    """Load a checkpoint in eval mode with its prepared corpus (``data``, default the one it
    was trained on); a corpus with another vocabulary, or a model of another ``task``
    (``translation``, or ``lm`` for ``arelu generate``; None: either), is a UserError."""
    path = resolve_checkpoint(path)
    ckpt = checkpoint.load(path)
    found = ckpt["config"].get("data", {}).get("task", "translation")
    if task is not None and found != task:
        use = ("arelu generate or arelu lm-eval" if found == "lm" else
               "arelu translate and the translation analyses")
        raise UserError(f"{path} is a {'language' if found == 'lm' else 'translation'} model's "
                        f"checkpoint; use it with {use}, or give a "
                        f"{'language' if task == 'lm' else 'translation'} model's checkpoint")
    folder = Path(data if data is not None else ckpt["vocab"]["path"])
    if data is None and not folder.is_dir():
        raise UserError(f"the corpus {folder} that {path} was trained on is not there; pass "
                        "--data with its prepared folder")
    prepared = load_prepared(folder)
    checksum = checkpoint.vocab_checksum(prepared)
    if ckpt["vocab"]["checksum"] != checksum:
        raise UserError(f"checkpoint {path} was trained with another vocabulary (from "
                        f"{ckpt['vocab']['path']}) than {folder}; pass --data with the prepared "
                        "folder it was trained on")
    torch_device = pick_device(device)
    model, config, transform = checkpoint.load_model(path, torch_device)
    return Decoder(model=model, transform=transform, data=prepared, device=torch_device,
                   config=config, path=path, step=ckpt.get("step"))


def decode_config(decoder: Decoder, *, beam: int | None = None,
                  length_penalty: float | None = None,
                  max_tokens: int | None = None) -> DecodeConfig:
    """The checkpoint's [decode] settings with the given values replacing its own."""
    base = decoder.config.decode
    cfg = DecodeConfig(base.max_length_ratio, base.max_length_offset,
                       base.max_tokens if max_tokens is None else max_tokens,
                       base.beam if beam is None else beam,
                       base.length_penalty if length_penalty is None else length_penalty)
    if cfg.beam < 1:
        raise UserError(f"--beam must be at least 1 (1 is greedy search), got {cfg.beam}")
    if cfg.max_tokens < 1:
        raise UserError(f"--max-tokens must be positive, got {cfg.max_tokens}")
    if not (math.isfinite(cfg.length_penalty) and cfg.length_penalty >= 0):
        raise UserError(f"--length-penalty must be >= 0, got {cfg.length_penalty}")
    return cfg


def source_limit(decoder: Decoder) -> int:
    """The most source tokens the model takes: its positions less one for eos."""
    return decoder.model.cfg.max_positions - 1


def encode_lines(decoder: Decoder, lines: Sequence[str]) -> list[list[int]]:
    """Source ids of raw lines, normalized like prepared text (not cut; see :func:`cut`)."""
    return bpe.encode_lines(decoder.data.src_tokenizer, [normalize(line) for line in lines])


def cut(sources: Sequence[Sequence[int]], limit: int) -> tuple[list[Sequence[int]], list[int]]:
    """Each source cut to its first ``limit`` tokens, and the 0-based indices of those cut."""
    return ([ids[:limit] for ids in sources],
            [i for i, ids in enumerate(sources) if len(ids) > limit])


def pad_sources(sources: Sequence[Sequence[int]], pad_id: int, eos_id: int) -> torch.Tensor:
    """(B, S) right-padded sources, each followed by eos."""
    src = np.full((len(sources), max(len(s) for s in sources) + 1), pad_id, dtype=np.int64)
    for row, ids in enumerate(sources):
        src[row, :len(ids)], src[row, len(ids)] = ids, eos_id
    return torch.from_numpy(src)


def decode_batch(decoder: Translator, sources: Sequence[Sequence[int]], cfg: DecodeConfig, *,
                 n_best: int = 1, renormalize: bool = False) -> list[list[Hypothesis]]:
    """Hypotheses of a few non-empty sources decoded together; greedy when beam = n_best = 1."""
    data, model = decoder.data, decoder.model
    src = pad_sources(sources, data.pad_id, data.eos_id).to(decoder.device)
    limits = max_lengths(src, data.pad_id, cfg, cap=model.cfg.max_positions)
    if cfg.beam == 1 and n_best == 1:
        found = greedy(model, src, decoder.transform, bos_id=data.bos_id, eos_id=data.eos_id,
                       limits=limits, renormalize=renormalize)
        return [[hyp] for hyp in found]
    return beam_search(model, src, decoder.transform, bos_id=data.bos_id, eos_id=data.eos_id,
                       limits=limits, beam=cfg.beam, n_best=n_best,
                       length_penalty=cfg.length_penalty, renormalize=renormalize)


def decode_sources(decoder: Translator, sources: Sequence[Sequence[int]], cfg: DecodeConfig, *,
                   n_best: int = 1, renormalize: bool = False,
                   progress: Progress | None = None) -> list[list[Hypothesis]]:
    """Hypotheses of every source, in order, batched by source tokens (``cfg.max_tokens``);
    an empty source gets one empty hypothesis of score 0 without running the model."""
    found: list[list[Hypothesis]] = [[Hypothesis([], 0.0)] for _ in sources]
    real = np.array([i for i, ids in enumerate(sources) if len(ids)], dtype=np.int64)
    if progress is not None and len(sources) > len(real):
        progress(len(sources) - len(real))
    if len(real) == 0:
        return found
    sizes = np.array([len(sources[i]) + 1 for i in real], dtype=np.int64)
    budget = max(cfg.max_tokens, int(sizes.max()))  # a longer sentence goes alone
    for batch in batch_indices(sizes, budget, shuffle=False):
        indices = real[batch].tolist()
        hyps = decode_batch(decoder, [sources[i] for i in indices], cfg, n_best=n_best,
                            renormalize=renormalize)
        for index, hyp in zip(indices, hyps):
            found[index] = hyp
        if progress is not None:
            progress(len(indices))
    return found


def one_line(text: str) -> str:
    """``text`` with every character a reader could take for a line break made a space."""
    return " ".join(text.splitlines())


def detokenize(decoder: Translator, hyps: list[list[Hypothesis]], n_best: int,
               length_penalty: float) -> list[str]:
    """Output lines: the best translation per input, or the n-best list format."""
    texts = decoder.data.tgt_tokenizer.decode_batch([h.tokens for hs in hyps for h in hs])
    lines, at = [], 0
    for i, hs in enumerate(hyps):
        for hyp, text in zip(hs, texts[at:at + len(hs)]):
            if n_best == 1:
                lines.append(one_line(text))
                break
            lines.append(f"{i} ||| {one_line(text)} ||| {ranking_score(hyp, length_penalty):.6f}")
        at += len(hs)
    return lines


@dataclass(frozen=True)
class Translation:
    """What :func:`translate` made: output lines, hypotheses, how long decoding took, and
    which input lines were cut to the model's ``limit`` source tokens (1-based numbers)."""

    lines: list[str]
    hypotheses: list[list[Hypothesis]]
    seconds: float
    meta: dict
    truncated: list[int]
    limit: int

    @property
    def sentences_per_s(self) -> float:
        return len(self.hypotheses) / self.seconds if self.seconds > 0 else math.inf


def _sources(decoder: Decoder, lines: Sequence[str] | None,
             split: str | None) -> tuple[list[Sequence[int]], list[int]]:
    """Source ids, and the indices of raw lines cut to fit (a prepared split is never cut:
    a sentence too long for the model is an error there, not a silently lower BLEU)."""
    if (lines is None) == (split is None):
        raise UserError("give exactly one of --input FILE (raw text) and --split NAME (a split "
                        "of the prepared corpus)")
    if lines is not None:
        return cut(encode_lines(decoder, lines), source_limit(decoder))
    return split_sources(decoder.data, split), []


def split_sources(data: Prepared, split: str) -> list[Sequence[int]]:
    """Source ids of every sentence of a prepared split, in order."""
    encoded = data.split(split)
    return [encoded.src(i) for i in range(len(encoded))]


def translate_split(translator: Translator, split: str, cfg: DecodeConfig) -> list[str]:
    """The best translation of every sentence of a prepared split, in order: the lines that
    ``arelu translate --split SPLIT`` writes with the same settings (:func:`translate` runs
    the same :func:`decode_sources` and :func:`detokenize`). Validation scores these, so a
    run's dev BLEU is the BLEU of ``arelu translate --beam 1`` on its weights."""
    hyps = decode_sources(translator, split_sources(translator.data, split), cfg)
    return detokenize(translator, hyps, 1, cfg.length_penalty)


def translate(decoder: Decoder, cfg: DecodeConfig, *, lines: Sequence[str] | None = None,
              split: str | None = None, input_name: str | None = None, n_best: int = 1,
              renormalize: bool = False, progress: Progress | None = None) -> Translation:
    """Translate raw text ``lines`` (read from ``input_name``, e.g. by
    :func:`arelu_cli.data.textio.read_text_lines`)
    or a prepared split: exactly one of them; timed."""
    if not 1 <= n_best <= cfg.beam:
        raise UserError(f"--n-best must be between 1 and the beam size {cfg.beam}, got {n_best}")
    check_renormalize(decoder.transform, renormalize)
    sources, cut_lines = _sources(decoder, lines, split)
    truncated, limit = [i + 1 for i in cut_lines], source_limit(decoder)
    sync = torch.cuda.synchronize if decoder.device.type == "cuda" else (lambda: None)
    sync()
    start = time.perf_counter()
    hyps = decode_sources(decoder, sources, cfg, n_best=n_best, renormalize=renormalize,
                          progress=progress)
    sync()
    seconds = time.perf_counter() - start
    t = decoder.transform
    meta = {"checkpoint": str(decoder.path), "data": str(decoder.data.path),
            "input": input_name if lines is not None else None, "split": split,
            # lets `arelu score` refuse references of a split prepared again since
            "split_sha256": decoder.data.split_checksum(split) if split is not None else None,
            "transform": t.name, "alpha": t.alpha, "tau": t.tau, "beam": cfg.beam,
            "n_best": n_best, "length_penalty": cfg.length_penalty, "renormalize": renormalize,
            "max_length_ratio": cfg.max_length_ratio, "max_length_offset": cfg.max_length_offset,
            "sentences": len(sources), "seconds": seconds,
            "truncated_lines": len(truncated), "truncated_to_tokens": limit,
            "truncated_line_numbers": truncated,
            "signature": decoder.signature(beam=cfg.beam, renormalize=renormalize or None)}
    out_lines = detokenize(decoder, hyps, n_best, cfg.length_penalty)
    return Translation(out_lines, hyps, seconds, meta, truncated, limit)


def truncation_warning(translation: Translation) -> str | None:
    """One line that says which input lines were cut to fit the model, or None."""
    cut_lines = translation.truncated
    if not cut_lines:
        return None
    shown = ", ".join(map(str, cut_lines[:SHOWN])) + (", ..." if len(cut_lines) > SHOWN else "")
    return (f"{len(cut_lines)} of {len(translation.hypotheses)} input lines were longer than the "
            f"model's {translation.limit} source tokens ([model] max_positions) and were cut to "
            f"their first {translation.limit} tokens, so their translations cover only that "
            f"start: line{'s' if len(cut_lines) > 1 else ''} {shown}")


META_KEYS = ("checkpoint", "transform", "beam", "signature", "sentences_per_s")
"""Keys that every version of ``OUT.json`` has: what tells it from a user's JSON file."""


def check_out(out: str | Path | None, input_name: str | Path | None = None) -> None:
    """Refuse an output file whose writing would lose data: the input file itself (or
    ``OUT.json`` being it), or an existing non-empty ``OUT`` or ``OUT.json`` that ``arelu
    translate`` did not write (:func:`arelu_cli.decode.output.check_output`). Stdout
    (``None`` or ``-``) is always fine."""
    check_output(out, input_name, flag="--input", keys=META_KEYS, writer="arelu translate")


def write_translation(translation: Translation, out: str | Path | None) -> None:
    """The output lines to ``out`` (atomically, with ``out.json``), or as UTF-8 to stdout
    (``None`` or ``-``) whatever the locale's encoding. A file :func:`check_out` refuses
    (the input, a user's file) is a :class:`UserError` before anything is written."""
    write_output(translation.lines, out,
                 {**translation.meta, "sentences_per_s": translation.sentences_per_s},
                 lambda path: check_out(path, translation.meta.get("input")))
