"""The one BLEU: validation's dev BLEU, reported scores and sentence BLEU share its settings."""

import sacrebleu

from arelu_cli.analysis.significance import compare_to_baseline
from arelu_cli.decode.bleu import bleu_chrf, corpus_bleu, paper_bleu

REFS = ["the cat sat on the mat .", "a red car drove by", "hello world how are you",
        "it is raining again today", "we went to the beach ."]
HYPS = ["the cat sat on a mat .", "a blue car drove", "hello world how are you",
        "it rains today", "we go to the beach ."]


def test_dev_bleu_is_the_reported_bleu_with_the_papers_settings():
    reported, _, signature, _ = bleu_chrf(HYPS, REFS)
    assert corpus_bleu(HYPS, REFS) == reported
    assert reported == sacrebleu.corpus_bleu(HYPS, [REFS], tokenize="13a").score
    assert "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp" in signature
    assert compare_to_baseline(HYPS, {"x": HYPS}, REFS)["x"].bleu == reported


def test_sentence_bleu_differs_only_by_the_effective_order():
    metric = paper_bleu(sentence=True)
    assert metric.sentence_score(HYPS[0], [REFS[0]]).score == \
        sacrebleu.sentence_bleu(HYPS[0], [REFS[0]]).score
    assert "eff:yes|tok:13a|smooth:exp" in str(metric.get_signature())
