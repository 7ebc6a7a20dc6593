"""The verdicts of the tuned study's ``REPORT.md`` (:mod:`arelu_cli.studies.tuned.report`),
computed from its tables, never written by hand: :func:`answer`, each transform against the
baseline (and each borrowing transform against the one it borrows from) at equal steps,
equal time and convergence: the difference with its 95% interval on the seeds joined,
better, worse or inconclusive by the one verdict rule (:mod:`arelu_cli.studies.verdict`),
the per-seed differences, and whether the convergence gap closes.
"""

from __future__ import annotations

import pandas as pd

from arelu_cli.config import Config
from arelu_cli.studies.markdown import delta_text
from arelu_cli.studies.sweep import borrowed
from arelu_cli.studies.verdict import BETTER, WORSE, verdict

COMPARISONS = {"equal_steps": "equal steps", "equal_time": "equal time",
               "convergence_start": "convergence run, start", "convergence": "convergence"}
"""The comparisons of the study's tables, as the report names them."""


def pairs(config: Config, names: list[str]) -> list[tuple[str, str]]:
    """``(transform, reference)``: every transform against the baseline, then every
    borrowing transform against the one whose configuration it trains with."""
    base = config.study.baseline
    found = [(name, base) for name in names if name != base]
    found += [(name, lender) for name, lender in borrowed(config).items()
              if lender != base and name in names and lender in names]
    return found


def _find(sig: list[dict], comparison: str, name: str, reference: str) -> dict[str, dict]:
    """``{seeds label: row}`` of one pair at one comparison."""
    return {str(r["seeds"]): r for r in sig if r["comparison"] == comparison
            and r["transform"] == name and r["baseline"] == reference}


def _mean(summary: list[dict], comparison: str, name: str) -> str:
    for r in summary:
        if r["comparison"] == comparison and r["transform"] == name:
            std = "" if r["std"] is None or pd.isna(r["std"]) else f" ± {r['std']:.2f}"
            return f"{r['mean']:.2f}{std}"
    return "?"


def _steps(summary: list[dict], comparison: str, name: str) -> str:
    found = {str(r["steps"]) for r in summary
             if r["comparison"] == comparison and r["transform"] == name}
    steps = sorted({s for text in found for s in text.split(" / ")}, key=int)
    return " / ".join(f"{int(s):,}" for s in steps)


def _interval(row: dict) -> str:
    return f"{row['delta']:+.2f} [{row['delta_low']:+.2f}, {row['delta_high']:+.2f}]"


def comparison_sentence(summary: list[dict], sig: list[dict], comparison: str, name: str,
                        reference: str) -> str | None:
    """One pair at one comparison: means, the joined (or single-seed) test, the seeds."""
    rows = _find(sig, comparison, name, reference)
    if not rows:
        return None
    seeds = [label for label in rows if label != "joined"]
    main = rows.get("joined") or rows[seeds[0]]
    where = (f"{COMPARISONS[comparison]} ({name} step {_steps(summary, comparison, name)}, "
             f"{reference} step {_steps(summary, comparison, reference)})")
    text = (f"{where}: test BLEU {_mean(summary, comparison, name)} against "
            f"{_mean(summary, comparison, reference)}; Δ {delta_text(main)}"
            + (f" on the {len(seeds)} seeds' translations joined" if "joined" in rows
               else f" (seed {seeds[0]} only)")
            + f": **{verdict(main)}**")
    if len(seeds) > 1:
        decided = sum(verdict(rows[s]) in (BETTER, WORSE) for s in seeds)
        deltas = " / ".join(f"{rows[s]['delta']:+.2f}" for s in seeds)
        text += (f"; per seed {deltas} (seeds {' / '.join(seeds)}), better or worse at "
                 f"{decided} of {len(seeds)}")
    return text


def convergence_sentence(config: Config, sig: list[dict], name: str,
                         reference: str) -> str | None:
    """Does the gap at ``[train] max_steps`` (first seed) close by ``convergence_steps``?
    Read off the convergence runs themselves (``convergence_start``: the same trainings at
    ``max_steps``)."""
    seed = str(config.train.seed)
    late = _find(sig, "convergence", name, reference).get(seed)
    early = _find(sig, "convergence_start", name, reference).get(seed)
    if early is None or late is None:
        return None
    gap = {when: verdict(row) in (BETTER, WORSE) for when, row in (("early", early),
                                                                   ("late", late))}
    if not gap["late"]:
        trend = "the gap closes" if gap["early"] else "no gap at either length"
    elif not gap["early"]:
        trend = "a gap opens"
    elif (late["delta"] > 0) != (early["delta"] > 0):
        trend = "the gap reverses"
    else:
        trend = "the gap narrows" if abs(late["delta"]) < abs(early["delta"]) else \
            "the gap holds or widens"
    return (f"at seed {seed} (in the convergence runs), Δ {_interval(early)} after "
            f"{config.train.max_steps:,} steps and {_interval(late)} after "
            f"{config.study.convergence_steps:,}: **{trend}**")


def answer(config: Config, summary: list[dict], sig: list[dict]) -> list[str]:
    """One paragraph per pair (:func:`pairs`)."""
    names = list(dict.fromkeys(r["transform"] for r in summary))
    paragraphs = []
    for name, reference in pairs(config, names):
        parts = [comparison_sentence(summary, sig, c, name, reference) for c in COMPARISONS
                 if c != "convergence_start"]  # read by convergence_sentence
        parts.append(convergence_sentence(config, sig, name, reference))
        parts = [p for p in parts if p]
        if parts:
            why = "" if reference == config.study.baseline else " (its configuration's owner)"
            paragraphs.append(f"**{name} against {reference}{why}.** "
                              + ". ".join(p[0].upper() + p[1:] for p in parts) + ".")
    return paragraphs
