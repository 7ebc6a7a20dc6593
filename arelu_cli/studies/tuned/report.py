"""The tables, claims and ``REPORT.md`` of the tuned study
(:mod:`arelu_cli.studies.tuned.study`), read from its folder's files alone (the test
references come from the recipe's prepared corpus).

CSVs (one row per measurement, each with its signature):

* ``sweep.csv``: every configuration tried, its dev BLEU (best greedy validation BLEU) and
  whether it was selected; a run that trained again (its checkpoints lost before its test
  translations were made) is selected on its first training and also shows the second's
  dev BLEU (``dev_bleu_again``), which is the one whose weights its test BLEU comes from;
* ``test_bleu.csv``: test BLEU and chrF (``[decode]`` beam) of every run at each
  comparison: ``equal_steps``, ``equal_time`` (the step it reaches in the same training
  time), ``convergence`` (a convergence run's last step) and ``convergence_start`` (the same
  run at ``[train] max_steps``);
* ``test_bleu_summary.csv``: mean, standard deviation (n - 1) and the per-seed values;
* ``significance.csv``: paired bootstrap resampling (:mod:`arelu_cli.analysis.significance`)
  of each transform against the baseline, and of each ``[study] borrow`` transform against
  the one it borrows from, seed by seed and on the seeds' outputs joined;
* ``dev_curves.csv`` (and ``.png``): dev BLEU at every validation of every seed and
  convergence run; ``sweep.png``: the sweep's dev BLEU against the learning rate.

``REPORT.md`` opens with the verdicts computed from these tables
(:mod:`arelu_cli.studies.tuned.claims`), the answer per pair; then equal time, the sweep,
the test BLEU.
"""

from __future__ import annotations

import statistics
from pathlib import Path

import pandas as pd

from arelu_cli.config import Config
from arelu_cli.decode.bleu import bleu_chrf
from arelu_cli.studies.contract import Table, Tables
from arelu_cli.studies.core import Run
from arelu_cli.studies.markdown import Section, delta_text, fmt, md_table, page
from arelu_cli.studies.sweep import (Point, axes, read_selection, run_folder, scores,
                                     sweep_summary, visited)
from arelu_cli.studies.translation import (bootstrap_rows, dev_log, references, seed_groups,
                                           translation_lines, translation_path)
from arelu_cli.studies.tuned.claims import COMPARISONS, answer, pairs
from arelu_cli.studies.tuned.plots import plot_study_curves, plot_study_sweep
from arelu_cli.studies.tuned.runs import (BENCH, Evaluation, convergence_runs,
                                          equal_time_budget_ms, equal_time_steps, evaluations,
                                          seed_runs, step_times)
from arelu_cli.train import run_dir
from arelu_cli.util.errors import UserError
from arelu_cli.util.results import read_json

SIGNATURE = "run signature: transform, alpha, tau, data, recipe, seed, package versions"
POINT = {"lr": "Noam learning-rate factor", "warmup": "warmup steps",
         "label_smoothing": "label smoothing"}
TEST_ROWS = "as in test_bleu.csv"
CATALOG: dict[str, dict[str, str]] = {
    "sweep.csv": {
        "transform": "output transform", **POINT, "steps": "optimizer steps trained",
        "dev_bleu": "best greedy validation BLEU (of the first training)",
        "best_step": "its step", "selected": "whether the sweep selected it",
        "run": "run folder name", "dev_bleu_again": "best validation BLEU of a second "
        "training (its checkpoints were lost), empty otherwise", "signature": SIGNATURE},
    "test_bleu.csv": {
        "comparison": "equal_steps, equal_time, convergence_start or convergence",
        "transform": "output transform", "seed": "training seed", "step": "kept weights "
        "translated", "bleu": "detokenized cased test BLEU", "chrf": "chrF", **POINT,
        "beam": "beam size", "translation": "the translation file, relative to the folder",
        "sacrebleu": "sacrebleu's metric signature", "signature": SIGNATURE},
    "test_bleu_summary.csv": {
        "comparison": TEST_ROWS, "transform": "output transform", "n": "seeds",
        "mean": "mean test BLEU", "std": "sample standard deviation",
        "per_seed": "the values, in seed order", "seeds": "the seeds",
        "steps": "the step of each seed"},
    "significance.csv": {
        "comparison": TEST_ROWS, "transform": "output transform",
        "baseline": "what it is tested against (the baseline, or the transform whose "
        "configuration it borrows)", "seeds": "the seed of both sides, or joined",
        "bleu": "the transform's BLEU", "baseline_bleu": "the baseline's BLEU",
        "bleu_mean": "mean of its resampled BLEU", "bleu_low": "95% interval of its BLEU "
        "(arelu_cli.analysis.significance)", "bleu_high": "its upper end",
        "delta": "bleu - baseline_bleu", "delta_low": "95% interval of the difference",
        "delta_high": "its upper end", "delta_bias": "the bootstrap's bias estimate the "
        "intervals are shifted by", "p_value": "sacrebleu's paired bootstrap p (not read "
        "by the verdicts)", "samples": "bootstrap resamples", "bootstrap_seed": "seed of "
        "the resamples", "sentences": "test sentences resampled",
        "signature": "sacrebleu's signature of the test (bs, seed)"},
    "dev_curves.csv": {
        "transform": "output transform", "seed": "training seed", "run": "run folder name",
        "step": "optimizer step", "dev_bleu": "greedy validation BLEU",
        "dev_loss": "validation loss", "train_steps": "the run's step budget"},
}
"""Every CSV of the study: its columns in order, each with what it holds."""



def sweep_rows(config: Config, out: Path, selected: dict[str, Point]) -> list[dict]:
    rows, base = [], config.train.seed
    for name in config.sweep.transforms:
        found = scores(config, out, name)
        for point in visited(axes(config), config.sweep.order, found, config.sweep.extend):
            folder = run_folder(out, name, point, base, base)
            info = sweep_summary(folder)
            again = run_dir.first_summary(folder) and _current(folder)
            rows.append({"transform": name, "lr": point.lr, "warmup": point.warmup,
                         "label_smoothing": point.label_smoothing, "steps": info["steps"],
                         "dev_bleu": run_dir.best_score(info), "best_step": info["best_step"],
                         "selected": point == selected[name], "run": point.name,
                         # a second training of the run (its checkpoints were lost): its dev
                         # BLEU, which the selection does not use
                         "dev_bleu_again": run_dir.best_score(again) if again else "",
                         "signature": info.get("signature", "")})
    return rows


def _current(folder: Path) -> dict | None:
    return run_dir.read_summary(folder) if run_dir.finished(folder) else None


def bleu_rows(config: Config, out: Path, todo: list[Evaluation],
              refs: list[str]) -> list[dict]:
    hyps, rows = _hypotheses(config, todo, len(refs)), []
    for comparison, run, step in todo:
        path = translation_path(run.folder, step, config.decode.beam)
        bleu, chrf, bleu_sig, _ = bleu_chrf(hyps[(comparison, run.name, run.seed)], refs)
        meta = read_json(f"{path}.json", f"delete {path} and its .json to translate again")
        point = Point.of(run)
        rows.append({"comparison": comparison, "transform": run.name, "seed": run.seed,
                     "step": step, "bleu": round(bleu, 2), "chrf": round(chrf, 2),
                     "lr": point.lr, "warmup": point.warmup,
                     "label_smoothing": point.label_smoothing, "beam": config.decode.beam,
                     "translation": path.relative_to(out).as_posix(), "sacrebleu": bleu_sig,
                     "signature": meta["signature"]})
    return rows


def summary_rows(bleu: list[dict]) -> list[dict]:
    """Mean and sample standard deviation over seeds, with the per-seed values."""
    frame = pd.DataFrame(bleu)
    rows = []
    for (comparison, name), group in frame.groupby(["comparison", "transform"], sort=False):
        values = list(group.sort_values("seed")["bleu"])
        rows.append({"comparison": comparison, "transform": name, "n": len(values),
                     "mean": round(statistics.fmean(values), 2),
                     "std": round(statistics.stdev(values), 2) if len(values) > 1 else None,
                     "per_seed": " / ".join(f"{v:.2f}" for v in values),
                     "seeds": " / ".join(str(s) for s in sorted(group["seed"])),
                     "steps": " / ".join(str(s) for s in group.sort_values("seed")["step"])})
    return rows


def curve_rows(runs: list[Run]) -> list[dict]:
    rows = []
    for run in runs:
        log = dev_log(run.folder)
        for record in log.dropna(subset=["val_bleu"]).to_dict("records"):
            rows.append({"transform": run.name, "seed": run.seed, "run": run.folder.name,
                         "step": int(record["step"]), "dev_bleu": record["val_bleu"],
                         "dev_loss": record.get("val_loss"), "train_steps": run.steps})
    return rows


def _hypotheses(config: Config, todo: list[Evaluation], references: int) -> dict:
    """``{(comparison, transform, seed): lines}`` of the test translations, each checked
    against the number of test references."""
    return {(c, run.name, run.seed): translation_lines(
                translation_path(run.folder, step, config.decode.beam), references)
            for c, run, step in todo}


def significance_rows(config: Config, todo: list[Evaluation], refs: list[str]) -> list[dict]:
    """Each pair of :func:`~arelu_cli.studies.tuned.claims.pairs` (each transform against the
    baseline, each borrower against its lender) at each comparison by paired bootstrap:
    per seed (same seed on both sides), and on the seeds' translations joined
    (:func:`~arelu_cli.studies.translation.bootstrap_rows`), each signed by its test's
    sacrebleu signature."""
    hyps, rows = _hypotheses(config, todo, len(refs)), []
    for comparison in dict.fromkeys(item.comparison for item in todo):
        mine = {(t, s): lines for (c, t, s), lines in hyps.items() if c == comparison}
        names = list(dict.fromkeys(t for t, _ in mine))
        groups = seed_groups(sorted({s for _, s in mine}), "joined")
        for row in bootstrap_rows(pairs(config, names), mine, refs, groups,
                                  config.study.bootstrap_samples):
            signature = row.pop("bleu_signature")
            rows.append({"comparison": comparison, **row, "signature": signature})
    return rows


def _sweep_table(rows: list[dict]) -> str:
    again = any(r.get("dev_bleu_again") != "" for r in rows)
    return md_table(["transform", "lr", "warmup", "label smoothing", "dev BLEU", "best step",
                     "selected"] + (["dev BLEU, trained again"] if again else []),
                    [[r["transform"], f"{r['lr']:g}", r["warmup"], f"{r['label_smoothing']:g}",
                      fmt(r["dev_bleu"]), r["best_step"], "**yes**" if r["selected"] else ""]
                     + ([fmt(r["dev_bleu_again"]) if r["dev_bleu_again"] != "" else ""]
                        if again else [])
                     for r in rows])


def _bleu_table(summary: list[dict], sig: list[dict], base: str) -> str:
    against = [r for r in sig if r["baseline"] == base]
    joined = {(r["comparison"], r["transform"]): r for r in against if r["seeds"] == "joined"}
    single = {(r["comparison"], r["transform"]): r for r in against}
    lines = []
    for r in summary:
        test = joined.get((r["comparison"], r["transform"])) or single.get(
            (r["comparison"], r["transform"]))
        std = "" if r["std"] is None else f" ± {r['std']:.2f}"
        versus = "baseline" if test is None else delta_text(test)
        lines.append([COMPARISONS[r["comparison"]], r["transform"], r["steps"],
                      f"{r['mean']:.2f}{std}", r["per_seed"], versus])
    return md_table(["comparison", "transform", "steps (per seed)", "test BLEU mean ± std",
                     "per seed", "Δ vs baseline [95% CI], p"], lines)


def _equal_time(config: Config, out: Path, ms_per_step: dict[str, float],
                todo: list[Evaluation]) -> Section:
    """The quiet step times, the budget and the step each transform reaches in it."""
    if not ms_per_step:
        return Section("Equal time", BENCH, "No step times (the bench stage has not run).")
    base, budget = config.study.baseline, equal_time_budget_ms(config, ms_per_step) / 60e3
    steps = {run.name: step for c, run, step in todo if c == "equal_time"}
    frame = pd.read_csv(out / BENCH) if (out / BENCH).is_file() else pd.DataFrame()
    where = (" on " + " and ".join(dict.fromkeys(frame["machine"].dropna().astype(str)))
             if "machine" in frame and frame["machine"].notna().any() else "")
    paired = (dict(zip(frame["transform"], frame["time_ratio"]))
              if {"transform", "time_ratio"} <= set(frame.columns) else {})
    rows = [[name, f"{ms:,.0f}", f"{ms / ms_per_step[base]:.3f}×" if base in ms_per_step
             else "", f"{paired[name]:.3f}×" if name in paired else "",
             f"{steps[name]:,}" if name in steps else ""]
            for name, ms in ms_per_step.items()]
    return Section("Equal time", BENCH, md_table(
        ["transform", "ms per step", f"× {base}", f"paired × {base}", "step at equal time"],
        rows), [
        f"Quiet training step times (`arelu bench train`{where}, each transform timed "
        f"alternately with {base}, at its selected label smoothing). Other processes kept up "
        f"to {frame['other_cpu'].max():.2f} CPU cores busy while they were measured.",
        f"Equal time uses the median step times (× {base}); the paired column is the median "
        f"ratio to the {base} step timed beside each one ({base} itself against itself), "
        "which the machine's noise hits alike.",
        f"Equal time is {budget:.1f} minutes of quiet training"
        + ("" if config.study.equal_time_minutes else
           f" (the time the fastest transform needs for {config.train.max_steps:,} steps)")
        + f"; each transform is evaluated at the last kept snapshot (every "
        f"{config.train.keep_every} steps) it reaches in it."])


def machines_sentence(runs: list[Run]) -> str:
    """Which machines trained the runs (``summary.json``'s ``machine``), and how many runs
    each; a study resumed over several sittings may span machines, whose wall times differ
    while the step-budgeted results do not."""
    counts: dict[str, int] = {}
    for run in runs:
        name = run_dir.read_summary(run.folder).get("machine") \
            if run_dir.finished(run.folder) else None
        key = name or "a machine its summary does not name"
        counts[key] = counts.get(key, 0) + 1
    if not counts:
        return ""
    parts = [f"{name} ({n} run{'s' if n > 1 else ''})" for name, n in counts.items()]
    return (" The seed and convergence runs trained on " + "; ".join(parts) + " (wall times "
            "differ between machines, step-budgeted results do not, up to float rounding).")


def _plan(config: Config, out: Path) -> tuple[dict[str, Point], dict[str, float],
                                             list[Evaluation]]:
    """The selection (``selected.json``), the quiet step times (``bench_train.csv``) and every
    test translation the tables need."""
    selected = read_selection(out)
    lacking = [name for name in config.sweep.transforms if name not in selected]
    if lacking:
        raise UserError(f"{out} has no selection of {', '.join(lacking)} in selected.json yet, so "
                        "there is no study to report; run arelu study to sweep it")
    ms_per_step = step_times(config, out, selected)
    seeds, longer = seed_runs(config, out, selected), convergence_runs(config, out, selected)
    steps = equal_time_steps(config, ms_per_step) if ms_per_step else {}
    return selected, ms_per_step, evaluations(config, seeds, longer, steps)


def tables(config: Config, out: Path) -> Tables:
    """Every table of the study, each input read and checked first."""
    selected, _, todo = _plan(config, out)
    refs = references(config.data.path)
    bleu = bleu_rows(config, out, todo, refs)
    found = [("sweep.csv", sweep_rows(config, out, selected), plot_study_sweep),
             ("test_bleu.csv", bleu, None), ("test_bleu_summary.csv", summary_rows(bleu), None),
             ("significance.csv", significance_rows(config, todo, refs), None),
             ("dev_curves.csv", curve_rows(list(dict.fromkeys(e.run for e in todo))),
              plot_study_curves)]
    return Tables([Table(name, rows, tuple(CATALOG[name]), figure)
                   for name, rows, figure in found])


def claims(config: Config, out: Path, tables: Tables) -> list[Section]:
    summary, sig = tables.rows("test_bleu_summary.csv"), tables.rows("significance.csv")
    return [Section("Answer", "significance.csv",
                    verdicts=answer(config, summary, sig) or ["No test translations yet."])]


def document(config: Config, out: Path, tables: Tables, claims: list[Section]) -> str:
    """``REPORT.md``: the setup, the answer, equal time, the sweep, the test BLEU."""
    _, ms_per_step, todo = _plan(config, out)
    summary, sig = tables.rows("test_bleu_summary.csv"), tables.rows("significance.csv")
    seeds = ", ".join(map(str, config.study.seeds))
    intro = (f"Step-budgeted runs ({config.train.max_steps} optimizer steps, convergence "
             f"{config.study.convergence_steps}), test BLEU with beam {config.decode.beam} "
             f"(sacrebleu, detokenized, cased), seeds {seeds}; paired bootstrap "
             f"({config.study.bootstrap_samples} resamples) against {config.study.baseline}. "
             "Δ is the test BLEU difference with its 95% interval; better or worse where the "
             "interval excludes 0, else inconclusive."
             + machines_sentence(list(dict.fromkeys(e.run for e in todo))))
    sections = [
        *claims,
        _equal_time(config, out, ms_per_step, todo),
        Section("Sweep (dev BLEU only)", "sweep.csv", _sweep_table(tables.rows("sweep.csv")),
                figure="sweep.png"),
        Section("Test BLEU", "test_bleu_summary.csv", _bleu_table(summary, sig,
                                                                  config.study.baseline)),
        Section("Dev BLEU during training", "dev_curves.csv", figure="dev_curves.png")]
    return page("Study report", intro, sections, out, [
        "## Files", "sweep.csv, test_bleu.csv, test_bleu_summary.csv, significance.csv (every "
        "pair, seed by seed and joined), dev_curves.csv, bench_train.csv, selected.json; "
        "runs/TRANSFORM/CONFIG[_seed-S]/ and convergence/TRANSFORM/CONFIG/ (config.json, "
        "log.csv, summary.json, translations/)."])
