"""The paper's translation metrics: one BLEU for validation and for every reported score.

BLEU is the paper's (Setup, "We report detokenized case-sensitive BLEU with SacreBLEU"):
sacrebleu with one reference, mixed case, the 13a tokenizer and exponential smoothing
(signature ``nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:...``). The dev BLEU that
picks ``best.pt`` during training (:mod:`arelu_cli.train.evaluate`), ``arelu score``, Table 1,
its paired bootstrap tests and the study's tables all call :func:`paper_bleu`; sentence BLEU
(ranking translation examples) is the same metric with sacrebleu's effective n-gram order,
which a single sentence needs. chrF is sacrebleu's default chrF.
"""

from __future__ import annotations

from collections.abc import Sequence

from sacrebleu.metrics import BLEU, CHRF


def paper_bleu(*, sentence: bool = False) -> BLEU:
    """The paper's BLEU metric (13a, mixed case, exp smoothing); ``sentence=True`` adds the
    effective n-gram order that scoring one sentence at a time needs."""
    return BLEU(tokenize="13a", smooth_method="exp", lowercase=False, effective_order=sentence)


def corpus_bleu(hypotheses: Sequence[str], references: Sequence[str]) -> float:
    """Corpus BLEU of aligned detokenized lines with :func:`paper_bleu`."""
    return float(paper_bleu().corpus_score(list(hypotheses), [list(references)]).score)


def bleu_chrf(hypotheses: Sequence[str], references: Sequence[str]) -> tuple[float, float, str, str]:
    """Corpus BLEU (:func:`paper_bleu`) and chrF of aligned lines, with their signatures."""
    bleu, chrf = paper_bleu(), CHRF()
    refs = [list(references)]
    b = bleu.corpus_score(list(hypotheses), refs)
    c = chrf.corpus_score(list(hypotheses), refs)
    return b.score, c.score, str(bleu.get_signature()), str(chrf.get_signature())
