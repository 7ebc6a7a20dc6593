"""Continuations of test prompts, shared by the studies that sample language models (``lm``,
``convert``): their token-id files, the generation statistics recomputed from them, the paired
bootstrap over prompts of one system against a reference
(:func:`arelu_cli.analysis.significance.paired`, the one bootstrap and its interval rule), and
the degeneracy claim read from its rows by the one verdict rule
(:mod:`arelu_cli.studies.verdict`).

* ``*.tokens.json``: ``{"tokens": [[id, ...], ...]}``, one list of token ids per prompt
  (:func:`write_tokens`, :func:`read_tokens`); :data:`HUMAN`, the human continuations of
  the prompts every model continues (:func:`write_human`).
* The draw is sacrebleu's (:func:`arelu_cli.analysis.significance.bootstrap_chunks`), the
  same indices for every system and for the human continuations: a system's statistic on a
  resample is the mean over its seeds of each seed's pooled statistic on the drawn prompts (a
  cluster bootstrap: a drawn prompt brings every seed's continuation of it), and its distance
  to human (``*_gap``) the mean over seeds of ``|statistic - human statistic|`` on the same
  draw, as ``lm-eval``'s ``*_gap`` columns are per seed. Every point estimate is recomputed
  from the token ids and must equal the ``lm-eval`` row's (:func:`check_against_row`).
"""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from arelu_cli.analysis import lm_metrics as M
from arelu_cli.analysis.significance import SEED, bootstrap_chunks, paired
from arelu_cli.studies.markdown import fmt, missing, signed
from arelu_cli.studies.verdict import INCONCLUSIVE, SAME, verdict
from arelu_cli.util.atomic import atomic_write_text
from arelu_cli.util.errors import UserError
from arelu_cli.util.results import read_json
from arelu_cli.util.signatures import signature

HUMAN = "human.tokens.json"
STATS = ("distinct_2", "loop", "zipf")
"""The generation statistics tested, each also as its distance to human (``<name>_gap``)."""
TEST_COLUMNS = ("statistic", "seeds", "baseline_seeds", "prompts", "value", "baseline_value",
                "human", "delta", "delta_low", "delta_high", "delta_bias", "p_value",
                "samples", "bootstrap_seed", "signature")
"""The columns of :func:`bootstrap_row`; a study's bootstrap table puts the systems' names
first."""
TOLERANCE = 1e-9
"""How far a statistic recomputed from ``*.tokens.json`` may lie from its ``lm-eval`` row."""


def write_tokens(path: Path, tokens: list[list[int]]) -> None:
    atomic_write_text(path, json.dumps({"tokens": tokens}, separators=(",", ":")) + "\n")


def read_tokens(path: Path, prompts: int | None, remedy: str) -> list[list[int]]:
    """``{"tokens": [[id, ...], ...]}``: one list of token ids per prompt (``prompts`` of them
    when given)."""
    tokens = read_json(path, remedy).get("tokens")
    if not isinstance(tokens, list) or not all(
            isinstance(t, list) and all(isinstance(i, int) for i in t) for t in tokens):
        raise UserError(f"{path} has no \"tokens\": a list of token-id lists; {remedy}")
    if not tokens:
        raise UserError(f"{path} holds no continuation; {remedy}")
    if prompts is not None and len(tokens) != prompts:
        raise UserError(f"{path} has {len(tokens)} continuations but {HUMAN} has {prompts} "
                        f"prompts; {remedy}")
    return tokens


def write_human(out: Path, corpus: str | Path, prefix_tokens: int, prompts: int) -> None:
    """``out/human.tokens.json`` (once): the human continuations of the first ``prompts``
    test prompts (0: all) of the prepared corpus folder ``corpus``: the prompts of
    ``lm_eval.human_stats``."""
    from arelu_cli.data.prepared import load_prepared
    from arelu_cli.decode.generate import split_prompts

    path = out / HUMAN
    if path.is_file():
        return
    _, humans = split_prompts(load_prepared(corpus), "test", prefix_tokens)
    write_tokens(path, humans[:prompts] if prompts else humans)


@dataclass(frozen=True)
class Measured:
    """One seed's statistics of :data:`STATS` on all prompts and on every resample."""

    point: dict[str, float]
    resampled: dict[str, np.ndarray]


def measure(texts: list[list[int]], counts: torch.Tensor) -> Measured:
    """:data:`STATS` of ``texts`` by :mod:`~arelu_cli.analysis.lm_metrics`: pooled on all
    prompts (as ``lm-eval`` computes them) and on each resample of ``counts (R, N)``."""
    point = {"distinct_2": M.distinct_n(texts, 2),
             "loop": sum(M.loops(t) for t in texts) / len(texts),
             "zipf": M.zipf_coefficient(texts)}
    resampled = {"distinct_2": M.resampled_distinct_n(texts, 2, counts),
                 "loop": M.resampled_mean([float(M.loops(t)) for t in texts], counts),
                 "zipf": M.resampled_zipf(texts, counts)}
    return Measured(point, {k: v.numpy() for k, v in resampled.items()})


def check_against_row(measured: Measured, row: Mapping, path: Path, remedy: str,
                      prefix: str = "") -> None:
    """``measured`` on all prompts must be the row's ``<prefix><statistic>``."""
    for stat in STATS:
        got, expected = measured.point[stat], float(row[prefix + stat])
        if not (math.isnan(got) and math.isnan(expected)) and not abs(got - expected) \
                <= TOLERANCE:
            raise UserError(f"{path} gives {stat} {got:.6g} but its lm-eval row says "
                            f"{expected:.6g} (one of them is stale); {remedy}")


@dataclass(frozen=True)
class Side:
    """A system's value of one statistic, on all prompts and per resample, over its seeds."""

    name: str
    decoding: str
    seeds: str
    """Its seeds joined, ``1+2+3``."""
    value: float
    values: np.ndarray


def sides(name: str, decoding: str, seeds: dict[int, Measured], human: Measured
          ) -> dict[str, Side]:
    """Per statistic and ``<statistic>_gap``: the mean over seeds on all prompts and per
    resample (module docstring)."""
    found, joined, each = {}, "+".join(map(str, sorted(seeds))), list(seeds.values())
    for stat in STATS:
        found[stat] = Side(name, decoding, joined, statistics.fmean(m.point[stat] for m in each),
                           np.mean([m.resampled[stat] for m in each], axis=0))
        found[f"{stat}_gap"] = Side(
            name, decoding, joined,
            statistics.fmean(abs(m.point[stat] - human.point[stat]) for m in each),
            np.mean([np.abs(m.resampled[stat] - human.resampled[stat]) for m in each], axis=0))
    return found


def resample_counts(prompts: int, samples: int) -> torch.Tensor:
    """``(samples, prompts)``: how often each prompt is drawn in each resample."""
    index = np.concatenate(list(bootstrap_chunks(prompts, samples, SEED)))
    offsets = index + prompts * np.arange(len(index))[:, None]
    return torch.from_numpy(np.bincount(offsets.ravel(), minlength=index.size)
                            .reshape(len(index), prompts))


def bootstrap_row(side: Side, ref: Side, stat: str, human: float, prompts: int,
             samples: int) -> dict:
    """:data:`TEST_COLUMNS` of ``side`` against ``ref`` on statistic ``stat``."""
    return {"statistic": stat, "seeds": side.seeds, "baseline_seeds": ref.seeds,
            "prompts": prompts, "value": side.value, "baseline_value": ref.value,
            "human": human, **paired(side.values, ref.values, side.value, ref.value),
            "samples": samples, "bootstrap_seed": SEED,
            "signature": signature(statistic=stat, unit="prompt", prompts=prompts,
                                   seeds=side.seeds, baseline=f"{ref.name}:{ref.decoding}",
                                   baseline_seeds=ref.seeds, bs=samples, bs_seed=SEED)}


DEGENERACY = (("distinct_2", "distinct-2", 1), ("loop", "loop share", -1),
              ("zipf_gap", "Zipf gap to human", -1))
"""The statistics of "as non-degenerate as": (statistic, name, +1 where higher is better,
-1 where lower is)."""
SAME_WORD = "the same on every resample"


def bootstrap_word(row: Mapping, better: int) -> str:
    """The one verdict rule's word for a bootstrap row, as the reports write it."""
    if missing(row["delta_low"]) or missing(row["delta_high"]):
        return "not testable"
    word = verdict(row, better > 0)
    return {SAME: SAME_WORD, INCONCLUSIVE: "interval includes 0"}.get(word, word)


def degeneracy(rows: Mapping[str, Mapping]) -> tuple[str, list[str]] | None:
    """Is a system as non-degenerate as the reference, from its bootstrap rows by statistic:
    **holds** when each statistic of :data:`DEGENERACY` is better (or the same on every
    resample: no loop on either side, say), **does not hold** when one is worse,
    **inconclusive** otherwise; with one ``value vs reference (Δ [95% CI], p: word)`` part
    per statistic. None while a statistic's row is missing."""
    if not all(stat in rows for stat, _, _ in DEGENERACY):
        return None
    parts, words = [], []
    for stat, what, better in DEGENERACY:
        r = rows[stat]
        words.append(bootstrap_word(r, better))
        p = "" if missing(r["p_value"]) else f", p = {r['p_value']:.3f}"
        parts.append(f"{what} {fmt(r['value'], 3)} vs {fmt(r['baseline_value'], 3)} "
                     f"(Δ {signed(r['delta'], 3)} [{signed(r['delta_low'], 3)}, "
                     f"{signed(r['delta_high'], 3)}]{p}: {words[-1]})")
    answer = ("does not hold" if "worse" in words
              else "holds" if set(words) <= {"better", SAME_WORD}
              else "inconclusive (an interval includes 0)")
    return answer, parts
