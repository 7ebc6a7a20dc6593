"""The paper's printed numbers (*Speeding Up Entmax*, Tables 1-3) and how close counts as a
match.

Corpora are keyed by the prepared corpus names of :mod:`arelu_cli.data.corpora`; a corpus
the paper did not use (toy, multi30k, ...) has no numbers, and only the paper's qualitative
claims are checked for it (:mod:`arelu_cli.studies.paper.compare_tables`,
:mod:`~arelu_cli.studies.paper.compare_figures`).
"""

from __future__ import annotations

from collections.abc import Iterable

CORPORA = ("iwslt14", "wmt14-en-de", "wmt13-en-ru")
"""The paper's three data sets, in its column order."""
CORPUS_TITLES = {"iwslt14": "IWSLT De→En", "wmt14-en-de": "WMT14 En→De",
                 "wmt13-en-ru": "WMT13 En→Ru"}


ENTMAX15_FORMS = ("1.5-entmax", "1.5-entmax-k100")
"""The runs that compute 1.5-entmax, preferred first: the full sort, else the partial sort over
the top 100 (the same function, exact: it widens when the support is larger)."""


def entmax15_run(names: Iterable[str]) -> str | None:
    """Which run stands for 1.5-entmax in a claim: the full-sort run when there is one, else
    1.5-entmax-k100 (same outputs; in speed claims the faster of the two algorithms, and the
    claim's evidence names it)."""
    present = set(names)
    return next((n for n in ENTMAX15_FORMS if n in present), None)


def _by_corpus(values: tuple) -> dict[str, float]:
    return dict(zip(CORPORA, values))


TABLE1_BLEU = {
    "softmax": _by_corpus((35.3, 28.7, 22.4)),
    "sparsemax": _by_corpus((35.5, 26.6, 19.6)),
    "1.5-entmax": _by_corpus((36.6, 28.6, 23.9)),
    "1.5-entmax-k100": _by_corpus((36.7, 28.4, 23.7)),
    "1.5-relu": _by_corpus((37.3, 28.6, 24.6)),
}
"""Table 1: transform -> corpus -> detokenized test BLEU."""

TABLE2_EMPTY_PERCENT = {
    "softmax": _by_corpus((7.5, 29.8, 31.7)),
    "sparsemax": _by_corpus((0.0, 0.03, 0.0)),
    "1.5-entmax": _by_corpus((0.0, 0.2, 0.0)),
    "1.5-relu": _by_corpus((0.0, 0.3, 0.1)),
}
"""Table 2: transform -> corpus -> % of dev sentences whose empty string wins."""

TABLE3_TAU = {10_000: {"p_star": 0.0184, "tau": 0.33},
              40_000: {"p_star": 0.0171, "tau": 0.17},
              60_000: {"p_star": 0.0169, "tau": 0.14}}
"""Table 3 (d_model = 512): d_vocab -> p* and tau (empirical and analytic agree)."""
TABLE3_CORPUS_VOCAB = _by_corpus((10_000, 40_000, 60_000))

TRAINING_HOURS = {
    "softmax": _by_corpus((15.41, 30.06, 28.43)),
    "sparsemax": _by_corpus((24.43, 73.33, 58.82)),
    "1.5-entmax": _by_corpus((26.11, 79.89, 61.20)),
    "1.5-relu": _by_corpus((16.50, 31.44, 24.21)),
}
"""Appendix "GPU Power Consumption": transform -> corpus -> training hours."""
GPU_WATTS_TOTAL = _by_corpus((250.0, 640.0, 1200.0))
"""The same table's power: 1 x 250 W, 2 x 320 W, 4 x 300 W."""

SELF_NORM_MEAN = {"iwslt14": 1.24, "wmt14-en-de": 1.09}
"""Sec. Self-normalization: mean sum of 1.5-ReLU components per decoding step."""

HUMAN_EVAL = {"reference": (3.9, 0.30), "softmax": (3.3, 0.75), "1.5-entmax": (3.2, 0.74),
              "1.5-relu": (3.3, 0.74)}
"""Table tab:human (WMT13 En→Ru, 4-point scale): system -> (mean, std)."""
HUMAN_EVAL_KAPPA = 0.56

TOLERANCE = {"bleu": 1.0, "empty_percent": 2.0, "tau": 0.005, "p_star": 1e-4,
             "self_norm": 0.05, "human_mean": 0.2, "kappa": 0.1}
"""Largest absolute difference that still counts as reproducing a printed number: BLEU
points, percentage points, tau to its two printed decimals, p* to its four, score points."""


def paper_value(table: dict, transform: str, corpus: str) -> float | None:
    """A number of a transform x corpus table, or None when the paper has none."""
    return table.get(transform, {}).get(corpus)
