"""The quality floor of a report: no verdict about translation quality from a model that did
not learn to translate.

A model with 0.3 test BLEU has an output distribution that says nothing about the paper's
claims (which transform translates better, whether the empty string wins, how sparse a trained
model's outputs are). So when a transform's mean test BLEU (Table 1) on a corpus is below the
floor, every verdict that rests on trained models of that folder is withheld: its check mark
becomes ``?`` and it says why. Verdicts about speed, about the transforms' formulas and about
untrained models (Table 3's τ) stand: they do not depend on what the model learned.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import pandas as pd

from arelu_cli.studies.markdown import Section, fmt
from arelu_cli.studies.seeds import groups, spread

QUALITY_FLOOR = 20.0
"""Test BLEU (mean over seeds) below which a model "did not learn enough" to be judged."""

NEEDS_LEARNED = frozenset({
    "table1_bleu.csv", "table2_empty.csv", "fig_sparsity.csv", "fig_tau_sweep.csv",
    "fig_self_norm.csv", "fig_tau_norm_evolution.csv", "table_human_eval.csv",
    "translation_examples.csv"})
"""The sections whose verdicts are about what trained models do (the rest: speed, formulas,
untrained τ)."""

_CLAIM_WORDS = (": holds here", ": does not hold here")


@dataclass(frozen=True)
class Unlearned:
    """A transform whose mean test BLEU on a corpus is below the floor."""

    corpus: str
    transform: str
    bleu: float


def below_floor(table1: pd.DataFrame | None, floor: float = QUALITY_FLOOR) -> list[Unlearned]:
    """The (corpus, transform) cells of Table 1 whose mean test BLEU is below ``floor``."""
    if table1 is None or not len(table1):
        return []
    out = []
    for (corpus, name), runs in groups(table1, ["corpus", "transform"]):
        bleu = spread(runs, "bleu").mean
        if bleu is not None and bleu < floor:
            out.append(Unlearned(str(corpus), str(name), float(bleu)))
    return out


def floor_reason(unlearned: list[Unlearned], floor: float = QUALITY_FLOOR) -> str:
    """One sentence naming the models below the floor."""
    names = ", ".join(f"{u.transform} on {u.corpus} ({fmt(u.bleu, 1)} BLEU)" for u in unlearned)
    return (f"{names} {'is' if len(unlearned) == 1 else 'are'} below the quality floor of "
            f"{fmt(floor, 0)} test BLEU: the model did not learn enough to judge")


def withhold_line(line: str, reason: str) -> str:
    """A ✓/✗ claim line turned into ``?`` "not judged"; any other line unchanged."""
    if not line.startswith(("✓ ", "✗ ")):
        return line
    text = line[2:]
    for word in _CLAIM_WORDS:
        text = text.replace(word, ": not judged", 1)
    return f"? {text.rstrip('.')} — {reason}."


def apply_floor(section: Section, unlearned: list[Unlearned],
                floor: float = QUALITY_FLOOR) -> Section:
    """``section`` with its verdicts withheld when it rests on learned models and some
    model of the folder is below the floor; otherwise ``section`` itself."""
    if not unlearned or section.source not in NEEDS_LEARNED:
        return section
    reason = floor_reason(unlearned, floor)
    return replace(section, verdicts=[withhold_line(v, reason) for v in section.verdicts])


def floor_paragraph(unlearned: list[Unlearned], floor: float = QUALITY_FLOOR) -> str:
    """The report's warning paragraph (empty when every model learned)."""
    if not unlearned:
        return ""
    return (f"> **Quality floor.** {floor_reason(unlearned, floor)}. Verdicts about "
            "translation quality, empty-string wins, sparsity and the τ sweep are therefore "
            "not given (marked ?); speed, the transforms' formulas and untrained-model τ are "
            "judged as usual. Train longer (e.g. `arelu reproduce toy --minutes 6`) for "
            "models that can be judged.")
