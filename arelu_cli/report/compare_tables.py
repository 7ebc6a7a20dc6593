"""Our tables beside the paper's: Tables 1-3, training time and human evaluation.

Each function takes the CSV's DataFrame (:mod:`arelu_cli.report.columns`) and returns a
:class:`~arelu_cli.report.markdown.Section` whose verdicts are computed from the numbers:
printed numbers within :data:`arelu_cli.report.paper.TOLERANCE` match, and the paper's
qualitative claims are checked on every corpus, including those the paper did not use.
"""

from __future__ import annotations

import pandas as pd

from arelu_cli.report import paper
from arelu_cli.report.markdown import (Section, claim, compare_numbers, fmt, match_line,
                                       md_table, missing, signed)

TOL = paper.TOLERANCE


def _value(frame: pd.DataFrame, transform: str, column: str) -> float | None:
    rows = frame[frame["transform"] == transform]
    return None if rows.empty else float(rows[column].iloc[0])


def _corpora(frame: pd.DataFrame) -> list[str]:
    return list(dict.fromkeys(frame["corpus"]))


def table1_section(frame: pd.DataFrame) -> Section:
    """Table 1: BLEU per transform and corpus beside the paper's; 1.5-ReLU vs 1.5-entmax."""
    rows, matches, differs, verdicts = [], [], [], []
    for corpus in _corpora(frame):
        part = frame[frame["corpus"] == corpus]
        for r in part.to_dict("records"):
            theirs = paper.paper_value(paper.TABLE1_BLEU, r["transform"], corpus)
            rows.append([corpus, r["transform"], fmt(r["bleu"], 1), fmt(r["chrf"], 1),
                         fmt(theirs, 1), signed(None if theirs is None else r["bleu"] - theirs, 1)])
            compare_numbers(f"{corpus} {r['transform']}", r["bleu"], theirs, TOL["bleu"], 1,
                            matches, differs)
        relu, entmax = _value(part, "1.5-relu", "bleu"), _value(part, "1.5-entmax", "bleu")
        holds = None if relu is None or entmax is None else relu >= entmax - TOL["bleu"]
        verdicts.append(claim(f"1.5-ReLU performs on par with 1.5-entmax or better on {corpus}",
                              holds, f"1.5-ReLU − 1.5-entmax = "
                              f"{signed(None if holds is None else relu - entmax, 1)} BLEU; "
                              f"on par = within {TOL['bleu']:g}"))
    verdicts.insert(0, match_line(matches, differs, f"|Δ| ≤ {TOL['bleu']:g} BLEU"))
    table = md_table(["corpus", "transform", "BLEU", "chrF", "paper BLEU", "Δ"], rows)
    return Section("Table 1: detokenized test BLEU", "table1_bleu.csv", table, verdicts)


def table2_section(frame: pd.DataFrame) -> Section:
    """Table 2: % of sentences whose empty string wins; sparse transforms vs softmax."""
    rows, matches, differs, verdicts = [], [], [], []
    for corpus in _corpora(frame):
        part = frame[frame["corpus"] == corpus]
        for r in part.to_dict("records"):
            theirs = paper.paper_value(paper.TABLE2_EMPTY_PERCENT, r["transform"], corpus)
            rows.append([corpus, r["transform"], f"{r['n_empty_better']}/{r['n_sentences']}",
                         fmt(r["percent_empty"]), fmt(theirs)])
            compare_numbers(f"{corpus} {r['transform']}", r["percent_empty"], theirs,
                            TOL["empty_percent"], 2, matches, differs)
        soft = _value(part, "softmax", "percent_empty")
        relu = _value(part, "1.5-relu", "percent_empty")
        holds = None if soft is None or relu is None else relu < soft
        verdicts.append(claim(f"1.5-ReLU tackles the cat-got-your-tongue problem on {corpus} "
                              "(fewer empty wins than softmax)", holds,
                              f"softmax {fmt(soft)} %, 1.5-ReLU {fmt(relu)} %"))
    verdicts.insert(0, match_line(matches, differs, f"|Δ| ≤ {TOL['empty_percent']:g} points"))
    table = md_table(["corpus", "transform", "empty wins", "%", "paper %"], rows)
    return Section("Table 2: empty string outscores the beam hypothesis", "table2_empty.csv",
                   table, verdicts)


def table3_section(frame: pd.DataFrame) -> Section:
    """Table 3: p* and tau at the paper's vocabularies; empirical vs analytic tau."""
    rows, matches, differs, verdicts = [], [], [], []
    for r in frame.to_dict("records"):
        printed = paper.TABLE3_TAU.get(int(r["d_vocab"])) if r["alpha"] == 1.5 else None
        if printed is None and not missing(r["corpus"]):
            vocab = paper.TABLE3_CORPUS_VOCAB.get(r["corpus"])
            printed = paper.TABLE3_TAU.get(vocab)
        label = f"{'' if missing(r['corpus']) else r['corpus'] + ' '}d_vocab {int(r['d_vocab']):,}"
        rows.append([label, r["method"], fmt(r["alpha"]), fmt(r["p_star"], 4),
                     fmt(printed and printed["p_star"], 4), fmt(r["tau_empirical"], 4),
                     fmt(r["tau_analytic"], 4), fmt(printed and printed["tau"], 2)])
        if printed and missing(r["corpus"]):
            compare_numbers(f"{label} p*", r["p_star"], printed["p_star"], TOL["p_star"], 4,
                            matches, differs)
        for col in ("tau_analytic", "tau_empirical") if printed else ():
            compare_numbers(f"{label} {col}", r[col], printed["tau"], TOL["tau"], 3, matches, differs)
        if not missing(r["tau_empirical"]) and not missing(r["tau_analytic"]):
            gap = abs(r["tau_empirical"] - r["tau_analytic"])
            rule = str(r["method"]).rpartition("analytic:")[2] or "analytic"
            verdicts.append(claim(f"τ̂ (no data, {rule} rule) practically coincides with τ̃ "
                                  f"for {label}",
                                  gap <= TOL["tau"], f"|τ̃ − τ̂| = {gap:.4f}; "
                                  f"coincide = within {TOL['tau']:g}"))
    verdicts.insert(0, match_line(matches, differs, f"|Δp*| ≤ {TOL['p_star']:g}, "
                                  f"|Δτ| ≤ {TOL['tau']:g}"))
    table = md_table(["rows", "method", "α", "p*", "paper p*", "τ̃ empirical", "τ̂ analytic",
                      "paper τ"], rows)
    return Section("Table 3: τ of 1.5-entmax", "table3_tau.csv", table, verdicts)


def training_time_section(frame: pd.DataFrame) -> Section:
    """The appendix's training-time table: hours, tokens/s, kWh; time relative to softmax."""
    rows, verdicts = [], []
    for corpus in _corpora(frame):
        part = frame[frame["corpus"] == corpus]
        base = _value(part, "softmax", "tokens_per_s")
        relative = {}
        for r in part.to_dict("records"):
            rel = None if base is None or missing(r["tokens_per_s"]) else base / r["tokens_per_s"]
            relative[r["transform"]] = rel
            hours = paper.paper_value(paper.TRAINING_HOURS, r["transform"], corpus)
            soft_hours = paper.paper_value(paper.TRAINING_HOURS, "softmax", corpus)
            rows.append([corpus, r["run"], r["transform"], r["steps"], fmt(r["hours"]),
                         fmt(r["tokens_per_s"], 0), fmt(rel), fmt(r["kwh"]), fmt(hours),
                         fmt(hours / soft_hours if hours and soft_hours else None)])
        relu, entmax = relative.get("1.5-relu"), relative.get("1.5-entmax")
        holds = None if relu is None or entmax is None else relu < entmax
        verdicts.append(claim(f"1.5-ReLU trains faster than 1.5-entmax on {corpus}", holds,
                              f"time per token vs softmax: 1.5-ReLU {fmt(relu)}×, "
                              f"1.5-entmax {fmt(entmax)}×"))
    verdicts.append("Hours depend on the hardware and on how long each run trained; the "
                    "comparable number is the time per token relative to softmax (paper: "
                    "hours relative to softmax, trained to convergence).")
    table = md_table(["corpus", "run", "transform", "steps", "hours", "tokens/s",
                      "time/token vs softmax", "kWh", "paper hours", "paper hours vs softmax"], rows)
    return Section("Training time and energy (appendix, GPU power table)", "training_time.csv",
                   table, verdicts)


def human_eval_section(systems: pd.DataFrame, kappa: pd.DataFrame | None) -> Section:
    """Table tab:human: mean ± std per system beside the paper's; Cohen's kappa vs 0.56."""
    rows, matches, differs = [], [], []
    for r in systems.to_dict("records"):
        theirs = paper.HUMAN_EVAL.get(r["system"])
        rows.append([r["system"], r["n"], fmt(r["mean"]), fmt(r["std"]),
                     fmt(theirs and theirs[0], 1), fmt(theirs and theirs[1])])
        compare_numbers(r["system"], r["mean"], theirs and theirs[0], TOL["human_mean"], 2,
                        matches, differs)
    for r in [] if kappa is None else kappa.to_dict("records"):
        compare_numbers(f"κ {r['annotator_a']}/{r['annotator_b']}", r["kappa"],
                        paper.HUMAN_EVAL_KAPPA, TOL["kappa"], 2, matches, differs)
    verdicts = [match_line(matches, differs, f"|Δ mean| ≤ {TOL['human_mean']:g}, "
                           f"|Δκ| ≤ {TOL['kappa']:g}")]
    means = {r["system"]: r["mean"] for r in systems.to_dict("records")}
    ref, others = means.pop("reference", None), list(means.values())
    holds = None if ref is None or not others else ref > max(others)
    verdicts.append(claim("every system is inferior to the reference", holds,
                          f"reference {fmt(ref)}, best system "
                          f"{fmt(max(others) if others else None)}"))
    table = md_table(["system", "n", "mean", "std", "paper mean", "paper std"], rows)
    if kappa is not None and len(kappa):
        table += "\n\n" + md_table(
            ["annotators", "shared items", "judgements", "κ", "κ linear", "paper κ"],
            [[f"{r['annotator_a']}/{r['annotator_b']}", r["n_items"], r["n_judgements"],
              fmt(r["kappa"]), fmt(r["kappa_linear"]), fmt(paper.HUMAN_EVAL_KAPPA)]
             for r in kappa.to_dict("records")])
    return Section("Human evaluation (4-point meaning scale)", "table_human_eval.csv", table,
                   verdicts)
