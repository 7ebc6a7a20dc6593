"""Translation examples where two transforms disagree (the paper's appendix table
tab:trans_examples: sentences where 1.5-ReLU translates better than 1.5-entmax and vice versa).

Selection is deterministic: among the sentences whose two hypotheses differ, those with
the largest sentence-BLEU gap in favour of ``a``, then those in favour of ``b``, ties broken by
line number; half of the examples each way (the other side fills in when one runs short).
"""

from __future__ import annotations

from collections.abc import Sequence


from arelu_cli.util.errors import UserError
from arelu_cli.decode.bleu import paper_bleu


def _check_lengths(**lists: Sequence[str]) -> int:
    lengths = {name: len(v) for name, v in lists.items()}
    if len(set(lengths.values())) != 1:
        raise UserError("sources, references and hypotheses must have one line per sentence, "
                        f"got {lengths}")
    return next(iter(lengths.values()))


def translation_examples_rows(sources: Sequence[str], references: Sequence[str],
                              system_a: str, hyps_a: Sequence[str], system_b: str,
                              hyps_b: Sequence[str], n: int = 4,
                              max_source_words: int = 40) -> list[dict]:
    """Up to ``n`` rows, ``ceil(n/2)`` where ``a`` scores higher, then those where ``b`` does."""
    if n < 1:
        raise UserError(f"the number of examples must be >= 1, got {n}")
    _check_lengths(sources=sources, references=references, hyps_a=hyps_a, hyps_b=hyps_b)
    bleu = paper_bleu(sentence=True)
    candidates = []
    for i, (src, ref, a, b) in enumerate(zip(sources, references, hyps_a, hyps_b)):
        if a.strip() == b.strip() or len(src.split()) > max_source_words:
            continue
        score_a = bleu.sentence_score(a, [ref]).score
        score_b = bleu.sentence_score(b, [ref]).score
        candidates.append({"index": i, "source": src, "reference": ref,
                           "system_a": system_a, "hypothesis_a": a, "bleu_a": score_a,
                           "system_b": system_b, "hypothesis_b": b, "bleu_b": score_b,
                           "bleu_diff": score_a - score_b})
    a_wins = sorted((c for c in candidates if c["bleu_diff"] > 0),
                    key=lambda c: (-c["bleu_diff"], c["index"]))
    b_wins = sorted((c for c in candidates if c["bleu_diff"] <= 0),
                    key=lambda c: (c["bleu_diff"], c["index"]))
    take_a = min(len(a_wins), max((n + 1) // 2, n - len(b_wins)))
    return a_wins[:take_a] + b_wins[:n - take_a]
