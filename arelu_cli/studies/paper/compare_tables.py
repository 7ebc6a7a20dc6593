"""Our tables beside the paper's: Tables 1-3, training time and human evaluation.

Each function takes the CSV's DataFrame (:mod:`arelu_cli.studies.paper.columns`) and returns a
:class:`~arelu_cli.studies.markdown.Section` whose verdicts are computed from the numbers:
printed numbers within :data:`arelu_cli.studies.paper.paper.TOLERANCE` match, and the paper's
qualitative claims are checked on every corpus, including those the paper did not use.
"""

from __future__ import annotations

import pandas as pd

from arelu_cli.studies.paper import paper
from arelu_cli.studies.markdown import (Section, claim, compare_numbers, fmt, match_line, md_table,
                                      missing, signed)
from arelu_cli.studies.paper.layout import cell_name
from arelu_cli.studies.seeds import groups, seeds_note, show, spread
from arelu_cli.studies.verdict import BETTER, INCONCLUSIVE, SAME, WORSE, verdict

TOL = paper.TOLERANCE


def _value(frame: pd.DataFrame, transform: str, column: str) -> float | None:
    """The mean over seeds of ``column`` for ``transform`` (None when absent)."""
    return spread(frame[frame["transform"] == transform], column).mean


def _tests_of(tests: pd.DataFrame | None, corpus: str,
              name: str) -> tuple[list[dict], dict | None]:
    """The per-seed tests of a transform (seed order) and the main one: the test on the
    seeds' outputs concatenated when there is one, else the only seed's."""
    if tests is None:
        return [], None
    part = tests[(tests["corpus"] == corpus) & (tests["transform"] == name)].to_dict("records")
    joined = [r for r in part if "+" in str(r["seeds"])]
    single = sorted((r for r in part if "+" not in str(r["seeds"])), key=lambda r: int(r["seeds"]))
    return single, (joined[0] if joined else single[0] if len(single) == 1 else None)


def _test_cells(tests: pd.DataFrame | None, corpus: str, name: str) -> list[str]:
    """BLEU 95% CI, Δ vs the baseline [95% CI], p (with the per-seed p in parentheses)."""
    single, main = _tests_of(tests, corpus, name)
    if main is None:
        return ["-", "-", "-"]
    ci = f"[{fmt(main['bleu_low'], 1)}, {fmt(main['bleu_high'], 1)}]"
    if missing(main["p_value"]):
        return [ci, "baseline", "-"]
    delta = (f"{signed(main['delta'])} [{signed(main['delta_low'])}, "
             f"{signed(main['delta_high'])}]")
    p = fmt(main["p_value"], 3)
    if len(single) > 1:
        p += " (per seed: " + " / ".join(fmt(r["p_value"], 3) for r in single) + ")"
    return [ci, delta, p]


def _test_verdicts(tests: pd.DataFrame, corpus: str) -> list[str]:
    """Which transforms are better, worse or inconclusive against the baseline by the main
    test (the one verdict rule, :mod:`arelu_cli.studies.verdict`)."""
    mains = [_tests_of(tests, corpus, n)[1] for n in dict.fromkeys(tests["transform"])]
    mains = [m for m in mains if m is not None and not missing(m["p_value"])]
    if not mains:
        return []
    seen: dict[str, list[str]] = {BETTER: [], WORSE: [], INCONCLUSIVE: [], SAME: []}
    for m in mains:
        seen[verdict(m)].append(f"{m['transform']} ({signed(m['delta'])} "
                                f"[{signed(m['delta_low'])}, {signed(m['delta_high'])}] BLEU)")
    base = mains[0]["baseline"]
    return [f"Against {base} on {corpus} (paired bootstrap, 95% interval of Δ): "
            + "; ".join(f"{word}: {', '.join(found) or 'none'}"
                        for word, found in seen.items() if found or word != SAME) + "."]


def _method_line(tests: pd.DataFrame) -> str:
    r = tests.iloc[0]
    several = any("+" in str(s) for s in tests["seeds"])
    return ("Paired bootstrap resampling of the test set (Koehn 2004; sacrebleu's --paired-bs "
            f"procedure, {int(r['samples']):,} resamples, seed {int(r['bootstrap_seed'])}) "
            f"against {r['baseline']}: 95% intervals of the BLEU and of the difference "
            "(re-centred on the observed value: arelu_cli.analysis.significance), p of 'no "
            "difference' (not read by the verdicts: a transform is better or worse where the "
            "interval of Δ excludes 0). "
            + ("With several seeds each test pairs the two transforms' runs of the same seed "
               "(p per seed in parentheses); the interval, Δ and first p are those of the test "
               "on the seeds' outputs concatenated, resampled by test sentence (each with all "
               "the seeds' translations of it)." if several else ""))


def table1_section(frame: pd.DataFrame, tests: pd.DataFrame | None = None) -> Section:
    """Table 1: BLEU per transform and corpus (mean ± std over seeds) beside the paper's;
    each transform against softmax (paired bootstrap); 1.5-ReLU vs 1.5-entmax."""
    rows, matches, differs, verdicts = [], [], [], []
    for (corpus,), part in groups(frame, ["corpus"]):
        for (name,), runs in groups(part, ["transform"]):
            bleu, theirs = spread(runs, "bleu"), paper.paper_value(paper.TABLE1_BLEU, name, corpus)
            rows.append([corpus, name, show(bleu, 1), show(spread(runs, "chrf"), 1),
                         fmt(theirs, 1), signed(None if theirs is None else bleu.mean - theirs, 1),
                         *(_test_cells(tests, corpus, name) if tests is not None else [])])
            compare_numbers(f"{corpus} {name}", bleu.mean, theirs, TOL["bleu"], 1, matches,
                            differs)
        ent = paper.entmax15_run(part["transform"]) or "1.5-entmax"
        relu, entmax = _value(part, "1.5-relu", "bleu"), _value(part, ent, "bleu")
        holds = None if relu is None or entmax is None else relu >= entmax - TOL["bleu"]
        verdicts.append(claim(f"1.5-ReLU performs on par with 1.5-entmax or better on {corpus}",
                              holds, f"1.5-ReLU − {ent} = "
                              f"{signed(None if holds is None else relu - entmax, 1)} BLEU; "
                              f"on par = within {TOL['bleu']:g}"))
        verdicts += _test_verdicts(tests, corpus) if tests is not None else []
    verdicts.insert(0, match_line(matches, differs, f"|Δ| ≤ {TOL['bleu']:g} BLEU"))
    verdicts += seeds_note(frame) + ([_method_line(tests)] if tests is not None else [])
    headers = ["corpus", "transform", "BLEU", "chrF", "paper BLEU", "Δ"]
    if tests is not None:
        headers += ["BLEU 95% CI", "Δ vs baseline [95% CI]", "p"]
    return Section("Table 1: detokenized test BLEU", "table1_bleu.csv", md_table(headers, rows),
                   verdicts)


def table2_section(frame: pd.DataFrame) -> Section:
    """Table 2: % of sentences whose empty string wins; sparse transforms vs softmax."""
    rows, matches, differs, verdicts = [], [], [], []
    for (corpus,), part in groups(frame, ["corpus"]):
        for (name,), runs in groups(part, ["transform"]):
            theirs = paper.paper_value(paper.TABLE2_EMPTY_PERCENT, name, corpus)
            percent = spread(runs, "percent_empty")
            wins = " / ".join(f"{r['n_empty_better']}/{r['n_sentences']}"
                              for r in runs.sort_values("seed").to_dict("records"))
            rows.append([corpus, name, wins, show(percent), fmt(theirs)])
            compare_numbers(f"{corpus} {name}", percent.mean, theirs, TOL["empty_percent"], 2,
                            matches, differs)
        soft = _value(part, "softmax", "percent_empty")
        relu = _value(part, "1.5-relu", "percent_empty")
        holds = None if soft is None or relu is None else relu < soft
        verdicts.append(claim(f"1.5-ReLU tackles the cat-got-your-tongue problem on {corpus} "
                              "(fewer empty wins than softmax)", holds,
                              f"softmax {fmt(soft)} %, 1.5-ReLU {fmt(relu)} %"))
    verdicts.insert(0, match_line(matches, differs, f"|Δ| ≤ {TOL['empty_percent']:g} points"))
    table = md_table(["corpus", "transform", "empty wins", "%", "paper %"], rows)
    return Section("Table 2: empty string outscores the beam hypothesis", "table2_empty.csv",
                   table, verdicts + seeds_note(frame))


def _table3_row(r: dict, runs: pd.DataFrame, matches: list,
                differs: list) -> tuple[list, str | None]:
    """One Table 3 line (the empirical tau of several seeds as mean ± std) and its claim."""
    printed = paper.TABLE3_TAU.get(int(r["d_vocab"])) if r["alpha"] == 1.5 else None
    if printed is None and not missing(r["corpus"]):
        printed = paper.TABLE3_TAU.get(paper.TABLE3_CORPUS_VOCAB.get(r["corpus"]))
    label = f"{'' if missing(r['corpus']) else r['corpus'] + ' '}d_vocab {int(r['d_vocab']):,}"
    stats = {col: spread(runs, col) for col in ("p_star", "tau_empirical", "tau_analytic")}
    row = [label, r["method"], fmt(r["alpha"]), show(stats["p_star"], 4),
           fmt(printed and printed["p_star"], 4), show(stats["tau_empirical"], 4),
           show(stats["tau_analytic"], 4), fmt(printed and printed["tau"], 2)]
    if printed and missing(r["corpus"]):
        compare_numbers(f"{label} p*", stats["p_star"].mean, printed["p_star"], TOL["p_star"], 4,
                        matches, differs)
    for col in ("tau_analytic", "tau_empirical") if printed else ():
        compare_numbers(f"{label} {col}", stats[col].mean, printed["tau"], TOL["tau"], 3,
                        matches, differs)
    empirical, analytic = stats["tau_empirical"].mean, stats["tau_analytic"].mean
    if empirical is None or analytic is None:
        return row, None
    gap, rule = abs(empirical - analytic), str(r["method"]).rpartition("analytic:")[2]
    return row, claim(f"τ̂ (no data, {rule or 'analytic'} rule) practically coincides with τ̃ "
                      f"for {label}", gap <= TOL["tau"],
                      f"|τ̃ − τ̂| = {gap:.4f}; coincide = within {TOL['tau']:g}")


def table3_section(frame: pd.DataFrame) -> Section:
    """Table 3: p* and tau at the paper's vocabularies; empirical vs analytic tau (the
    empirical tau of each seed's untrained model as mean ± std over seeds)."""
    rows, matches, differs, verdicts = [], [], [], []
    for _, runs in groups(frame, ["corpus", "d_vocab", "alpha", "method"]):
        row, verdict = _table3_row(runs.iloc[0].to_dict(), runs, matches, differs)
        rows.append(row)
        verdicts += [verdict] if verdict else []
    verdicts.insert(0, match_line(matches, differs, f"|Δp*| ≤ {TOL['p_star']:g}, "
                                  f"|Δτ| ≤ {TOL['tau']:g}"))
    table = md_table(["rows", "method", "α", "p*", "paper p*", "τ̃ empirical", "τ̂ analytic",
                      "paper τ"], rows)
    return Section("Table 3: τ of 1.5-entmax", "table3_tau.csv", table, verdicts)


def _relative_time(part: pd.DataFrame) -> pd.Series:
    """Time per token relative to softmax of the same seed (softmax tokens/s over this)."""
    soft = part[part["transform"] == "softmax"].drop_duplicates("seed").set_index("seed")
    base = part["seed"].map(soft["tokens_per_s"]) if len(soft) else pd.Series(float("nan"),
                                                                             index=part.index)
    return base / part["tokens_per_s"]


def side_by_side_note(frame: pd.DataFrame) -> list[str]:
    """The note under a table of speeds whose runs trained side by side (its ``beside``
    column, :mod:`arelu_cli.studies.side_by_side`); none for runs trained alone."""
    shared = int(frame["beside"].fillna(0).max()) if "beside" in frame and len(frame) else 0
    if not shared:
        return []
    return [f"The runs trained side by side (up to {shared + 1} at a time on one CPU, each on "
            "its share of the cores: `[reproduce] jobs`), so each speed is one measured while "
            "sharing the CPU with the others, and a run left alone at the end went faster; "
            "`--set reproduce.jobs=1` trains them one at a time for speeds of a quiet machine."]


def training_time_section(frame: pd.DataFrame) -> Section:
    """The appendix's training-time table: hours, tokens/s, kWh; time relative to softmax
    (per seed, then mean ± std over seeds)."""
    rows, verdicts = [], []
    for (corpus,), part in groups(frame, ["corpus"]):
        part = part.assign(rel=_relative_time(part), cell=[cell_name(r) for r in part["run"]])
        relative = {}
        for (cell, name), runs in groups(part, ["cell", "transform"]):
            rel = spread(runs, "rel")
            relative[name] = rel.mean
            hours = paper.paper_value(paper.TRAINING_HOURS, name, corpus)
            soft_hours = paper.paper_value(paper.TRAINING_HOURS, "softmax", corpus)
            rows.append([corpus, cell, name, show(spread(runs, "steps"), count=True),
                         show(spread(runs, "hours")), show(spread(runs, "tokens_per_s"), 0),
                         show(rel), show(spread(runs, "kwh")), fmt(hours),
                         fmt(hours / soft_hours if hours and soft_hours else None)])
        ent = paper.entmax15_run(relative) or "1.5-entmax"
        relu, entmax = relative.get("1.5-relu"), relative.get(ent)
        holds = None if relu is None or entmax is None else relu < entmax
        verdicts.append(claim(f"1.5-ReLU trains faster than 1.5-entmax on {corpus}", holds,
                              f"time per token vs softmax: 1.5-ReLU {fmt(relu)}×, "
                              f"{ent} {fmt(entmax)}×"))
    verdicts.append("Hours depend on the hardware and on how long each run trained; the "
                    "comparable number is the time per token relative to softmax (paper: "
                    "hours relative to softmax, trained to convergence).")
    verdicts += side_by_side_note(frame)
    table = md_table(["corpus", "run", "transform", "steps", "hours", "tokens/s",
                      "time/token vs softmax", "kWh", "paper hours", "paper hours vs softmax"], rows)
    return Section("Training time and energy (appendix, GPU power table)", "training_time.csv",
                   table, verdicts + seeds_note(frame))


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
