"""The language-model study's paired bootstrap over test prompts
(:func:`arelu_cli.analysis.significance.paired`, the one bootstrap and its interval rule):
each transform x decoding against the reference system on every statistic of :data:`STATS`
and its distance to human text.

The draw is sacrebleu's (:func:`arelu_cli.analysis.significance.bootstrap_chunks`), the same
indices for every system and for the human continuations: a system's statistic on a resample
is the mean over its seeds of each seed's pooled statistic on the drawn prompts (a cluster
bootstrap: a drawn prompt brings every seed's continuation of it), and its distance to human
(``*_gap``) the mean over seeds of ``|statistic - human statistic|`` on the same draw, as
``lm-eval``'s ``*_gap`` columns are per seed. Every point estimate is recomputed from the
committed token ids and must equal the ``lm-eval`` rows'.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from arelu_cli.analysis import lm_metrics as M
from arelu_cli.analysis.significance import RESAMPLES, SEED, bootstrap_chunks, paired
from arelu_cli.studies.core import Run
from arelu_cli.studies.lm.runs import (HUMAN, eval_path, label, measure_again,
                                       read_tokens)
from arelu_cli.util.errors import UserError
from arelu_cli.util.signatures import signature

STATS = ("distinct_2", "loop", "zipf")
"""The generation statistics tested, each also as its distance to human (``<name>_gap``)."""
SIG_COLUMNS = ("transform", "label", "decoding", "baseline", "reference", "statistic",
               "seeds", "baseline_seeds", "prompts", "value", "baseline_value", "human",
               "delta", "delta_low", "delta_high", "delta_bias", "p_value", "samples",
               "bootstrap_seed", "signature")
TOLERANCE = 1e-9
"""How far a statistic recomputed from ``*.tokens.json`` may lie from its ``lm-eval`` row."""


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


def _check_against_row(measured: Measured, row: dict, path: Path, remedy: str,
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


def significance_rows(out: Path, runs: list[Run], evals: list[dict], baseline: str,
                      reference: str, samples: int = RESAMPLES) -> list[dict]:
    """Each transform x decoding against ``baseline`` x ``reference`` on every statistic of
    :data:`STATS` and its gap to human (module docstring); none while the reference or
    ``human.tokens.json`` is missing. Point estimates are recomputed from the token ids
    and must equal the ``lm-eval`` rows'."""
    if not any(e["transform"] == baseline and e["decoding"] == reference for e in evals) or \
            not (out / HUMAN).is_file():
        return []
    again_human = "restore it, or delete it to write it again"
    human_tokens = read_tokens(out / HUMAN, None, again_human)
    counts = resample_counts(len(human_tokens), samples)
    human = measure(human_tokens, counts)
    for e in evals:
        _check_against_row(human, e, out / HUMAN, again_human, prefix="human_")
    by_run = {(r.name, r.seed): r for r in runs}
    systems: dict[tuple[str, str], dict[int, Measured]] = {}
    for e in evals:
        run = by_run[e["transform"], int(e["seed"])]
        path = run.folder / "generations" / f"{e['decoding']}.tokens.json"
        remedy = measure_again(eval_path(run, e["decoding"]))
        measured = measure(read_tokens(path, len(human_tokens), remedy), counts)
        _check_against_row(measured, e, path, remedy)
        systems.setdefault((e["transform"], e["decoding"]), {})[run.seed] = measured
    ref = sides(baseline, reference, systems[baseline, reference], human)
    return [_test_row(side, ref[stat], stat, human.point[stat.removesuffix("_gap")],
                      len(human_tokens), samples)
            for (name, decoding), seeds in systems.items()
            for stat, side in sides(name, decoding, seeds, human).items()]


def _test_row(side: Side, ref: Side, stat: str, human: float, prompts: int,
              samples: int) -> dict:
    return {"transform": side.name, "label": label(side.name), "decoding": side.decoding,
            "baseline": ref.name, "reference": ref.decoding, "statistic": stat,
            "seeds": side.seeds, "baseline_seeds": ref.seeds, "prompts": prompts,
            "value": side.value, "baseline_value": ref.value, "human": human,
            **paired(side.values, ref.values, side.value, ref.value),
            "samples": samples, "bootstrap_seed": SEED,
            "signature": signature(statistic=stat, unit="prompt", prompts=prompts,
                                   seeds=side.seeds, baseline=f"{ref.name}:{ref.decoding}",
                                   baseline_seeds=ref.seeds, bs=samples, bs_seed=SEED)}
