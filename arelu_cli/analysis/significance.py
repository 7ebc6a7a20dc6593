"""The one paired bootstrap: is a system's statistic better than a baseline's by more than
the choice of test units explains? Generic over the statistic (:func:`paired`); corpus BLEU
over test sentences is one (:func:`compare_to_baseline`), a language model's text statistics
over test prompts another (:mod:`arelu_cli.studies.generations`).

The draw is sacrebleu's ``--paired-bs`` (Koehn, 2004): ``samples`` (1,000) resamples of the
test units, ``numpy.random.default_rng(seed).choice(N, size=(samples, N))``, the same
indices for both systems; each system's statistic on each resample.

**The interval rule** (:func:`interval`), one for every interval here: sacrebleu's 95%
percentile interval of the resampled values (the 26th smallest and largest of 1,000)
re-centred on the observed value, that is shifted by the bootstrap's estimate of its own bias
(the mean of the resampled values less the observed one; ``delta_bias`` in a row). The plain
percentile interval assumes that the resampled statistic is centred on the observed one. A
statistic pooled over a resample is not when a unit drawn twice counts twice in one of its
counts but once in another: distinct-n counts a twice-drawn prompt's n-grams twice but its
distinct n-grams once, so resampled distinct-n falls below the observed value, the more so
the more distinct a system's text, and the plain interval of two systems' difference can
miss their observed difference altogether. Corpus BLEU, a ratio of pooled counts with a
brevity penalty, is biased so too, mildly. Re-centring keeps the bootstrap's spread and
removes that artefact of resampling; for a statistic that resampling does not bias (a mean)
it changes nothing. The verdicts of every study read this interval
(:mod:`arelu_cli.studies.verdict`), never p.

The p-value of "no difference" is sacrebleu's, reported beside it: ``d_i = |S_sys,i -
S_base,i|`` centred as the null, ``p = (#{d_i - mean(d) >= |S_sys - S_base|} + 1) / (samples
+ 1)`` (sacrebleu counts ``>``; ``>=`` differs only where a resample ties the observed
difference: two identical systems get p = 1 here, 1/1001 there). It folds the resampled
differences before centring them, in effect a one-sided test, and near the boundary it can
fall under 0.05 while the interval includes 0, which is why no verdict reads it.

Several runs of each system (training seeds, ``runs``) are a cluster bootstrap: each
sentence's statistics are summed over the runs before resampling, so a resample draws test
sentences with all their runs' translations (one sentence's translations by different seeds
are not independent draws).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from sacrebleu.metrics import BLEU

from arelu_cli.util.errors import UserError
from arelu_cli.decode.bleu import paper_bleu

RESAMPLES = 1000
"""sacrebleu's default number of paired bootstrap resamples."""
SEED = 12345
"""sacrebleu's default ``SACREBLEU_SEED``."""


@dataclass(frozen=True)
class PairedBootstrap:
    """One system against the baseline on the same test sentences (a CSV row as a dict:
    :func:`dataclasses.asdict`)."""

    bleu: float
    """The system's corpus BLEU on the real test set."""
    baseline_bleu: float
    bleu_mean: float
    """Mean of the system's resampled BLEU (sacrebleu's μ)."""
    bleu_low: float
    """Lower end of the 95% interval of the system's BLEU."""
    bleu_high: float
    delta: float
    """BLEU(system) - BLEU(baseline) on the real test set."""
    delta_low: float
    """Lower end of the 95% interval of the difference over the same resamples."""
    delta_high: float
    delta_bias: float
    """The bootstrap's bias estimate of the difference that the interval is shifted by."""
    p_value: float
    """Paired bootstrap p-value of "the two systems score the same"."""
    samples: int
    """Bootstrap resamples."""
    bootstrap_seed: int
    sentences: int
    """Test sentences (resampled units)."""


def sentence_stats(hypotheses: Sequence[str], references: Sequence[str],
                   metric: BLEU) -> np.ndarray:
    """(N, 2 + 2 * max_ngram_order) int64 sufficient statistics, one row per sentence:
    hypothesis length, reference length, matching n-grams, total n-grams."""
    if len(hypotheses) != len(references):
        raise UserError(f"{len(hypotheses)} hypotheses but {len(references)} references; "
                        "they must be line-aligned")
    if not references:
        raise UserError("nothing to test: no sentences")
    # The extraction sacrebleu's own significance test uses (no public per-sentence API).
    stats = metric._extract_corpus_statistics(list(hypotheses), [list(references)])
    return np.asarray(stats, dtype=np.int64)


def stats_bleu(stats: np.ndarray, metric: BLEU) -> float:
    """Corpus BLEU of summed sufficient statistics (one row, or a 1-D vector)."""
    return metric._compute_score_from_stats(stats).score


MAX_RESAMPLES = 1_000_000
"""The most resamples a test draws: each is a corpus BLEU computed in Python, and a million
already bounds a p-value to 1e-6."""
CHUNK = 1 << 22
"""Sentence indices drawn at once (32 MiB): the resamples are drawn and scored in blocks of
``CHUNK // N`` so that memory stays bounded whatever ``samples`` is."""


def bootstrap_chunks(n: int, samples: int = RESAMPLES, seed: int = SEED
                     ) -> Iterator[np.ndarray]:
    """Blocks of rows of the (samples, n) sentence indices drawn with replacement:
    sacrebleu's draw (one generator drawing block after block gives the same rows as one
    draw of them all)."""
    if not 1 <= samples <= MAX_RESAMPLES:
        raise UserError(f"the bootstrap takes 1 to {MAX_RESAMPLES:,} resamples, got "
                        f"{samples:,}; sacrebleu's default is {RESAMPLES:,}")
    rng, rows = np.random.default_rng(seed), max(1, CHUNK // max(n, 1))
    for start in range(0, samples, rows):
        yield rng.choice(n, size=(min(rows, samples - start), n), replace=True)


def resampled_bleu(stats: np.ndarray, indices: np.ndarray, metric: BLEU) -> np.ndarray:
    """(resamples,) corpus BLEU of each resample.

    The statistics of a resample are summed as counts @ stats (how often each sentence was
    drawn), which needs (resamples, N) memory rather than (resamples, N, stats); the sums are
    integers, cast to float32 because sacrebleu scores float32 sums (NumPy 2 keeps that
    precision in ``compute_bleu``), so both give the same numbers.
    """
    resamples, n = indices.shape
    offsets = indices + n * np.arange(resamples)[:, None]
    counts = np.bincount(offsets.ravel(), minlength=resamples * n).reshape(resamples, n)
    sums = (counts @ stats).astype(np.float32)
    return np.array([stats_bleu(row, metric) for row in sums])


def interval95(scores: np.ndarray) -> tuple[float, float]:
    """sacrebleu's 95% interval of resampled scores: the values at positions n // 40 and
    n - n // 40 - 1 of the sorted scores (2.5% cut on each side)."""
    ordered = np.sort(scores)
    low = len(ordered) // 40
    return float(ordered[low]), float(ordered[len(ordered) - low - 1])


def interval(resampled: np.ndarray, observed: float) -> tuple[float, float]:
    """The interval rule (module docstring): :func:`interval95` of ``resampled`` re-centred
    on ``observed``."""
    return interval95(resampled - (resampled.mean() - observed))


def paired(system: np.ndarray, baseline: np.ndarray, value: float,
           baseline_value: float) -> dict[str, float | None]:
    """One system against the baseline: ``delta`` (``value - baseline_value``, the statistic
    on all units), its interval (``delta_low``, ``delta_high``) by the interval rule over
    the paired resamples ``system - baseline`` (each ``(samples,)``: the statistic on every
    resample), the ``delta_bias`` it is shifted by and sacrebleu's ``p_value``; the interval,
    bias and p are None where a value is not finite."""
    delta, diffs = value - baseline_value, system - baseline
    if not (np.isfinite(diffs).all() and np.isfinite(delta)):
        return {"delta": delta, "delta_low": None, "delta_high": None, "delta_bias": None,
                "p_value": None}
    low, high = interval(diffs, delta)
    return {"delta": delta, "delta_low": low, "delta_high": high,
            "delta_bias": float(diffs.mean() - delta),
            "p_value": p_value(system, baseline, delta)}


def p_value(system: np.ndarray, baseline: np.ndarray, observed: float) -> float:
    """Paired bootstrap p-value (step 5 of the module docstring): the share of centred
    resampled differences at least as large as the observed one, with the +1 that keeps
    the false-rejection rate at most the level."""
    diffs = np.abs(system - baseline)
    extreme = int(np.sum(diffs - diffs.mean() >= abs(observed)))
    return (extreme + 1) / (len(diffs) + 1)


def bootstrap_stats(baseline: np.ndarray, system: np.ndarray, metric: BLEU,
                    samples: int = RESAMPLES, seed: int = SEED) -> PairedBootstrap:
    """The paired bootstrap test of ``system`` against ``baseline``, both (N, k) sentence
    statistics of the same N test sentences (:func:`sentence_stats`)."""
    if baseline.shape != system.shape:
        raise UserError(f"the systems cover {baseline.shape[0]} and {system.shape[0]} "
                        "sentences; a paired test needs the same test sentences")
    scored = [(resampled_bleu(baseline, block, metric), resampled_bleu(system, block, metric))
              for block in bootstrap_chunks(len(system), samples, seed)]
    base_scores = np.concatenate([b for b, _ in scored])
    sys_scores = np.concatenate([s for _, s in scored])
    bleu, base = stats_bleu(system.sum(0), metric), stats_bleu(baseline.sum(0), metric)
    low, high = interval(sys_scores, bleu)
    return PairedBootstrap(bleu=bleu, baseline_bleu=base, bleu_mean=float(sys_scores.mean()),
                           bleu_low=low, bleu_high=high,
                           **paired(sys_scores, base_scores, bleu, base), samples=samples,
                           bootstrap_seed=seed, sentences=len(system))


def run_stats(hypotheses: Sequence[str], references: Sequence[str], metric: BLEU,
              runs: int = 1) -> np.ndarray:
    """(N, k) statistics of N test sentences: of ``runs`` runs' hypotheses concatenated
    (``references`` repeated alike, ``runs x N`` lines each), summed over the runs per
    sentence (see the module docstring)."""
    if runs < 1 or len(references) % runs:
        raise UserError(f"{len(references)} reference lines do not split into {runs} runs "
                        "of the same test set")
    stats = sentence_stats(hypotheses, references, metric)
    return stats.reshape(runs, len(references) // runs, -1).sum(axis=0)


def compare_to_baseline(baseline: Sequence[str], systems: Mapping[str, Sequence[str]],
                        references: Sequence[str], samples: int = RESAMPLES,
                        seed: int = SEED, metric: BLEU | None = None, runs: int = 1
                        ) -> dict[str, PairedBootstrap]:
    """Every system's hypotheses against the baseline's (all line-aligned with
    ``references``), each with the same resamples; the baseline against itself gives its
    own BLEU interval (and p = 1). ``runs``: each side is that many runs concatenated, and
    a resample draws test sentences with all their runs (module docstring)."""
    metric = metric or paper_bleu()
    base = run_stats(baseline, references, metric, runs)
    return {name: bootstrap_stats(base, run_stats(hyps, references, metric, runs), metric,
                                  samples, seed)
            for name, hyps in systems.items()}


def paired_bootstrap(baseline: Sequence[str], system: Sequence[str], references: Sequence[str],
                     samples: int = RESAMPLES, seed: int = SEED, runs: int = 1) -> dict:
    """One system against the baseline, as a row: the fields of :class:`PairedBootstrap`."""
    (result,) = compare_to_baseline(baseline, {"system": system}, references, samples,
                                    seed, runs=runs).values()
    return dataclasses.asdict(result)


def bootstrap_signature(metric: BLEU, samples: int = RESAMPLES, seed: int = SEED) -> str:
    """sacrebleu's signature of a paired bootstrap test (``nrefs:1|bs:1000|seed:12345|...``)
    with ``metric`` after it scored (sacrebleu learns the number of references then)."""
    sig = metric.get_signature()
    sig.update("bs", samples)
    sig.update("seed", seed)
    return str(sig)
