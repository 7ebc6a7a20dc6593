"""The verdicts of ``arelu study``'s ``REPORT.md`` (:mod:`arelu_cli.pipeline.study_report`),
computed from its tables, never written by hand:

* :func:`answer`: each transform against the baseline (and each borrowing transform against
  the one it borrows from) at equal steps, equal time and convergence: the difference with
  its 95% interval and p-value on the seeds joined, better / worse / no significant
  difference at p < :data:`ALPHA`, the per-seed differences, and whether the convergence gap
  closes;
* :func:`earlier_rows`: which claims of an earlier results folder (``[study] earlier``, an
  ``arelu reproduce`` folder such as ``results/multi30k``) stand, shrink, grow or fall: its
  test BLEU differences against this study's equal-time ones (:func:`bleu_verdict`), its
  training tokens/s ratios against the quiet step times (:func:`speed_verdict`).
"""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from arelu_cli.config import Config
from arelu_cli.pipeline.study_runs import borrowed
from arelu_cli.report.section import delta_text

ALPHA = 0.05
"""Significance level of "better" / "worse"."""
SPEED_TOLERANCE = 0.10
"""A speed ratio within this relative distance of the earlier one "stands"."""
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


def outcome(row: dict) -> str:
    if row["p_value"] >= ALPHA:
        return "no significant difference"
    return "better" if row["delta"] > 0 else "worse"


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
            + f": **{outcome(main)}**")
    if len(seeds) > 1:
        significant = sum(rows[s]["p_value"] < ALPHA for s in seeds)
        deltas = " / ".join(f"{rows[s]['delta']:+.2f}" for s in seeds)
        text += (f"; per seed {deltas} (seeds {' / '.join(seeds)}), significant at "
                 f"{significant} of {len(seeds)}")
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
    if late["p_value"] >= ALPHA:
        trend = ("the gap closes" if early["p_value"] < ALPHA
                 else "no significant gap at either length")
    elif early["p_value"] >= ALPHA:
        trend = "a gap opens"
    elif (late["delta"] > 0) != (early["delta"] > 0):
        trend = "the gap reverses"
    else:
        trend = "the gap narrows" if abs(late["delta"]) < abs(early["delta"]) else \
            "the gap holds or widens"
    return (f"at seed {seed} (in the convergence runs), Δ {early['delta']:+.2f} (p = "
            f"{early['p_value']:.3f}) after {config.train.max_steps:,} steps and "
            f"{late['delta']:+.2f} (p = {late['p_value']:.3f}) after "
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


def bleu_verdict(earlier: float, row: dict) -> str:
    """An earlier test BLEU difference against this study's (``row``: a paired bootstrap
    row): it *falls* when this study finds no significant difference or the opposite sign,
    *stands* when it lies in the 95% interval, else *shrinks* (the interval is nearer 0) or
    *grows*."""
    if row["p_value"] >= ALPHA:
        return "falls (no significant difference)"
    if (row["delta"] > 0) != (earlier > 0):
        return "falls (reversed)"
    if row["delta_low"] <= earlier <= row["delta_high"]:
        return "stands"
    return "shrinks" if abs(earlier) > max(abs(row["delta_low"]), abs(row["delta_high"])) \
        else "grows"


def speed_verdict(earlier: float, now: float) -> str:
    """An earlier speed ratio against this study's (both ``transform / baseline``): it
    *stands* within :data:`SPEED_TOLERANCE`, *falls* when it crosses 1, else *shrinks*
    (nearer 1) or *grows*."""
    if abs(now / earlier - 1) <= SPEED_TOLERANCE:
        return "stands"
    if (now > 1) != (earlier > 1):
        return "falls (reversed)"
    return "shrinks" if abs(math.log(now)) < abs(math.log(earlier)) else "grows"


def _by_transform(path: Path, column: str) -> tuple[dict[str, float] | None, str | None]:
    """Mean of ``column`` per transform (over seeds; test rows where a split is named), or
    None and why not: a report written after hours of training never fails on this file."""
    if not path.is_file():
        return None, f"{path} not found"
    try:
        frame = pd.read_csv(path)
    except (OSError, UnicodeDecodeError, ValueError) as err:
        return None, f"{path} could not be read ({err})"
    missing = [c for c in ("transform", column) if c not in frame]
    if missing:
        return None, f"{path} has no {' or '.join(missing)} column"
    if "split" in frame:
        frame = frame[frame["split"] == "test"]
    values = pd.to_numeric(frame[column], errors="coerce")
    return values.groupby(frame["transform"]).mean().dropna().to_dict(), None


def earlier_rows(config: Config, sig: list[dict], ms_per_step: dict[str, float]
                 ) -> tuple[list[dict], str | None]:
    """The claims of ``[study] earlier`` beside this study's numbers, with verdicts; and a
    note when the folder or one of its tables is missing or unreadable (None when all is
    there)."""
    folder = Path(config.study.earlier)
    bleu, no_bleu = _by_transform(folder / "table1_bleu.csv", "bleu")
    speed, no_speed = _by_transform(folder / "training_time.csv", "tokens_per_s")
    problems = [text for text in (no_bleu, no_speed) if text]
    note = f"{'; '.join(problems)}: those claims are not checked" if problems else None
    base, rows = config.study.baseline, []
    for name in ms_per_step:
        if name == base:
            continue
        test = _find(sig, "equal_time", name, base)
        main = test.get("joined") or next(iter(test.values()), None)
        if bleu and name in bleu and base in bleu and main is not None:
            was = bleu[name] - bleu[base]
            rows.append({"claim": f"test BLEU {name} − {base}", "earlier": f"{was:+.2f}",
                         "study": delta_text(main), "verdict": bleu_verdict(was, main)})
        if (speed and speed.get(name, 0) > 0 and speed.get(base, 0) > 0
                and base in ms_per_step):
            was, now = speed[name] / speed[base], ms_per_step[base] / ms_per_step[name]
            rows.append({"claim": f"training tokens/s {name} / {base}", "earlier": f"{was:.2f}×",
                         "study": f"{now:.2f}× (quiet step times)",
                         "verdict": speed_verdict(was, now)})
    return rows, note
