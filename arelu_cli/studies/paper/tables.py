"""Rows of the paper's Tables 1-3 and of its inference-time figure, from plain inputs.

The measuring commands (score, empty-check, estimate-tau, bench-translate) each have
their own output; these builders take the few numbers each table needs, so that the
reproduction's fixed CSVs (:mod:`arelu_cli.studies.paper.columns`) do not depend on those formats.
Each call tabulates one training seed (``seed``, None when unknown); a grid of several
seeds concatenates the rows of one call per seed:

* :func:`table1_row` -- Table 1 (detokenized test BLEU per transform);
* :func:`significance_rows` -- Table 1's tests: each transform vs the baseline (paired
  bootstrap, :mod:`arelu_cli.analysis.significance`);
* :func:`table2_row` -- Table 2 (% of dev sentences whose empty string wins);
* :func:`table3_rows` -- Table 3 (tau: analytic at the paper's vocabularies + empirical rows);
* :func:`inference_time_rows` -- Fig. infTime (translation time vs beam, normalized).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Optional

from arelu_cli.analysis import tau_table
from arelu_cli.util.errors import UserError
from arelu_cli.studies.paper import paper
from arelu_cli.studies.paper.columns import COLUMNS
from arelu_cli.util.signatures import signature


def _sig(given: Optional[str], transform: str, corpus: str) -> str:
    return given or signature(transform=transform, data=corpus)


def table1_row(corpus: str, transform: str, bleu: float, chrf: Optional[float] = None,
               bleu_signature: str = "", signature: Optional[str] = None, split: str = "test",
               seed: Optional[int] = None) -> dict:
    """Table 1: one transform's test score as ``arelu score`` gives it (BLEU, chrF and
    sacrebleu's signature) with the run's signature (default: one naming the transform and
    corpus)."""
    return {"corpus": corpus, "transform": transform, "seed": seed, "split": split,
            "bleu": float(bleu), "chrf": chrf, "bleu_signature": bleu_signature,
            "signature": _sig(signature, transform, corpus)}


def significance_rows(corpus: str, tests: Iterable[Mapping[str, object]],
                      signatures: Mapping[tuple[str, str], str],
                      split: str = "test") -> list[dict]:
    """Table 1's tests: one row per paired bootstrap row ``tests`` gives (``transform``,
    ``baseline``, ``seeds``, the test's fields and ``bleu_signature``, as
    :func:`arelu_cli.studies.translation.bootstrap_rows` makes them); the baseline's own row
    gives its BLEU interval, with no difference or p-value. ``signatures``:
    ``{(transform, seeds): run signature}``."""
    rows = []
    for r in tests:
        name = r["transform"]
        row = {**r, "corpus": corpus, "split": split, "signature": _sig(
            signatures.get((name, str(r["seeds"]))), name, corpus)}
        if name == r["baseline"]:
            row |= dict.fromkeys(("delta", "delta_low", "delta_high", "delta_bias", "p_value"))
        rows.append({column: row[column] for column in COLUMNS["table1_significance.csv"]})
    return rows


def table2_row(corpus: str, transform: str, n_empty_better: int, n_sentences: int,
               signature: Optional[str] = None, split: str = "dev",
               seed: Optional[int] = None) -> dict:
    """Table 2: the percentage of sentences whose empty string outscores the beam hypothesis."""
    if n_sentences < 1 or not 0 <= n_empty_better <= n_sentences:
        raise UserError(f"{transform}: {n_empty_better} empty wins out of {n_sentences} "
                        "sentences is impossible")
    return {"corpus": corpus, "transform": transform, "seed": seed, "split": split,
            "n_sentences": n_sentences, "n_empty_better": n_empty_better,
            "percent_empty": 100.0 * n_empty_better / n_sentences,
            "signature": _sig(signature, transform, corpus)}


def table3_rows(extra_rows: Iterable[Mapping[str, object]] = (), d_model: int = 512,
                d_vocabs: Sequence[int] = tuple(paper.TABLE3_TAU)) -> list[dict]:
    """Table 3: the analytic p* and tau-hat at the paper's vocabularies (alpha 1.5, the
    paper's rule), then ``extra_rows`` (e.g. :func:`arelu_cli.analysis.tau_table.empirical_rows`
    or rows of an ``arelu estimate-tau`` CSV: tau-tilde of a real corpus)."""
    rows = tau_table.tau_rows("analytic", list(d_vocabs), [1.5], ("paper",), d_model=d_model)
    return rows + [dict(row) for row in extra_rows]


def inference_time_rows(corpus: str, seconds: Mapping[tuple[str, int], float],
                        signatures: Optional[Mapping[str, str]] = None,
                        seed: Optional[int] = None) -> list[dict]:
    """Fig. infTime: seconds per (transform, beam) and the same normalized by the smallest
    (of this seed's models, timed together)."""
    if not seconds:
        raise UserError("no inference timings to tabulate")
    if min(seconds.values()) <= 0:
        raise UserError("inference timings must be positive seconds")
    fastest = min(seconds.values())
    return [{"corpus": corpus, "transform": name, "seed": seed, "beam": int(beam),
             "seconds": float(sec), "normalized": float(sec) / fastest,
             "signature": _sig((signatures or {}).get(name), name, corpus)}
            for (name, beam), sec in sorted(seconds.items(), key=lambda kv: (kv[0][1], kv[0][0]))]
