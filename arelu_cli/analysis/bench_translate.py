"""``arelu bench translate``: time to translate the same test set with each model and beam
size, normalized by the smallest time (paper, Fig. "infTime": softmax and 1.5-ReLU decode at
about the same speed, 1.5-entmax (full sort) about twice as slowly, at every beam size).

Timings are interleaved: each repeat times every beam size in turn, and at each beam every
checkpoint in turn (softmax, 1.5-ReLU, softmax, 1.5-ReLU, ... over the repeats), so that
machine noise falls on all of them alike; a row keeps the median over the repeats. Its
``ratio`` is that median over the baseline's median at the same beam (the baseline: the
first softmax checkpoint, else the first checkpoint), and ``ratio_paired`` the median of the
per-repeat ratios of timings taken back to back. Decoding is
:func:`arelu_cli.nmt.inference.decode_sources`, as ``arelu translate`` runs it (batched by source
tokens, greedy for beam 1), after one untimed warm-up batch per checkpoint (which also builds
the C++ kernels); ``scoring`` says how each step's scores were found (alpha-ReLU:
``top-k cpp``, or ``top-k eager`` without a compiler; the others: ``log-scores + topk``).
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
from arelu_cli.options import parse_list
from arelu_cli.transforms import top_scores
from arelu_cli.nmt.inference import Decoder, decode_config, decode_sources, open_checkpoint


def parse_beams(text: str) -> list[int]:
    """``"1,2,4"`` -> [1, 2, 4]; every beam at least 1."""
    beams = parse_list(text, int, "--beams", example="1,2,4,8,12")
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
    """One row per checkpoint and beam, checkpoint by checkpoint: median seconds over the
    interleaved repeats, sentences/s, ``normalized`` (over the smallest time of the run) and
    the ratios to the baseline at the same beam (see the module docstring)."""
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
    times = {(d, beam): [] for d in range(len(decoders)) for beam in beams}
    for r in range(repeats):
        for beam in beams:
            for d, decoder in enumerate(decoders):
                if log:
                    log(f"repeat {r + 1}/{repeats}: beam {beam}, {decoder.transform.name}")
                times[(d, beam)].append(_time(decoder, sources[decoder.path], beam, max_tokens))
    base = baseline(decoders)
    rows = [_row(decoders[d], beam, split, len(sources[decoders[d].path]), seconds,
                 times[(base, beam)], decoders[base].transform.name, max_tokens)
            for (d, beam), seconds in times.items()]
    fastest = min(row["seconds"] for row in rows)
    for row in rows:
        row["normalized"] = row["seconds"] / fastest
    return rows


def baseline(decoders: Sequence[Decoder]) -> int:
    """Index of the checkpoint the ratios divide by: the first softmax one, else the first."""
    return next((i for i, d in enumerate(decoders) if d.transform.name == "softmax"), 0)


def scoring(decoder: Decoder) -> str:
    """How decoding finds each step's best scores with this checkpoint's transform."""
    if not decoder.transform.fused_top_k:
        return "log-scores + topk"
    return f"top-k {top_scores.engine(decoder.device)}"


def _row(decoder: Decoder, beam: int, split: str, sentences: int, seconds: list[float],
         base_seconds: list[float], base_name: str, max_tokens: int | None) -> dict:
    median, t, how = statistics.median(seconds), decoder.transform, scoring(decoder)
    batch_tokens = decode_config(decoder, beam=beam, max_tokens=max_tokens).max_tokens
    threads = torch.get_num_threads()
    return {"checkpoint": str(decoder.path), "transform": t.name, "alpha": t.alpha, "tau": t.tau,
            "beam": beam, "split": split, "sentences": sentences, "seconds": median,
            "sentences_per_s": sentences / median, "repeats": len(seconds),
            "baseline": base_name, "ratio": median / statistics.median(base_seconds),
            "ratio_paired": statistics.median(s / b for s, b in zip(seconds, base_seconds)),
            "seconds_all": " ".join(f"{x:.6g}" for x in seconds), "scoring": how,
            "device": str(decoder.device), "threads": threads,
            "signature": decoder.signature(split=split, beam=beam, device=decoder.device.type,
                                           sentences=sentences, repeats=len(seconds),
                                           batch_tokens=batch_tokens, scoring=how,
                                           threads=threads)}


def print_table(frame: pd.DataFrame, console) -> None:
    table = Table(title="translation time (normalized by the fastest; ratio to the baseline "
                        "at the same beam)")
    for col in ("transform", "beam", "sentences", "seconds", "sent/s", "normalized", "ratio",
                "paired"):
        table.add_column(col, justify="right")
    for r in frame.to_dict("records"):
        table.add_row(r["transform"], str(r["beam"]), str(r["sentences"]), f"{r['seconds']:.3f}",
                      f"{r['sentences_per_s']:.1f}", f"{r['normalized']:.2f}",
                      f"{r['ratio']:.3f}", f"{r['ratio_paired']:.3f}")
    console.print(table)
