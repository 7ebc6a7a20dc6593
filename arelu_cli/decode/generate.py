"""Open-ended generation with a trained language model (``arelu generate``).

A continuation is generated after the context ``[eos] + prompt`` (a line of the training
stream starts after an end-of-sentence token, :mod:`arelu_cli.data.blocks`), one token at a
time with the model's key/value cache, each chosen by :func:`arelu_cli.decode.sampling.next_tokens`
from the logits and the checkpoint's output transform (``sample``: the transform's own
distribution, alpha-ReLU's divided by its sum on its support, with the temperature rule,
top-k / top-p and alpha-ReLU's ``tau_shift`` of :mod:`arelu_cli.decode.sampling`; or
``greedy``). It stops at the end-of-sentence
token (not written) or after ``max_tokens`` new tokens, or when the context reaches
``[model] max_positions``. An empty prompt is an unconditional sample. A prompt longer than
:func:`prompt_limit` keeps its last tokens (the context nearest the continuation), leaving
room for ``max_tokens`` new ones (or for half the positions, if fewer); the cut prompts are
counted in the record. So are prompt words outside a word-level vocabulary (read as
``<unk>``, :func:`unknown_words`) and, for alpha-ReLU, the draws whose support was empty
and fell back to the arg-max (:class:`Draws`).

Prompts of a batch are fed together, position by position: a row still inside its prompt is
given its next prompt token, the others their sampled one, so every row keeps its own
positions without padding. Draws come from one ``torch.Generator`` seeded with ``seed``:
the same checkpoint, prompts, decoding, seed and batch size give the same text.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from arelu_cli.data import bpe
from arelu_cli.data.clean import normalize
from arelu_cli.data.prepared import Prepared
from arelu_cli.util.errors import UserError
from arelu_cli.decode.output import check_output, write_output
from arelu_cli.decode.translate import Decoder, cut, one_line
from arelu_cli.model.lm import LanguageModel
from arelu_cli.decode.sampling import Decoding, empty_support, next_tokens
from arelu_cli.registry import OutputTransform
from arelu_cli.util.signatures import machine


@dataclass(frozen=True)
class Generated:
    """What :func:`generate` made: one continuation per prompt (text and ids), how long it
    took, which prompts were cut (1-based) and the run's record."""

    lines: list[str]
    tokens: list[list[int]]
    seconds: float
    truncated: list[int]
    meta: dict


@dataclass
class Draws:
    """The tokens :func:`sample_batch` drew for continuations, and how many of them fell back
    to the arg-max because alpha-ReLU's support was empty (a large ``--tau`` shift: then
    sampling is greedy decoding)."""

    total: int = 0
    fallback: int = 0


def prompt_limit(model: LanguageModel, max_tokens: int) -> int:
    """The longest prompt kept: the positions less one for the leading end-of-sentence and
    ``max_tokens`` for the continuation, but at least half of them (a long continuation
    asked of a short model still gets some context)."""
    positions = model.cfg.max_positions - 1
    return max(positions - max_tokens, positions // 2, 1)


def encode_prompts(data: Prepared, lines: Sequence[str]) -> list[list[int]]:
    """Prompt ids of raw lines, normalized like prepared text."""
    return bpe.encode_lines(data.tgt_tokenizer, [normalize(line) for line in lines])


def unknown_words(data: Prepared, lines: Sequence[str]) -> list[str]:
    """The words of raw prompt lines that a word-level vocabulary reads as ``<unk>`` (a
    literal ``<unk>`` is the corpus's own token, not counted); byte-level BPE has none."""
    unk = bpe.SPECIALS[bpe.UNK_ID]
    found = []
    for line in lines:
        text = normalize(line)
        encoding = data.tgt_tokenizer.encode(text, add_special_tokens=False)
        found += [text[a:b] for i, (a, b) in zip(encoding.ids, encoding.offsets)
                  if i == bpe.UNK_ID and text[a:b] != unk]
    return found


def keep_last(prompts: Sequence[Sequence[int]], limit: int) -> tuple[list[list[int]], list[int]]:
    """Each prompt cut to its last ``limit`` tokens, and the 0-based indices of those cut."""
    _, cut_rows = cut(prompts, limit)
    return [list(p[len(p) - limit:]) if len(p) > limit else list(p) for p in prompts], cut_rows


def split_prompts(data: Prepared, split: str, prefix_tokens: int
                  ) -> tuple[list[list[int]], list[list[int]]]:
    """The test-style prompts of a split (Martins et al., 2020): each line longer than
    ``prefix_tokens`` gives its first ``prefix_tokens`` tokens as a prompt and the rest as the
    human continuation; shorter lines are skipped."""
    if prefix_tokens < 1:
        raise UserError(f"--prefix-tokens must be at least 1, got {prefix_tokens}")
    ids, offsets = data.text_ids(split)
    prompts, humans = [], []
    for i in range(len(offsets) - 1):
        line = ids[offsets[i]:offsets[i + 1]].tolist()
        if len(line) > prefix_tokens:
            prompts.append(line[:prefix_tokens])
            humans.append(line[prefix_tokens:])
    if not prompts:
        raise UserError(f"no line of {split} is longer than --prefix-tokens {prefix_tokens}; "
                        "give fewer prefix tokens")
    return prompts, humans


@torch.no_grad()
def sample_batch(model: LanguageModel, prompts: Sequence[Sequence[int]],
                 transform: OutputTransform, decoding: Decoding, generator: torch.Generator,
                 max_tokens: int, eos_id: int, device: torch.device,
                 draws: Draws | None = None) -> list[list[int]]:
    """The continuations (ids, no end-of-sentence) of a batch of prompts (module docstring);
    ``draws`` (if given) counts the drawn tokens and alpha-ReLU's arg-max fallbacks."""
    count = draws is not None and transform.family == "relu" and decoding.method == "sample"
    contexts = [[eos_id, *p] for p in prompts]
    width = max(len(c) for c in contexts)
    forced = torch.full((len(contexts), width), -1, dtype=torch.int64)
    for row, context in enumerate(contexts):
        forced[row, :len(context)] = torch.tensor(context, dtype=torch.int64)
    forced = forced.to(device)
    out: list[list[int]] = [[] for _ in contexts]
    done = [False] * len(contexts)
    state, current = model.start(), forced[:, 0]
    for position in range(model.cfg.max_positions):
        logits = model.step(current, state)  # (B, V): the token at position + 1
        try:
            chosen = next_tokens(logits, transform, decoding, generator)
        except ValueError as err:  # NaN logits, or a decoding the transform does not take
            raise UserError(str(err)) from None
        prompting = forced[:, position + 1] >= 0 if position + 1 < width else None
        empty = empty_support(logits, transform, decoding).tolist() if count else None
        for row, token in enumerate(chosen.tolist()):
            if done[row] or (prompting is not None and bool(prompting[row])):
                continue
            if empty is not None:
                draws.total += 1
                draws.fallback += empty[row]
            if token == eos_id:
                done[row] = True
            else:
                out[row].append(token)
                done[row] = len(out[row]) >= max_tokens
        if all(done):
            break
        current = chosen if prompting is None else torch.where(prompting, forced[:, position + 1],
                                                               chosen)
    return out


def generate(decoder: Decoder, prompts: Sequence[Sequence[int]], decoding: Decoding, *,
             seed: int, batch_size: int, max_tokens: int, source: dict) -> Generated:
    """Continuations of every prompt, in order, ``batch_size`` at a time; ``source`` says
    where the prompts came from (recorded)."""
    if not prompts:
        raise UserError("no prompts to continue (an empty file?): give one prompt a line, an "
                        "empty line for an unconditional sample, or --unconditional N")
    if batch_size < 1:
        raise UserError(f"--batch-size must be at least 1, got {batch_size}")
    if max_tokens < 1:
        raise UserError(f"--max-tokens must be at least 1, got {max_tokens}")
    try:
        decoding.check(decoder.transform)
    except ValueError as err:
        raise UserError(str(err)) from None
    limit = prompt_limit(decoder.model, max_tokens)
    kept, cut_rows = keep_last(prompts, limit)
    generator = torch.Generator(device=decoder.device).manual_seed(seed)
    start, found, draws = time.perf_counter(), [], Draws()
    for first in range(0, len(kept), batch_size):
        found += sample_batch(decoder.model, kept[first:first + batch_size], decoder.transform,
                              decoding, generator, max_tokens, decoder.data.eos_id,
                              decoder.device, draws)
    seconds = time.perf_counter() - start
    lines = [one_line(text) for text in decoder.data.tgt_tokenizer.decode_batch(found)]
    t = decoder.transform
    meta = {"checkpoint": str(decoder.path), "data": str(decoder.data.path), **source,
            "transform": t.name, "alpha": t.alpha, "tau": t.tau,
            "decoding": {**asdict(decoding), "label": decoding.label()}, "seed": seed,
            "batch_size": batch_size, "max_tokens": max_tokens, "prompts": len(kept),
            "generated_tokens": sum(map(len, found)),
            "hit_max_tokens": sum(len(ids) >= max_tokens for ids in found),
            "truncated_prompts": len(cut_rows), "truncated_to_tokens": limit,
            "truncated_prompt_numbers": [i + 1 for i in cut_rows],
            "draws": draws.total, "argmax_fallbacks": draws.fallback, "seconds": seconds,
            "machine": machine(decoder.device),
            "signature": decoder.signature(decoding=decoding.label(), seed=seed,
                                           batch_size=batch_size)}
    return Generated(lines, found, seconds, [i + 1 for i in cut_rows], meta)


META_KEYS = ("checkpoint", "decoding", "seed", "signature")
"""Keys every ``OUT.json`` of ``arelu generate`` has: what tells it from a user's JSON file."""


def check_out(out: Path | None, prompts: str | None) -> None:
    """Refuse an output that would lose data: the prompts file, or an existing ``OUT`` /
    ``OUT.json`` that ``arelu generate`` did not write
    (:func:`arelu_cli.decode.output.check_output`). Stdout (None or ``-``) is fine."""
    check_output(out, prompts, flag="--prompts", keys=META_KEYS, writer="arelu generate")


def write_generation(generated: Generated, out: Path | None) -> None:
    """One continuation per line to ``out`` (atomically, with ``OUT.json``), or to stdout."""
    meta = {**generated.meta, "tokens_per_s": generated.meta["generated_tokens"]
            / max(generated.seconds, 1e-9)}
    write_output(generated.lines, out, meta,
                 lambda path: check_out(path, generated.meta.get("prompts_file")))
