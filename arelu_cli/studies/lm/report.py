"""The tables and ``REPORT.md`` of the language-model study: softmax, 1.5-entmax,
sparsemax and 1.5-ReLU language models, each at its dev-selected learning rate and several
seeds, every model x decoding measured by ``arelu lm-eval``
(:mod:`arelu_cli.analysis.lm_eval`). It answers the paper's open question (its conclusion):
does pure alpha-ReLU sampling give text as non-degenerate as softmax with nucleus sampling,
at a perplexity-like cost no worse than entmax sampling, and how fast per token?

Read from the study folder ``OUT`` (everything recomputable from committed files):
``selected.json``; ``runs/NAME/POINT/`` (the lr sweep: ``config.json``, ``log.csv``,
``summary.json``, whose best dev loss :func:`arelu_cli.train.run_dir.best_dev_loss` reads); ``seeds/NAME/seed-S/``
(``config.json``, ``log.csv``, ``summary.json``, ``lm_eval/DECODING.csv`` -- one row of
:data:`~arelu_cli.analysis.lm_eval.COLUMNS` --, ``generations/DECODING.tokens.json``);
``human.tokens.json``; optionally ``bench_generate.csv`` (quiet ms per token of ``arelu bench
lm-study``, :mod:`arelu_cli.studies.lm.bench`: its rows at the smallest batch size, several
rows of one transform x decoding giving their median).

Written (atomically, every input checked first): ``lm_eval.csv`` (every row, with its
``run``), ``summary.csv`` (per transform x decoding, mean and sample std over seeds),
``significance.csv`` (:func:`significance_rows`), ``sweep.csv``, ``dev_curves.csv``, the
figures ``summary.png`` and ``dev_curves.png`` (:func:`~arelu_cli.studies.plots.plot_lm_summary`,
:func:`~arelu_cli.studies.plots.plot_lm_curves`) and ``REPORT.md`` with the verdicts of
:mod:`arelu_cli.studies.lm.claims`.

The paired bootstrap over test prompts is :mod:`arelu_cli.studies.lm.bootstrap`; the runs
and files it reads, :mod:`arelu_cli.studies.lm.runs`. The report covers the recipe's
``[lm_study] transforms`` at its ``[study] seeds`` (the study's record names them); a folder
of ``seeds/`` of another transform or seed is left out, with a note. A metric is reported
over every seed of a transform x decoding or over none: a row that lacks it for one seed only
is refused in one line.
"""

from __future__ import annotations

import math
import statistics
from pathlib import Path

import pandas as pd

from arelu_cli.analysis.lm_eval import COLUMNS as EVAL_COLUMNS
from arelu_cli.config import Config
from arelu_cli.studies.contract import Table, Tables
from arelu_cli.studies.core import Run
from arelu_cli.studies.lm.bootstrap import SIG_COLUMNS, significance_rows
from arelu_cli.studies.lm.claims import TARGETS, UNKNOWN, report_text, verdicts
from arelu_cli.studies.lm.plots import lm_summary_points, plot_lm_curves, plot_lm_summary
from arelu_cli.studies.lm.runs import (BENCH, decodings, eval_path, label,
                                       measure_again, read_eval, seed_runs, tau_shifts)
from arelu_cli.studies.markdown import Section
from arelu_cli.studies.seeds import spread
from arelu_cli.studies.sweep import SELECTED
from arelu_cli.train import run_dir
from arelu_cli.train.run_dir import finished
from arelu_cli.util.errors import UserError
from arelu_cli.util.results import read_json, read_table

SUMMARY_METRICS = ("eps_ppl", "ppl", "sp", "jsd", "rep_32", "wrep_32", "distinct_1",
                   "distinct_2", "distinct_2_gap", "loop", "loop_gap", "zipf", "zipf_gap",
                   "self_bleu", "length")
SUMMARY_COLUMNS = ("transform", "label", "decoding", "n", "seeds", "missing_seeds", "eps",
                   *(f"{m}_{s}" for m in SUMMARY_METRICS for s in ("mean", "std")),
                   "gen_tokens_per_s", "gen_machine", "ms_per_token", "bench_batch")
SWEEP_COLUMNS = ("transform", "label", "run", "lr", "warmup", "label_smoothing", "steps",
                 "best_step", "dev_loss", "dev_ppl", "selected")
CURVE_COLUMNS = ("transform", "seed", "run", "step", "val_loss", "val_ppl")


def _bench(out: Path) -> pd.DataFrame | None:
    """``bench_generate.csv``'s rows at its smallest batch size (the report quotes one)."""
    path = out / BENCH
    if not path.is_file():
        return None
    remedy = f"delete it and measure again (arelu bench lm-study {out})"
    frame = read_table(path, remedy)
    lacking = {"transform", "decoding", "ms_per_token", "batch"} - set(frame.columns)
    if lacking:
        raise UserError(f"{path} lacks the column(s) {', '.join(sorted(lacking))}; {remedy}")
    return frame[frame["batch"] == frame["batch"].min()]


def _gen_rate(run: Run, decoding: str) -> tuple[float | None, str | None]:
    """The generation record's tokens/s (taken while the study ran, not quietly) and the
    machine that took it: the record's own ``machine``, else, for a record written before
    records named it, the ``machine`` of the run's ``summary.json`` (the study evaluates a
    model in the process that just trained it)."""
    path = run.folder / "generations" / f"{decoding}.txt.json"
    if not path.is_file():
        return None, None
    record = read_json(path, measure_again(eval_path(run, decoding)))
    rate, where = record.get("tokens_per_s"), record.get("machine")
    if where is None and finished(run.folder):
        where = run_dir.read_summary(run.folder).get("machine")
    return (float(rate) if isinstance(rate, (int, float)) else None,
            where if isinstance(where, str) else None)


def gen_speed(rates: list[tuple[float | None, str | None]]) -> tuple[float | None, str]:
    """The mean tokens/s of some generation records and their machines (``A / B``); no mean
    where the machines differ: tokens/s of different machines are not comparable."""
    known = [(rate, where or UNKNOWN) for rate, where in rates if rate is not None]
    machines = list(dict.fromkeys(where for _, where in known))
    mean = statistics.fmean(r for r, _ in known) if len(machines) == 1 else None
    return mean, " / ".join(machines)


def summary_rows(evals: list[dict], seeds: list[int], bench: pd.DataFrame | None,
                 rates: dict[tuple[str, str, int], tuple[float | None, str | None]]
                 ) -> list[dict]:
    """Per transform x decoding (order of appearance): mean and sample std over seeds of
    :data:`SUMMARY_METRICS`, the seeds found and missing, the epsilon of each seed's
    eps-perplexity (tuned on dev per model: one value where the seeds agree, else each in
    seed order), the generation records' mean tokens/s and their machines
    (:func:`gen_speed`) and the quiet ms per token of ``bench_generate.csv`` (its rows at one
    batch size, ``bench_batch``). A metric that some seeds have and others lack is refused:
    a mean over the others would pass for one over every seed."""
    rows, frame = [], pd.DataFrame(evals, columns=["run", *EVAL_COLUMNS])
    for (name, decoding), part in frame.groupby(["transform", "decoding"], sort=False):
        found = sorted(int(s) for s in part["seed"])
        row = {"transform": name, "label": label(name), "decoding": decoding, "n": len(found),
               "seeds": " / ".join(map(str, found)),
               "missing_seeds": " / ".join(str(s) for s in seeds if s not in found),
               "eps": eps_text(part.sort_values("seed")["eps"])}
        for metric in SUMMARY_METRICS:
            _check_every_seed(part, metric)
            values = spread(part, metric)
            row[f"{metric}_mean"], row[f"{metric}_std"] = values.mean, values.std
        row["gen_tokens_per_s"], row["gen_machine"] = gen_speed(
            [rates.get((name, decoding, s), (None, None)) for s in found])
        hit = (None if bench is None else bench.loc[(bench["transform"] == name)
                                                    & (bench["decoding"] == decoding),
                                                    "ms_per_token"].dropna())
        row["ms_per_token"] = float(hit.median()) if hit is not None and len(hit) else None
        row["bench_batch"] = int(bench["batch"].min()) if row["ms_per_token"] is not None \
            else None
        rows.append(row)
    return rows


def _check_every_seed(part: pd.DataFrame, metric: str) -> None:
    """Refuse a metric of a transform x decoding that some seeds' rows have and others not."""
    absent = part[part[metric].isna()]
    if 0 < len(absent) < len(part):
        row = absent.iloc[0]
        path = f"{row['run']}/lm_eval/{row['decoding']}.csv"
        have = ", ".join(str(int(s)) for s in sorted(part.loc[part[metric].notna(), "seed"]))
        raise UserError(f"{path}: {metric} is empty at seed {int(row['seed'])} but not at seed "
                        f"{have}, so no mean over the seeds is honest; {measure_again(path)}")


def eps_text(values: pd.Series) -> str:
    """The epsilons of some seeds' rows: ``1e-05`` when they agree, ``1e-05 / 0.001`` when
    not (in the rows' order), empty when none is known."""
    known = [f"{float(v):g}" for v in values if not pd.isna(v)]
    return known[0] if len(set(known)) == 1 else " / ".join(known)


def sweep_rows(out: Path, selected: dict) -> list[dict]:
    """Every lr point of ``runs/NAME/POINT/``: its best dev loss, dev perplexity at that step where logged, and whether it was selected;
    a point still training has no dev loss yet."""
    rows = []
    folders = [p for p in (out / "runs").glob("*/*") if p.is_dir()]
    for folder in sorted(folders, key=_by_lr):
        name, train = folder.parent.name, run_dir.require_config(folder).get("train", {})
        info = run_dir.read_summary(folder) if finished(folder) else {}
        best = info.get("best_step")
        log = run_dir.read_log(folder) if best is not None else None
        ppl = (log.loc[log["step"] == best, "val_ppl"].dropna()
               if log is not None and "val_ppl" in log else pd.Series(dtype=float))
        rows.append({"transform": name, "label": label(name), "run": folder.name,
                     "lr": train.get("lr"), "warmup": train.get("warmup"),
                     "label_smoothing": train.get("label_smoothing"),
                     "steps": info.get("steps"), "best_step": best,
                     "dev_loss": run_dir.best_dev_loss(info) if info else None,
                     "dev_ppl": float(ppl.iloc[-1]) if len(ppl) else None,
                     "selected": selected.get(name, {}).get("run") == folder.name})
    return rows


def _by_lr(folder: Path) -> tuple:
    """A sweep folder's place in its table: by transform, then by its configuration's
    numbers (``lr-3.2`` after ``lr-1.6``, as a name sort would not put ``lr-12.8``)."""
    train = run_dir.require_config(folder).get("train", {})
    return (folder.parent.name, *(float(train.get(k) or 0) for k in
                                  ("lr", "warmup", "label_smoothing")), folder.name)


def curve_rows(out: Path, runs: list[Run]) -> list[dict]:
    """Dev loss (and perplexity) at every validation of every seed run that has a log."""
    rows = []
    for run in runs:
        if not run_dir.has_log(run.folder):
            continue
        log = run_dir.read_log(run.folder)
        for record in log.dropna(subset=["val_loss"]).to_dict("records"):
            ppl = record.get("val_ppl")
            rows.append({"transform": run.name, "seed": run.seed,
                         "run": run.folder.relative_to(out).as_posix(),
                         "step": int(record["step"]),
                         "val_loss": record["val_loss"],
                         "val_ppl": None if ppl is None or pd.isna(ppl) else ppl})
    return rows


def _values(found: list) -> str:
    return " / ".join(f"{v:g}" if isinstance(v, float) else str(v)
                      for v in dict.fromkeys(found))


def setup_lines(runs: list[Run], selected: dict) -> list[str]:
    """The setup, from the compared runs' own ``config.json`` (never from the recipe)."""
    if not runs:
        return ["No compared run yet (seeds/ is empty)" + ("" if selected else
                "; the lr sweep has not selected yet") + "."]
    configs = {r: run_dir.require_config(r.folder) for r in runs}
    model = [c.get("model", {}) for c in configs.values()]
    data, train = ([c.get(k, {}) for c in configs.values()] for k in ("data", "train"))
    size = ", ".join(f"{key.replace('_', ' ')} {_values([m.get(key) for m in model])}"
                     for key in ("decoder_layers", "d_model", "heads", "d_ff", "dropout",
                                 "tie_output"))
    lines = [f"Model (the runs' config.json): {size}; blocks of "
             f"{_values([d.get('block_size') for d in data])} tokens, "
             f"{_values([d.get('max_tokens') for d in data])} tokens a step, "
             f"{_values([t.get('max_steps') for t in train])} optimizer steps."]
    chosen = {}
    for run, config in configs.items():
        t = config.get("train", {})
        chosen.setdefault(run.name, []).append(
            f"lr {t.get('lr'):g}, warmup {t.get('warmup')}, label smoothing "
            f"{t.get('label_smoothing'):g}")
    lines.append("Selected on dev loss: " + "; ".join(
        f"{label(name)} (`{name}`) {_values(found)}" for name, found in chosen.items()) + ".")
    lines.append("Seeds: " + "; ".join(
        f"{label(name)} {', '.join(str(r.seed) for r in runs if r.name == name)}"
        for name in chosen) + ".")
    return lines


def sweep_size(out: Path, name: str) -> str | None:
    """How many points ``runs/NAME/`` sweeps: the product of the grid's lengths as the
    ``[sweep]`` of its first point's ``config.json`` records them, "at least" that when the
    grid may extend (``[sweep] extend``); None: none recorded."""
    for folder in sorted(p for p in (out / "runs" / name).glob("*") if p.is_dir()):
        grid = run_dir.require_config(folder).get("sweep") or {}
        if not grid.get("lr"):
            return None
        size = math.prod(max(1, len(grid.get(key) or [])) for key in
                         ("lr", "warmup", "label_smoothing"))
        return f"at least {size}" if grid.get("extend") else str(size)
    return None


def missing_lines(runs: list[Run], evals: list[dict], selected: dict,
                  seeds: list[int], baseline: str, reference: str,
                  sweep: list[dict] = (), out: Path | None = None) -> list[str]:
    """What the study has not made yet: a transform still in its lr sweep (``sweep`` rows,
    nothing selected and no seed run yet), runs not trained or training, decodings not
    evaluated (per transform, those another of its seeds has; the baseline's also the
    reference)."""
    sweeping = [row["transform"] for row in sweep]
    names = list(dict.fromkeys([*selected, *(r.name for r in runs), *sweeping]))
    have = {(e["transform"], int(e["seed"]), e["decoding"]) for e in evals}
    by_run = {(r.name, r.seed): r for r in runs}
    lines = []
    for name in names:
        if name not in selected and not any(r.name == name for r in runs):
            done = sum(row["dev_loss"] is not None for row in sweep if row["transform"] == name)
            size = sweep_size(out, name) if out is not None else None
            lines.append(f"{label(name)} (`{name}`): lr sweep {done} of "
                         f"{size if size is not None else '?'} points finished, so no seed is "
                         f"trained yet (seeds {', '.join(str(s) for s in seeds) or '-'})")
            continue
        decodings = sorted({d for n, _, d in have if n == name}
                           | ({reference} if name == baseline else set()))
        for seed in seeds:
            run = by_run.get((name, seed))
            if run is None:
                lines.append(f"{label(name)} seed {seed}: not trained")
                continue
            lacking = [d for d in decodings if (name, seed, d) not in have]
            state = ([] if finished(run.folder) else ["still training"]) + (
                [f"not evaluated: {', '.join(lacking)}"] if lacking else [])
            if state:
                lines.append(f"{label(name)} seed {seed}: {'; '.join(state)}")
    return lines


def _settings(config: Config) -> dict:
    s = config.lm_study
    return {"baseline": s.baseline, "reference": s.reference, "samples": s.bootstrap_samples}


def corpus_of(runs: list[Run]) -> str | None:
    """The corpus of the compared runs (several joined by ``+``); None without runs."""
    names = sorted({run.corpus for run in runs})
    return "+".join(names) if names else None


def tables(config: Config, out: Path) -> Tables:
    """Every table of the study (module docstring), each input read and checked first."""
    s = _settings(config)
    selected = read_json(out / SELECTED, "restore it, or delete the study's runs/ to sweep "
                         "again") if (out / SELECTED).is_file() else {}
    runs, notes = seed_runs(config, out)
    evals = [read_eval(run, d, out) for run in runs for d in decodings(run)]
    rates = {(r.name, d, r.seed): _gen_rate(r, d) for r in runs for d in decodings(r)}
    summary = summary_rows(evals, sorted(config.study.seeds), _bench(out), rates)
    drawn = bool(summary) and not lm_summary_points(
        pd.DataFrame(summary, columns=SUMMARY_COLUMNS)).empty
    return Tables([
        Table("lm_eval.csv", evals, ("run", *EVAL_COLUMNS)),
        Table("summary.csv", summary, SUMMARY_COLUMNS, plot_lm_summary if drawn else None),
        Table("significance.csv", significance_rows(out, runs, evals, s["baseline"],
                                                    s["reference"], s["samples"]),
              SIG_COLUMNS),
        Table("sweep.csv", sweep_rows(out, selected), SWEEP_COLUMNS),
        Table("dev_curves.csv", curve_rows(out, runs), CURVE_COLUMNS, plot_lm_curves)], notes)


def claims(config: Config, out: Path, tables: Tables) -> list[Section]:
    runs, _ = seed_runs(config, out)
    corpus = corpus_of(runs)
    return [Section("Answer", "summary.csv, significance.csv", verdicts=verdicts(
        tables.rows("summary.csv"), tables.rows("significance.csv"),
        baseline=config.lm_study.baseline, reference=config.lm_study.reference,
        target_ppl=TARGETS.get(corpus or ""), bench=(out / BENCH).is_file(),
        shifts=tau_shifts(runs), corpus=corpus, planned=list(config.lm_study.transforms)))]


def document(config: Config, out: Path, tables: Tables, claims: list[Section]) -> str:
    """``REPORT.md``: setup, what is missing, the answer, then every table."""
    s = _settings(config)
    selected = read_json(out / SELECTED, "restore it") if (out / SELECTED).is_file() else {}
    runs, _ = seed_runs(config, out)
    summary, sweep = tables.rows("summary.csv"), tables.rows("sweep.csv")
    figures = [name for name in ("summary.png", "dev_curves.png") if (out / name).is_file()]
    return report_text(out, summary, tables.rows("significance.csv"), sweep,
                       setup_lines(runs, selected),
                       missing_lines(runs, tables.rows("lm_eval.csv"), selected,
                                     sorted(config.study.seeds), s["baseline"], s["reference"],
                                     sweep, out),
                       claims, notes=tables.notes, baseline=s["baseline"],
                       reference=s["reference"], samples=s["samples"],
                       corpus=corpus_of(runs), figures=figures)
