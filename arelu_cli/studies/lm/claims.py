"""The verdicts and ``REPORT.md`` text of the language-model study
(:mod:`arelu_cli.studies.lm.report`), computed from its tables alone (``summary.csv``,
``significance.csv``, ``sweep.csv`` rows): does pure alpha-ReLU sampling give text as
non-degenerate as softmax with nucleus sampling, at a perplexity-like cost no worse than
entmax sampling's, and how fast per token?

* (a) **non-degenerate**: each alpha-ReLU model's pure sampling against the reference
  (softmax with nucleus sampling) on distinct-2, loop share and Zipf gap to human, by the
  paired bootstrap over test prompts, each statistic better, worse, the same or inconclusive
  by the one verdict rule (:mod:`arelu_cli.studies.verdict`); the claim **holds** when each
  is better (or the same on every resample: no loop on either side, say), **does not hold**
  when one is worse, and is **inconclusive** otherwise;
* (b) **cost**: its eps-perplexity, sp and JSD against 1.5-entmax sampling's, mean and
  sample std over seeds: a difference within the larger of the two stds is **not resolved**
  at that many seeds; the claim **holds** when all three are better, **does not hold** when
  one is worse, and is otherwise not resolved, "no metric worse by more than the larger std"
  (no margin of non-inferiority is assumed); a study whose transforms include no 1.5-entmax
  says it does not ask;
* (c) **speed**: quiet ms per generated token of the full model at the batch size of
  ``bench_generate.csv``'s rows (``arelu bench lm-study``), against softmax's;
* (d) **a real LM**: the softmax model's test perplexity (pure sampling's distribution, the
  model's own) against the published target of its corpus (:data:`TARGETS`: PTB's), every
  transform's eps-perplexity beside it; on a corpus without one the perplexity is stated
  with no verdict.

The corpus is that of the compared runs (their prepared folder's name).

A verdict whose rows are missing says "not measured yet".
"""

from __future__ import annotations

from collections.abc import Sequence

from arelu_cli.studies.generations import DEGENERACY, HUMAN, degeneracy
from arelu_cli.studies.lm.runs import SAMPLE, TUNED, is_entmax15, is_relu, label
from arelu_cli.studies.markdown import Section, fmt, md_table, missing, page, signed

READING = ("The verdicts read the 95% interval of Δ (percentile, shifted by the bootstrap's bias "
           "estimate), never p. p is sacrebleu's `--paired-bs` p-value, which folds the "
           "resampled differences (|Δ*|) before centring them, in effect a one-sided test: near "
           "the boundary it can fall under 0.05 while the interval includes 0.")
"""How to read the bootstrap table (under it in ``REPORT.md``)."""
COST = (("eps_ppl", "ε-perplexity", -1), ("sp", "sp", 1), ("jsd", "JSD", -1))
TARGET = ("the small configuration of Zaremba et al. 2014's PTB LSTM: 115.9 as the "
          "TensorFlow tutorial reports it; the paper's non-regularized LSTM: 114.5")
TARGETS = {"ptb": (116.0, TARGET)}
"""Corpus (as prepared: ``meta.json``'s ``corpus``) -> (test perplexity a real LM reaches on
it, where that number comes from)."""
CORPORA = {"ptb": "PTB", "tinyshakespeare": "Tiny Shakespeare"}
"""How the report names a prepared corpus (others: as prepared)."""
FIGURES = {
    "summary.png": (
        "Figure: distance to human text against ε-perplexity", "summary.csv",
        "Each model × sampling decoding's distinct-2 and Zipf-coefficient distances to the "
        "human continuations (lower: closer to human text) against its ε-perplexity (lower: "
        "the model gives the human text more probability); mean over seeds, "
        "bars ± one std. Greedy decoding, far off on every axis, is in the tables only."),
    "dev_curves.png": (
        "Figure: dev loss against steps", "dev_curves.csv",
        "Each transform's dev loss at each validation step of its seed runs (its own training "
        "loss, so the panels' scales differ): a thick mean over thin per-seed lines.")}
"""PNG -> (section title, the CSV it is drawn from, how to read it)."""
UNKNOWN = "unknown machine"
"""The machine of a timing whose record names none."""


def _find(rows: Sequence[dict], **keys: object) -> list[dict]:
    return [r for r in rows if all(r.get(k) == v for k, v in keys.items())]


def _relu_names(summary: Sequence[dict]) -> list[str]:
    return list(dict.fromkeys(r["transform"] for r in summary if is_relu(r["transform"])))


def _system(name: str, rows: Sequence[dict] = ()) -> str:
    readable = label(name)
    return name if readable == name else f"{readable} (`{name}`)"


def degeneracy_verdict(name: str, sig: Sequence[dict], summary: Sequence[dict],
                       baseline: str, reference: str, decoding: str = SAMPLE,
                       shift: float | None = None) -> str:
    """(a) of the module docstring for alpha-ReLU model ``name`` sampled with ``decoding``
    (pure sampling, or at the tau shift selected on dev: ``TUNED``, whose ``shift`` the
    verdict names when known)."""
    chosen = "" if shift is None else f" {shift:+g}"
    how = "pure" if decoding == SAMPLE else f"`{decoding}` (tau shift{chosen} selected on dev)"
    ask = (f"(a) Is {how} {_system(name, summary)} sampling as non-degenerate as "
           f"{_system(baseline, summary)} {reference}?")
    rows = {r["statistic"]: r for r in _find(sig, transform=name, decoding=decoding)}
    found = degeneracy(rows)
    if found is None:
        return (f"{ask} Not measured yet: needs the lm-eval rows and generations of `{name}` "
                f"{decoding} and of `{baseline}` {reference}, and {HUMAN}.")
    answer, parts = found
    one = rows[DEGENERACY[0][0]]
    return (f"{ask} **{answer}**: {'; '.join(parts)}; paired bootstrap over "
            f"{one['prompts']} test prompts, {one['samples']} resamples, seeds "
            f"{one['seeds']} vs {one['baseline_seeds']}.")


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def _spread(row: dict, metric: str) -> str:
    mean, std = row[f"{metric}_mean"], row[f"{metric}_std"]
    return fmt(mean, 3) if missing(std) else f"{fmt(mean, 3)} ± {fmt(std, 3)}"


def _seed_word(mine: dict, theirs: dict, metric: str, better: int) -> str:
    diff = mine[f"{metric}_mean"] - theirs[f"{metric}_mean"]
    stds = [mine[f"{metric}_std"], theirs[f"{metric}_std"]]
    if any(missing(s) for s in stds):
        return "one seed on a side: not resolved"
    if abs(diff) <= max(stds):
        return f"within one std: not resolved at {min(mine['n'], theirs['n'])} seeds"
    return "better" if diff * better > 0 else "worse"


def cost_verdict(name: str, summary: Sequence[dict],
                 planned: Sequence[str] | None = None) -> str:
    """(b) of the module docstring for alpha-ReLU model ``name``; ``planned``: the study's
    ``[lm_study] transforms`` where known (a study without 1.5-entmax never answers (b), and
    says so instead of "not measured yet")."""
    entmax = [r for r in summary if is_entmax15(r["transform"]) and r["decoding"] == SAMPLE]
    mine = _find(summary, transform=name, decoding=SAMPLE)
    ask = (f"(b) Is {_system(name, summary)} sampling's perplexity-like cost no worse than "
           "1.5-entmax sampling's?")
    if not entmax and planned is not None and not any(map(is_entmax15, planned)):
        return (f"{ask} Not asked by this study: its transforms "
                f"({', '.join(map(label, planned))}) "
                "include no 1.5-entmax.")
    if not entmax or not mine or any(missing(r[f"{m}_mean"]) for r in (entmax[0], mine[0])
                                     for m, _, _ in COST):
        return f"{ask} Not measured yet: needs both models' lm-eval rows for {SAMPLE}."
    theirs, mine = entmax[0], mine[0]
    words = [_seed_word(mine, theirs, m, better) for m, _, better in COST]
    parts = [f"{what} {_spread(mine, m)} vs {_spread(theirs, m)} "
             f"(Δ {signed(mine[f'{m}_mean'] - theirs[f'{m}_mean'], 3)}: {word})"
             for (m, what, _), word in zip(COST, words)]
    seeds = min(mine["n"], theirs["n"])
    verdict = ("does not hold" if "worse" in words else "holds" if set(words) == {"better"}
               else f"not resolved at {_count(seeds, 'seed')}"
               + (" (no metric worse by more than the larger std)" if seeds > 1 else ""))
    return (f"{ask} **{verdict}** against `{theirs['transform']}`: {'; '.join(parts)}; "
            f"mean ± sample std over seeds {mine['seeds']} vs {theirs['seeds']}.")


def _record_rates(rows: Sequence[dict], summary: Sequence[dict]) -> str:
    """What the generation records (timed while the study ran, not quietly) say of the
    systems of ``rows``: their tokens/s where one machine took them all, else the machines."""
    timed = [r for r in rows if not missing(r["gen_tokens_per_s"])]
    if not timed:
        return ""
    machines = list(dict.fromkeys(r.get("gen_machine") or UNKNOWN for r in rows))
    if len(machines) > 1 or len(timed) < len(rows):
        where = "; ".join(f"{_system(r['transform'], summary)} {r['decoding']}: "
                          f"{r.get('gen_machine') or UNKNOWN}" for r in rows)
        return (" The generation records' tokens/s are not compared: one machine did not "
                f"time them all ({where}).")
    rates = [f"{_system(r['transform'], summary)} {r['decoding']} "
             f"{fmt(r['gen_tokens_per_s'], 0)}" for r in timed]
    return (f" The generation records, timed while the study ran (not quietly), give "
            f"{' vs '.join(rates)} tokens/s ({machines[0]}).")


def speed_verdict(name: str, summary: Sequence[dict], baseline: str, reference: str,
                  bench: bool) -> str:
    """(c) of the module docstring for alpha-ReLU model ``name``."""
    ask = f"(c) How fast is {_system(name, summary)} sampling per token?"
    mine = _find(summary, transform=name, decoding=SAMPLE)
    ref = _find(summary, transform=baseline, decoding=reference)
    if not bench:
        return f"{ask} Not measured yet: bench_generate.csv is missing (quiet timing)." + \
            _record_rates(mine + ref, summary)
    others = ref + [r for r in summary if is_entmax15(r["transform"])
                    and r["decoding"] == SAMPLE]
    if not mine or missing(mine[0]["ms_per_token"]):
        return f"{ask} Not measured yet: bench_generate.csv has no `{name}` {SAMPLE} row."
    ms = mine[0]["ms_per_token"]
    parts = [f"{_system(r['transform'], summary)} {r['decoding']} "
             f"{fmt(r['ms_per_token'], 3)} ms (× {ms / r['ms_per_token']:.2f} its time)"
             for r in others if not missing(r["ms_per_token"])]
    return (f"{ask} {fmt(ms, 3)} ms per token at batch {mine[0]['bench_batch']} "
            "(bench_generate.csv, quiet)"
            + (f"; against {', '.join(parts)}." if parts else "; nothing to compare with yet."))


def corpus_label(corpus: str | None) -> str:
    return CORPORA.get(corpus, corpus) if corpus else "an unnamed corpus"


def perplexity_verdict(summary: Sequence[dict], baseline: str,
                       target: tuple[float, str] | None, corpus: str | None = None) -> str:
    """(d) of the module docstring; ``target``: (perplexity, its source), None where the
    corpus has none (the perplexity is then stated, with no verdict)."""
    ask = (f"(d) Is the {baseline} model a real language model (test perplexity ≤ "
           f"{target[0]:g}, {target[1]})?" if target else
           f"(d) The {baseline} model's test perplexity on {corpus_label(corpus)} (no "
           "published target is set for this corpus, so no verdict):")
    rows = _find(summary, transform=baseline, decoding=SAMPLE)
    if not rows or missing(rows[0]["ppl_mean"]):
        return f"{ask} Not measured yet: needs `{baseline}` {SAMPLE} lm-eval rows."
    row, beside = rows[0], [r for r in summary if r["decoding"] == SAMPLE]
    eps = ", ".join(f"{_system(r['transform'], summary)} {_spread(r, 'eps_ppl')}"
                    for r in beside if not missing(r["eps_ppl_mean"]))
    measured = (f"test perplexity {_spread(row, 'ppl')} (seeds {row['seeds']}). ε-perplexity "
                f"of pure sampling beside it: {eps}.")
    if not target:
        return f"{ask} {measured}"
    verdict = "holds" if row["ppl_mean"] <= target[0] else "does not hold"
    return f"{ask} **{verdict}**: {measured}"


def tuned_verdict(name: str, sig: Sequence[dict], summary: Sequence[dict], baseline: str,
                  reference: str, shift: float | None) -> str:
    """(a) for ``TUNED`` sampling; at a selected shift of 0 it *is* pure sampling (the same
    rows), so the line says so rather than repeat pure sampling's verdict as if it were
    another finding."""
    if shift == 0:
        return (f"(a) `{TUNED}` of {_system(name, summary)}: the tau shift selected on dev "
                "(`tau_sweep.csv`) is 0, the paper's tau, so it is pure sampling and the "
                "verdict above is its verdict.")
    return degeneracy_verdict(name, sig, summary, baseline, reference, TUNED, shift)


def verdicts(summary: Sequence[dict], sig: Sequence[dict], *, baseline: str, reference: str,
             target_ppl: tuple[float, str] | None, bench: bool,
             shifts: dict[str, float] | None = None, corpus: str | None = None,
             planned: Sequence[str] | None = None) -> list[str]:
    """Every verdict, (a)-(c) per alpha-ReLU model; ``shifts``: the tau shift each one's
    sweep on dev selected, where known; ``planned``: :func:`cost_verdict`'s."""
    shifts = shifts or {}
    names = _relu_names(summary)
    if not names:
        return ["(a)-(c) Not measured yet: no alpha-ReLU model has lm-eval rows.",
                perplexity_verdict(summary, baseline, target_ppl, corpus)]
    tuned = [(name, TUNED) for name in names if _find(sig, transform=name, decoding=TUNED)]
    return [line for name in names for line in (
        degeneracy_verdict(name, sig, summary, baseline, reference),
        *(tuned_verdict(n, sig, summary, baseline, reference, shifts.get(n)) for n, _ in tuned
          if n == name),
        cost_verdict(name, summary, planned),
        speed_verdict(name, summary, baseline, reference, bench))] + [
        perplexity_verdict(summary, baseline, target_ppl, corpus)]


SUMMARY_TABLE = (("ε-ppl", "eps_ppl", 1), ("ppl", "ppl", 1), ("sp", "sp", 3), ("JSD", "jsd", 3),
                 ("rep-32", "rep_32", 3), ("distinct-2", "distinct_2", 3),
                 ("loop", "loop", 3), ("Zipf", "zipf", 3), ("Zipf gap", "zipf_gap", 3),
                 ("self-BLEU", "self_bleu", 1), ("length", "length", 1))


def summary_table(summary: Sequence[dict]) -> str:
    def cell(r: dict, metric: str, digits: int) -> str:
        mean, std = r[f"{metric}_mean"], r[f"{metric}_std"]
        return fmt(mean, digits) + ("" if missing(std) else f" ± {fmt(std, digits)}")

    return md_table(["model", "decoding", "seeds", "ε", *(h for h, _, _ in SUMMARY_TABLE),
                     "ms/token"],
                    [[_system(r["transform"], summary), r["decoding"], r["seeds"],
                      "" if missing(r.get("eps")) else r.get("eps", ""),
                      *(cell(r, m, d) for _, m, d in SUMMARY_TABLE),
                      fmt(r["ms_per_token"], 3)] for r in summary])


def significance_table(sig: Sequence[dict]) -> str:
    return md_table(["model", "decoding", "statistic", "value", "reference", "human",
                     "Δ [95% CI]", "p"],
                    [[f"{r['label']} (`{r['transform']}`)", r["decoding"], r["statistic"],
                      fmt(r["value"], 3), fmt(r["baseline_value"], 3),
                      "" if r["statistic"].endswith("_gap") else fmt(r["human"], 3),
                      f"{signed(r['delta'], 3)} [{signed(r['delta_low'], 3)}, "
                      f"{signed(r['delta_high'], 3)}]", fmt(r["p_value"], 3)] for r in sig])


def sweep_table(sweep: Sequence[dict]) -> str:
    return md_table(["model", "run", "lr", "warmup", "label smoothing", "steps",
                     "best dev loss", "dev ppl", "selected"],
                    [[f"{r['label']} (`{r['transform']}`)", r["run"], r["lr"], r["warmup"],
                      r["label_smoothing"], fmt(r["steps"], 0), fmt(r["dev_loss"], 4),
                      fmt(r["dev_ppl"], 1), "**yes**" if r["selected"] else ""]
                     for r in sweep])


def report_text(out, summary: Sequence[dict], sig: Sequence[dict], sweep: Sequence[dict],
                setup: Sequence[str], lacking: Sequence[str], claims: Sequence[Section], *,
                notes: Sequence[str] = (), baseline: str, reference: str, samples: int,
                corpus: str | None = None, figures: Sequence[str] = ()) -> str:
    """``REPORT.md``: setup, what is missing, the answer, then every table."""
    intro = "\n\n".join(part for part in [
        f"Language models on {corpus_label(corpus)} compared: every model × "
        "decoding measured by `arelu lm-eval` on the test split (teacher-forced metrics on its "
        "blocks, generation statistics on continuations of its prompts); paired bootstrap over "
        "test prompts "
        f"({samples} resamples) against `{baseline}` {reference}.", " ".join(setup),
        "Missing so far: " + "; ".join(lacking) + "." if lacking
        else "Nothing is missing." if summary else "",
        "\n".join(f"- {note}." for note in notes)] if part)
    return page("Language-model study report", intro, [
        *claims,
        Section("Per model and decoding (mean ± sample std over seeds)", "summary.csv",
                summary_table(summary) if summary else "No lm-eval rows yet."),
        Section("Paired bootstrap over test prompts", "significance.csv",
                significance_table(sig) if sig else "Not measured yet.",
                verdicts=[READING] if sig else []),
        Section("Learning-rate sweep (dev loss)", "sweep.csv",
                sweep_table(sweep) if sweep else "No sweep run yet."),
        *(Section(FIGURES[f][0], FIGURES[f][1], figure=f, verdicts=[FIGURES[f][2]])
          for f in figures)], out, [
        "## Files", "lm_eval.csv (every lm-eval row, with its run), summary.csv, "
        "significance.csv, sweep.csv, dev_curves.csv (and their PNGs); selected.json, "
        "human.tokens.json, bench_generate.csv; runs/NAME/POINT/ (the sweep) and "
        "seeds/NAME/seed-S/ (config.json, "
        "log.csv, summary.json, lm_eval/DECODING.csv, generations/DECODING.*)."])
