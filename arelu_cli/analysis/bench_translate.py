"""``arelu bench translate``: time to translate the same test set with each model and beam
size, normalized by the smallest time (paper, Fig. "infTime": softmax and 1.5-ReLU decode at
about the same speed, 1.5-entmax (full sort) about twice as slowly, at every beam size).

Every (checkpoint, beam) pair is timed ``repeats`` times, the pairs interleaved within each
repeat so that machine noise spreads over all of them; the row keeps the median. Decoding is
:func:`arelu_cli.translate.decode_sources`, as ``arelu translate`` runs it (batched by source
tokens, greedy for beam 1), after one untimed warm-up batch per checkpoint.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import pandas as pd
import torch
from rich.table import Table

from arelu_cli.analysis.steps import sample_indices
from arelu_cli.analysis.timing import synchronize
from arelu_cli.errors import UserError
from arelu_cli.translate import Decoder, decode_config, decode_sources, open_checkpoint


def parse_beams(text: str) -> list[int]:
    """``"1,2,4"`` -> [1, 2, 4]; every beam at least 1."""
    try:
        beams = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise UserError(f"--beams takes comma-separated integers, e.g. 1,2,4,8,12; "
                        f"got {text!r}") from None
    if not beams or min(beams) < 1:
        raise UserError(f"--beams must list beam sizes of at least 1, got {text!r}")
    return beams


def _time(decoder: Decoder, sources: Sequence[Sequence[int]], beam: int,
          max_tokens: int | None) -> float:
    cfg = decode_config(decoder, beam=beam, max_tokens=max_tokens)
    synchronize(decoder.device)
    start = time.perf_counter()
    decode_sources(decoder, sources, cfg)
    synchronize(decoder.device)
    return time.perf_counter() - start


def bench_translate(checkpoints: Sequence[str | Path], beams: Sequence[int], split: str, *,
                    data: str | Path | None = None, device: str = "auto",
                    max_sentences: int | None = None, repeats: int = 1,
                    max_tokens: int | None = None,
                    log: Callable[[str], None] | None = None) -> list[dict]:
    """One row per checkpoint and beam: median seconds, sentences/s, and ``normalized``, the
    time over the smallest time of the run."""
    if repeats < 1:
        raise UserError(f"--repeats must be at least 1, got {repeats}")
    if not checkpoints:
        raise UserError("give at least one checkpoint to --checkpoints")
    decoders = [open_checkpoint(path, data, device) for path in checkpoints]
    sources = {}
    for decoder in decoders:
        encoded = decoder.data.split(split)
        chosen = sample_indices(len(encoded), max_sentences)
        sources[decoder.path] = [encoded.src(int(i)) for i in chosen]
        _time(decoder, sources[decoder.path][:8], max(beams), max_tokens)  # warm-up
    times: dict[tuple[int, int], list[float]] = {}
    for r in range(repeats):
        for d, decoder in enumerate(decoders):
            for beam in beams:
                if log:
                    log(f"repeat {r + 1}/{repeats}: {decoder.transform.name}, beam {beam}")
                times.setdefault((d, beam), []).append(
                    _time(decoder, sources[decoder.path], beam, max_tokens))
    rows = [_row(decoders[d], beam, split, len(sources[decoders[d].path]), seconds)
            for (d, beam), seconds in times.items()]
    fastest = min(row["seconds"] for row in rows)
    for row in rows:
        row["normalized"] = row["seconds"] / fastest
    return rows


def _row(decoder: Decoder, beam: int, split: str, sentences: int, seconds: list[float]) -> dict:
    median, t = statistics.median(seconds), decoder.transform
    return {"checkpoint": str(decoder.path), "transform": t.name, "alpha": t.alpha, "tau": t.tau,
            "beam": beam, "split": split, "sentences": sentences, "seconds": median,
            "sentences_per_s": sentences / median, "repeats": len(seconds),
            "device": str(decoder.device), "threads": torch.get_num_threads(),
            "signature": decoder.signature(split=split, beam=beam, device=decoder.device.type)}


def print_table(frame: pd.DataFrame, console) -> None:
    table = Table(title="translation time (normalized by the fastest)")
    for col in ("transform", "beam", "sentences", "seconds", "sent/s", "normalized"):
        table.add_column(col, justify="right")
    for r in frame.to_dict("records"):
        table.add_row(r["transform"], str(r["beam"]), str(r["sentences"]), f"{r['seconds']:.3f}",
                      f"{r['sentences_per_s']:.1f}", f"{r['normalized']:.2f}")
    console.print(table)
