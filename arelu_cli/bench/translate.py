"""``arelu bench translate``: time to translate the same test set with each model and beam
size, normalized by the smallest time (paper, Fig. "infTime": softmax and 1.5-ReLU decode at
about the same speed, 1.5-entmax (full sort) about twice as slowly, at every beam size).

Timings are interleaved: each repeat times every beam size in turn, and at each beam every
checkpoint in turn (softmax, 1.5-ReLU, softmax, 1.5-ReLU, ... over the repeats), so that
machine noise falls on all of them alike; a row keeps the median over the repeats. Its
``ratio`` is that median over the baseline's median at the same beam (the baseline: the
first softmax checkpoint, else the first checkpoint), and ``ratio_paired`` the median of the
per-repeat ratios of timings taken back to back. Decoding is
:func:`arelu_cli.decode.translate.decode_sources`, as ``arelu translate`` runs it (batched by source
tokens, greedy for beam 1), after one untimed warm-up batch per checkpoint (which also builds
the C++ kernels); ``scoring`` says how each step's scores were found (alpha-ReLU:
``top-k cpp``, or ``top-k eager`` without a compiler; the others: ``log-scores + topk``).

Two checkpoints trained with different transforms also decode different outputs (lengths,
early stops), so their times mix the output layer's cost with what each model says. Two
ways separate them: every row has ``tokens`` (generated, end-of-sentence included) and
``ratio_per_token`` (time per generated token over the baseline's); and ``transforms``
decodes each checkpoint's *same weights* once per listed transform (e.g. a 1.5-ReLU
checkpoint as softmax and as 1.5-ReLU), which leaves the model's cost identical and, at beam
1, the outputs too (every transform here is monotone in the logits, so greedy picks the
same arg-max): what differs is the output layer's scoring alone. Then a row's baseline is
the softmax decoding of its own checkpoint.
"""

from __future__ import annotations

import dataclasses
import statistics
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import pandas as pd
import torch
from rich.table import Table

from arelu_cli.analysis.steps import sample_indices
from arelu_cli.bench import timing
from arelu_cli.bench.timing import synchronize
from arelu_cli.util.errors import UserError
from arelu_cli.util.options import parse_list
from arelu_cli.registry import OutputTransform, get_transform
from arelu_cli.transforms import top_scores
from arelu_cli.decode.translate import Decoder, decode_config, decode_sources, open_checkpoint


def parse_beams(text: str) -> list[int]:
    """``"1,2,4"`` -> [1, 2, 4]; every beam at least 1."""
    beams = parse_list(text, int, "--beams", example="1,2,4,8,12")
    if not beams or min(beams) < 1:
        raise UserError(f"--beams must list beam sizes of at least 1, got {text!r}")
    return beams


def _time(decoder: Decoder, sources: Sequence[Sequence[int]], beam: int,
          max_tokens: int | None) -> tuple[float, int]:
    """Seconds to decode ``sources``, and the tokens generated (best hypotheses, eos
    included when a hypothesis ended with it)."""
    cfg = decode_config(decoder, beam=beam, max_tokens=max_tokens)
    synchronize(decoder.device)
    start = time.perf_counter()
    hyps = decode_sources(decoder, sources, cfg)
    synchronize(decoder.device)
    seconds = time.perf_counter() - start
    return seconds, sum(len(h[0].tokens) + int(h[0].ended) for h in hyps if h)


def parse_transforms(text: str | None) -> list[str]:
    """``"softmax,1.5-relu"`` -> the names, each checked against the registry."""
    names = parse_list(text or "", str, "--transforms", empty_ok=True)
    for name in names:
        get_transform(name)
    return names


def as_transform(decoder: Decoder, name: str) -> Decoder:
    """The same weights decoding with transform ``name``: alpha-ReLU takes the checkpoint's
    tau, so it must be an alpha-ReLU checkpoint of the same alpha (else a UserError)."""
    own = decoder.transform
    if name == own.name:
        return decoder
    probe = get_transform(name)
    if probe.family == "relu":
        if own.family != "relu" or own.alpha != probe.alpha:
            raise UserError(f"--transforms {name} needs the tau of a {name} checkpoint, and "
                            f"{decoder.path} was trained with {own.name}: give a {name} "
                            "checkpoint (its weights then decode as each listed transform)")
        probe = get_transform(name, tau=own.tau)
    return dataclasses.replace(decoder, transform=probe)


def _variants(decoders: Sequence[Decoder], names: Sequence[str]) -> list[Decoder]:
    if not names:
        return list(decoders)
    return [as_transform(d, name) for d in decoders for name in names]


def bench_translate(checkpoints: Sequence[str | Path], beams: Sequence[int], split: str, *,
                    data: str | Path | None = None, device: str = "auto",
                    max_sentences: int | None = None, repeats: int = 1,
                    max_tokens: int | None = None, transforms: Sequence[str] = (),
                    log: Callable[[str], None] | None = None) -> list[dict]:
    """One row per checkpoint (and transform, with ``transforms``) and beam: median seconds
    over the interleaved repeats, sentences/s, tokens, ``normalized`` (over the smallest
    time of the run) and the ratios to the baseline at the same beam (module docstring)."""
    if repeats < 1:
        raise UserError(f"--repeats must be at least 1, got {repeats}")
    if not checkpoints:
        raise UserError("give at least one checkpoint to --checkpoints")
    decoders = _variants([open_checkpoint(path, data, device) for path in checkpoints],
                         transforms)
    sources = {}
    for decoder in decoders:
        if decoder.path not in sources:
            encoded = decoder.data.split(split)
            chosen = sample_indices(len(encoded), max_sentences)
            sources[decoder.path] = [encoded.src(int(i)) for i in chosen]
        _time(decoder, sources[decoder.path][:8], max(beams), max_tokens)  # warm-up
    times = {(d, beam): [] for d in range(len(decoders)) for beam in beams}
    with timing.OtherLoad() as load:
        for r in range(repeats):
            for beam in beams:
                for d, decoder in enumerate(decoders):
                    if log:
                        log(f"repeat {r + 1}/{repeats}: beam {beam}, {decoder.transform.name} "
                            f"decoding {decoder.path}")  # checkpoints may share a transform
                    times[(d, beam)].append(_time(decoder, sources[decoder.path], beam,
                                                  max_tokens))
    rows = []
    for (d, beam), timed in times.items():
        base = baseline(decoders, d if transforms else None)
        rows.append(_row(decoders[d], beam, split, len(sources[decoders[d].path]), timed,
                         times[(base, beam)], decoders[base].transform.name, max_tokens))
    fastest = min(row["seconds"] for row in rows)
    for row in rows:
        row["normalized"] = row["seconds"] / fastest
        row["other_cpu"] = load.cores
    return rows


def baseline(decoders: Sequence[Decoder], of: int | None = None) -> int:
    """Index of the decoder the ratios divide by: the first softmax one, else the first;
    with ``of``, among the decoders with the same weights as decoder ``of``."""
    pool = [i for i, d in enumerate(decoders) if of is None or d.path == decoders[of].path]
    return next((i for i in pool if decoders[i].transform.name == "softmax"), pool[0])


def scoring(decoder: Decoder) -> str:
    """How decoding finds each step's best scores with this checkpoint's transform."""
    if not decoder.transform.fused_top_k:
        return "log-scores + topk"
    return f"top-k {top_scores.engine(decoder.device)}"


def _row(decoder: Decoder, beam: int, split: str, sentences: int,
         timed: list[tuple[float, int]], base_timed: list[tuple[float, int]], base_name: str,
         max_tokens: int | None) -> dict:
    seconds, base_seconds = [s for s, _ in timed], [s for s, _ in base_timed]
    tokens, base_tokens = timed[-1][1], base_timed[-1][1]
    median, t, how = statistics.median(seconds), decoder.transform, scoring(decoder)
    batch_tokens = decode_config(decoder, beam=beam, max_tokens=max_tokens).max_tokens
    threads = torch.get_num_threads()
    return {"checkpoint": str(decoder.path), "transform": t.name, "alpha": t.alpha, "tau": t.tau,
            "beam": beam, "split": split, "sentences": sentences, "seconds": median,
            "sentences_per_s": sentences / median, "repeats": len(seconds),
            "tokens": tokens, "ms_per_token": 1000 * median / max(tokens, 1),
            "baseline": base_name, "ratio": median / statistics.median(base_seconds),
            "ratio_per_token": (median / max(tokens, 1))
            / (statistics.median(base_seconds) / max(base_tokens, 1)),
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
    for col in ("transform", "beam", "sentences", "tokens", "seconds", "sent/s", "normalized",
                "ratio", "paired", "per token"):
        table.add_column(col, justify="right")
    for r in frame.to_dict("records"):
        table.add_row(r["transform"], str(r["beam"]), str(r["sentences"]), str(r["tokens"]),
                      f"{r['seconds']:.3f}", f"{r['sentences_per_s']:.1f}",
                      f"{r['normalized']:.2f}", f"{r['ratio']:.3f}", f"{r['ratio_paired']:.3f}",
                      f"{r['ratio_per_token']:.3f}")
    console.print(table)
