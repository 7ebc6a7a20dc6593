"""The tables and ``REPORT.md`` of the language-model study (issue 35): softmax, 1.5-entmax,
sparsemax and 1.5-ReLU language models, each at its dev-selected learning rate and several
seeds, every model x decoding measured by ``arelu lm-eval``
(:mod:`arelu_cli.analysis.lm_eval`). It answers the paper's open question (its conclusion):
does pure alpha-ReLU sampling give text as non-degenerate as softmax with nucleus sampling,
at a perplexity-like cost no worse than entmax sampling, and how fast per token?

Read from the study folder ``OUT`` (everything recomputable from committed files):
``selected.json``; ``runs/NAME/POINT/`` (the lr sweep: ``config.json``, ``log.csv``,
``summary.json`` whose ``best_bleu`` is minus the best dev loss, also written as
``best_dev_loss`` by newer runs); ``seeds/NAME/seed-S/``
(``config.json``, ``log.csv``, ``summary.json``, ``lm_eval/DECODING.csv`` -- one row of
:data:`~arelu_cli.analysis.lm_eval.COLUMNS` --, ``generations/DECODING.tokens.json``);
``human.tokens.json``; optionally ``bench_generate.csv`` (quiet ms per token of ``arelu bench
lm-study``, :mod:`arelu_cli.pipeline.lm_bench`: its rows at the smallest batch size, several
rows of one transform x decoding giving their median).

Written (atomically, every input checked first): ``lm_eval.csv`` (every row, with its
``run``), ``summary.csv`` (per transform x decoding, mean and sample std over seeds),
``significance.csv`` (:func:`significance_rows`), ``sweep.csv``, ``dev_curves.csv``, the
figures ``summary.png`` and ``dev_curves.png`` (:func:`~arelu_cli.report.plots.plot_lm_summary`,
:func:`~arelu_cli.report.plots.plot_lm_curves`) and ``REPORT.md`` with the verdicts of
:mod:`arelu_cli.pipeline.lm_claims`.

The paired bootstrap is over test prompts, sacrebleu's draw
(:func:`arelu_cli.analysis.significance.bootstrap_chunks`), the same indices for every
system and for the human continuations: a system's statistic on a resample is the mean over
its seeds of each seed's pooled statistic on the drawn prompts (a cluster bootstrap: a drawn
prompt brings every seed's continuation of it), and its distance to human (``*_gap``) the
mean over seeds of ``|statistic - human statistic|`` on the same draw, as ``lm-eval``'s
``*_gap`` columns are per seed. The p-value is sacrebleu's ``--paired-bs``
(:func:`~arelu_cli.analysis.significance.p_value`, which centres the resampled differences);
the 95% interval is its percentile interval
(:func:`~arelu_cli.analysis.significance.interval95`) of the resampled differences shifted
by the bootstrap's bias estimate (``delta_bias``: their mean less the observed difference).
The shift matters for the pooled statistics: a resample that draws a prompt twice counts its
n-grams twice but its distinct n-grams once, so resampled distinct-n is lower than the
observed, the more so the more distinct a system's text, and a plain percentile interval of
a repetitive system's difference can miss the observed difference altogether.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from arelu_cli.analysis import lm_metrics as M
from arelu_cli.analysis.lm_eval import COLUMNS as EVAL_COLUMNS
from arelu_cli.analysis.significance import (RESAMPLES, SEED, bootstrap_chunks, interval95,
                                             p_value)
from arelu_cli.util.errors import UserError
from arelu_cli.util.ownership import check_ours, png_ours, write_markdown
from arelu_cli.train import run_dir
from arelu_cli.train.run_dir import finished
from arelu_cli.pipeline.lm_claims import HUMAN, TARGETS, UNKNOWN, corpus_of, report_text
from arelu_cli.pipeline.scoring import again, summary
from arelu_cli.registry import get_transform
from arelu_cli.report.plots import lm_summary_points, plot_lm_curves, plot_lm_summary
from arelu_cli.report.seeds import spread
from arelu_cli.util.results import read_json, read_table, write_tables
from arelu_cli.util.signatures import signature

SELECTED, BENCH, TAU_SWEEP = "selected.json", "bench_generate.csv", "tau_sweep.csv"
STATS = ("distinct_2", "loop", "zipf")
"""The generation statistics tested, each also as its distance to human (``<name>_gap``)."""
SUMMARY_METRICS = ("eps_ppl", "ppl", "sp", "jsd", "rep_32", "wrep_32", "distinct_1",
                   "distinct_2", "distinct_2_gap", "loop", "loop_gap", "zipf", "zipf_gap",
                   "self_bleu", "length")
SUMMARY_COLUMNS = ("transform", "label", "decoding", "n", "seeds", "missing_seeds", "eps",
                   *(f"{m}_{s}" for m in SUMMARY_METRICS for s in ("mean", "std")),
                   "gen_tokens_per_s", "gen_machine", "ms_per_token", "bench_batch")
SIG_COLUMNS = ("transform", "label", "decoding", "baseline", "reference", "statistic",
               "seeds", "baseline_seeds", "prompts", "value", "baseline_value", "human",
               "delta", "delta_low", "delta_high", "delta_bias", "p_value", "samples",
               "bootstrap_seed", "signature")
SWEEP_COLUMNS = ("transform", "label", "run", "lr", "warmup", "label_smoothing", "steps",
                 "best_step", "dev_loss", "dev_ppl", "selected")
CURVE_COLUMNS = ("transform", "seed", "run", "step", "val_loss", "val_ppl")
TOLERANCE = 1e-9
"""How far a statistic recomputed from ``*.tokens.json`` may lie from its ``lm-eval`` row."""


def label(name: str) -> str:
    """A readable name of a registry name: ``2-entmax-k100`` -> ``sparsemax``,
    ``1.5-entmax-k100`` -> ``1.5-entmax``, ``1.5-relu`` -> ``1.5-ReLU``; others as given."""
    try:
        t = get_transform(name)
    except ValueError:
        return name
    if t.family == "entmax":
        return "sparsemax" if t.alpha == 2 else f"{t.alpha:g}-entmax"
    return f"{t.alpha:g}-ReLU" if t.family == "relu" else t.name


@dataclass(frozen=True)
class SeedRun:
    """One compared run, ``seeds/NAME/seed-S/``."""

    transform: str
    seed: int
    folder: Path

    def eval_path(self, decoding: str) -> Path:
        return self.folder / "lm_eval" / f"{decoding}.csv"

    def decodings(self) -> list[str]:
        return sorted(p.stem for p in (self.folder / "lm_eval").glob("*.csv"))


def _measure_again(path: Path) -> str:
    return (f"restore it, or delete {path} and the run's generations/{Path(path).stem}.* "
            "to evaluate again")


def seed_runs(out: Path) -> list[SeedRun]:
    """Every ``seeds/NAME/seed-S/`` folder, by transform then seed."""
    runs = []
    for folder in sorted((out / "seeds").glob("*/seed-*")):
        seed = folder.name.removeprefix("seed-")
        if not seed.isdigit():
            raise UserError(f"{folder} is not a seed folder (seed-S, S a whole number); move "
                            "it out of the study folder")
        runs.append(SeedRun(folder.parent.name, int(seed), folder))
    return sorted(runs, key=lambda r: (r.transform, r.seed))


def read_eval(run: SeedRun, decoding: str, out: Path) -> dict:
    """The one ``lm-eval`` row of ``run`` x ``decoding``, with its ``run`` (relative to
    ``out``); a file of other columns, rows or run is refused in one line."""
    path = run.eval_path(decoding)
    frame = read_table(path, _measure_again(path))
    if list(frame.columns) != list(EVAL_COLUMNS) or len(frame) != 1:
        raise UserError(f"{path} is not one arelu lm-eval row ({len(frame)} rows, columns "
                        f"{','.join(map(str, frame.columns))[:60]!r}); {_measure_again(path)}")
    row = frame.iloc[0].to_dict()
    found = (str(row["transform"]), str(row["decoding"]), row["seed"])
    if found[:2] != (run.transform, decoding) or pd.isna(found[2]) or int(found[2]) != run.seed:
        raise UserError(f"{path} holds {found[0]} x {found[1]} at seed {found[2]}, not "
                        f"{run.transform} x {decoding} at seed {run.seed}; "
                        f"{_measure_again(path)}")
    return {"run": str(run.folder.relative_to(out)), **row}


def read_tokens(path: Path, prompts: int | None, remedy: str) -> list[list[int]]:
    """``{"tokens": [[id, ...], ...]}``: one list of token ids per prompt (``prompts`` of them
    when given)."""
    tokens = read_json(path, remedy).get("tokens")
    if not isinstance(tokens, list) or not all(
            isinstance(t, list) and all(isinstance(i, int) for i in t) for t in tokens):
        raise UserError(f"{path} has no \"tokens\": a list of token-id lists; {remedy}")
    if not tokens:
        raise UserError(f"{path} holds no continuation; {remedy}")
    if prompts is not None and len(tokens) != prompts:
        raise UserError(f"{path} has {len(tokens)} continuations but {HUMAN} has {prompts} "
                        f"prompts; {remedy}")
    return tokens


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


def _gen_rate(run: SeedRun, decoding: str) -> tuple[float | None, str | None]:
    """The generation record's tokens/s (taken while the study ran, not quietly) and the
    machine that took it: the record's own ``machine``, else, for a record written before
    records named it, the ``machine`` of the run's ``summary.json`` (the study evaluates a
    model in the process that just trained it)."""
    path = run.folder / "generations" / f"{decoding}.txt.json"
    if not path.is_file():
        return None, None
    record = read_json(path, _measure_again(run.eval_path(decoding)))
    rate, where = record.get("tokens_per_s"), record.get("machine")
    if where is None and finished(run.folder):
        where = summary(run.folder).get("machine")
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
    batch size, ``bench_batch``)."""
    rows, frame = [], pd.DataFrame(evals, columns=["run", *EVAL_COLUMNS])
    for (name, decoding), part in frame.groupby(["transform", "decoding"], sort=False):
        found = sorted(int(s) for s in part["seed"])
        row = {"transform": name, "label": label(name), "decoding": decoding, "n": len(found),
               "seeds": " / ".join(map(str, found)),
               "missing_seeds": " / ".join(str(s) for s in seeds if s not in found),
               "eps": eps_text(part.sort_values("seed")["eps"])}
        for metric in SUMMARY_METRICS:
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


def selected_shift(folder: Path) -> float:
    """The tau shift of the lowest dev epsilon-perplexity in ``folder``'s ``tau_sweep.csv``
    (the smallest shift in size on ties)."""
    path = folder / TAU_SWEEP
    frame = read_table(path, again(folder))
    if frame.empty or not {"tau_shift", "dev_eps_ppl"} <= set(frame.columns):
        raise UserError(f"{path} holds no tau sweep; {again(folder)}")
    best = min(frame.itertuples(), key=lambda r: (r.dev_eps_ppl, abs(r.tau_shift)))
    return float(best.tau_shift)


def tau_shifts(runs: list[SeedRun]) -> dict[str, float]:
    """Per alpha-ReLU model, the tau shift its sweep on dev selected (``tau_sweep.csv`` of
    its lowest seed that has one: the study sweeps on its first seed only)."""
    found: dict[str, float] = {}
    for run in sorted(runs, key=lambda r: r.seed):
        if run.transform not in found and (run.folder / TAU_SWEEP).is_file():
            found[run.transform] = selected_shift(run.folder)
    return found


def eps_text(values: pd.Series) -> str:
    """The epsilons of some seeds' rows: ``1e-05`` when they agree, ``1e-05 / 0.001`` when
    not (in the rows' order), empty when none is known."""
    known = [f"{float(v):g}" for v in values if not pd.isna(v)]
    return known[0] if len(set(known)) == 1 else " / ".join(known)


@dataclass(frozen=True)
class Measured:
    """One seed's statistics of :data:`STATS` on all prompts and on every resample."""

    point: dict[str, float]
    resampled: dict[str, np.ndarray]


def measure(texts: list[list[int]], counts: torch.Tensor) -> Measured:
    """:data:`STATS` of ``texts`` by :mod:`~arelu_cli.analysis.lm_metrics`: pooled on all
    prompts (as ``lm-eval`` computes them) and on each resample of ``counts (R, N)``."""
    point = {"distinct_2": M.distinct_n(texts, 2),
             "loop": sum(M.loops(t) for t in texts) / len(texts),
             "zipf": M.zipf_coefficient(texts)}
    resampled = {"distinct_2": M.resampled_distinct_n(texts, 2, counts),
                 "loop": M.resampled_mean([float(M.loops(t)) for t in texts], counts),
                 "zipf": M.resampled_zipf(texts, counts)}
    return Measured(point, {k: v.numpy() for k, v in resampled.items()})


def _check_against_row(measured: Measured, row: dict, path: Path, remedy: str,
                       prefix: str = "") -> None:
    """``measured`` on all prompts must be the row's ``<prefix><statistic>``."""
    for stat in STATS:
        got, expected = measured.point[stat], float(row[prefix + stat])
        if not (math.isnan(got) and math.isnan(expected)) and not abs(got - expected) \
                <= TOLERANCE:
            raise UserError(f"{path} gives {stat} {got:.6g} but its lm-eval row says "
                            f"{expected:.6g} (one of them is stale); {remedy}")


@dataclass(frozen=True)
class Side:
    """A system's value of one statistic, on all prompts and per resample, over its seeds."""

    name: str
    decoding: str
    seeds: str
    """Its seeds joined, ``1+2+3``."""
    value: float
    values: np.ndarray


def sides(name: str, decoding: str, seeds: dict[int, Measured], human: Measured
          ) -> dict[str, Side]:
    """Per statistic and ``<statistic>_gap``: the mean over seeds on all prompts and per
    resample (module docstring)."""
    found, joined, each = {}, "+".join(map(str, sorted(seeds))), list(seeds.values())
    for stat in STATS:
        found[stat] = Side(name, decoding, joined, statistics.fmean(m.point[stat] for m in each),
                           np.mean([m.resampled[stat] for m in each], axis=0))
        found[f"{stat}_gap"] = Side(
            name, decoding, joined,
            statistics.fmean(abs(m.point[stat] - human.point[stat]) for m in each),
            np.mean([np.abs(m.resampled[stat] - human.resampled[stat]) for m in each], axis=0))
    return found


def resample_counts(prompts: int, samples: int) -> torch.Tensor:
    """``(samples, prompts)``: how often each prompt is drawn in each resample."""
    index = np.concatenate(list(bootstrap_chunks(prompts, samples, SEED)))
    offsets = index + prompts * np.arange(len(index))[:, None]
    return torch.from_numpy(np.bincount(offsets.ravel(), minlength=index.size)
                            .reshape(len(index), prompts))


def significance_rows(out: Path, runs: list[SeedRun], evals: list[dict], baseline: str,
                      reference: str, samples: int = RESAMPLES) -> list[dict]:
    """Each transform x decoding against ``baseline`` x ``reference`` on every statistic of
    :data:`STATS` and its gap to human (module docstring); none while the reference or
    ``human.tokens.json`` is missing. Point estimates are recomputed from the token ids
    and must equal the ``lm-eval`` rows'."""
    if not any(e["transform"] == baseline and e["decoding"] == reference for e in evals) or \
            not (out / HUMAN).is_file():
        return []
    again_human = "restore it, or delete it to write it again"
    human_tokens = read_tokens(out / HUMAN, None, again_human)
    counts = resample_counts(len(human_tokens), samples)
    human = measure(human_tokens, counts)
    for e in evals:
        _check_against_row(human, e, out / HUMAN, again_human, prefix="human_")
    by_run = {(r.transform, r.seed): r for r in runs}
    systems: dict[tuple[str, str], dict[int, Measured]] = {}
    for e in evals:
        run = by_run[e["transform"], int(e["seed"])]
        path = run.folder / "generations" / f"{e['decoding']}.tokens.json"
        remedy = _measure_again(run.eval_path(e["decoding"]))
        measured = measure(read_tokens(path, len(human_tokens), remedy), counts)
        _check_against_row(measured, e, path, remedy)
        systems.setdefault((e["transform"], e["decoding"]), {})[run.seed] = measured
    ref = sides(baseline, reference, systems[baseline, reference], human)
    return [_test_row(side, ref[stat], stat, human.point[stat.removesuffix("_gap")],
                      len(human_tokens), samples)
            for (name, decoding), seeds in systems.items()
            for stat, side in sides(name, decoding, seeds, human).items()]


def _test_row(side: Side, ref: Side, stat: str, human: float, prompts: int,
              samples: int) -> dict:
    delta, diffs = side.value - ref.value, side.values - ref.values
    finite = bool(np.isfinite(diffs).all()) and np.isfinite(delta)
    bias = float(diffs.mean() - delta) if finite else None
    low, high = interval95(diffs - bias) if finite else (None, None)
    return {"transform": side.name, "label": label(side.name), "decoding": side.decoding,
            "baseline": ref.name, "reference": ref.decoding, "statistic": stat,
            "seeds": side.seeds, "baseline_seeds": ref.seeds, "prompts": prompts,
            "value": side.value, "baseline_value": ref.value, "human": human,
            "delta": delta, "delta_low": low, "delta_high": high, "delta_bias": bias,
            "p_value": p_value(side.values, ref.values, delta) if finite else None,
            "samples": samples, "bootstrap_seed": SEED,
            "signature": signature(statistic=stat, unit="prompt", prompts=prompts,
                                   seeds=side.seeds, baseline=f"{ref.name}:{ref.decoding}",
                                   baseline_seeds=ref.seeds, bs=samples, bs_seed=SEED)}


def sweep_rows(out: Path, selected: dict) -> list[dict]:
    """Every lr point of ``runs/NAME/POINT/``: its best dev loss (minus the summary's
    ``best_bleu``), dev perplexity at that step where logged, and whether it was selected;
    a point still training has no dev loss yet."""
    rows = []
    for folder in sorted(p for p in (out / "runs").glob("*/*") if p.is_dir()):
        name, train = folder.parent.name, run_dir.require_config(folder).get("train", {})
        info = summary(folder) if finished(folder) else {}
        best = info.get("best_step")
        log = run_dir.read_log(folder) if best is not None else None
        ppl = (log.loc[log["step"] == best, "val_ppl"].dropna()
               if log is not None and "val_ppl" in log else pd.Series(dtype=float))
        rows.append({"transform": name, "label": label(name), "run": folder.name,
                     "lr": train.get("lr"), "warmup": train.get("warmup"),
                     "label_smoothing": train.get("label_smoothing"),
                     "steps": info.get("steps"), "best_step": best,
                     "dev_loss": -info["best_bleu"] if info.get("best_bleu") is not None
                     else None, "dev_ppl": float(ppl.iloc[-1]) if len(ppl) else None,
                     "selected": selected.get(name, {}).get("run") == folder.name})
    return rows


def curve_rows(out: Path, runs: list[SeedRun]) -> list[dict]:
    """Dev loss (and perplexity) at every validation of every seed run that has a log."""
    rows = []
    for run in runs:
        if not run_dir.has_log(run.folder):
            continue
        log = run_dir.read_log(run.folder)
        for record in log.dropna(subset=["val_loss"]).to_dict("records"):
            ppl = record.get("val_ppl")
            rows.append({"transform": run.transform, "seed": run.seed,
                         "run": str(run.folder.relative_to(out)), "step": int(record["step"]),
                         "val_loss": record["val_loss"],
                         "val_ppl": None if ppl is None or pd.isna(ppl) else ppl})
    return rows


def _values(found: list) -> str:
    return " / ".join(f"{v:g}" if isinstance(v, float) else str(v)
                      for v in dict.fromkeys(found))


def setup_lines(runs: list[SeedRun], selected: dict) -> list[str]:
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
        chosen.setdefault(run.transform, []).append(
            f"lr {t.get('lr'):g}, warmup {t.get('warmup')}, label smoothing "
            f"{t.get('label_smoothing'):g}")
    lines.append("Selected on dev loss: " + "; ".join(
        f"{label(name)} (`{name}`) {_values(found)}" for name, found in chosen.items()) + ".")
    lines.append("Seeds: " + "; ".join(
        f"{label(name)} {', '.join(str(r.seed) for r in runs if r.transform == name)}"
        for name in chosen) + ".")
    return lines


def sweep_size(out: Path, name: str) -> int | None:
    """How many points ``runs/NAME/`` sweeps: the product of the grid's lengths as the
    ``[sweep]`` of its first point's ``config.json`` records them (None: none recorded)."""
    for folder in sorted(p for p in (out / "runs" / name).glob("*") if p.is_dir()):
        grid = run_dir.require_config(folder).get("sweep") or {}
        if not grid.get("lr"):
            return None
        return math.prod(max(1, len(grid.get(key) or [])) for key in
                         ("lr", "warmup", "label_smoothing"))
    return None


def missing_lines(runs: list[SeedRun], evals: list[dict], selected: dict,
                  seeds: list[int], baseline: str, reference: str,
                  sweep: list[dict] = (), out: Path | None = None) -> list[str]:
    """What the study has not made yet: a transform still in its lr sweep (``sweep`` rows,
    nothing selected and no seed run yet), runs not trained or training, decodings not
    evaluated (per transform, those another of its seeds has; the baseline's also the
    reference)."""
    sweeping = [row["transform"] for row in sweep]
    names = list(dict.fromkeys([*selected, *(r.transform for r in runs), *sweeping]))
    have = {(e["transform"], int(e["seed"]), e["decoding"]) for e in evals}
    by_run = {(r.transform, r.seed): r for r in runs}
    lines = []
    for name in names:
        if name not in selected and not any(r.transform == name for r in runs):
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


def report_settings(out: Path) -> dict | None:
    """:func:`write_report`'s settings for the study folder ``out`` as its seed runs'
    ``config.json`` records them (``[lm_study]`` baseline, reference, bootstrap samples and
    transforms, ``[study] seeds``), so that ``arelu report`` rewrites a committed study's
    report from its files alone; None where ``out`` is no language-model study (no
    ``human.tokens.json``)."""
    if not (Path(out) / HUMAN).is_file():
        return None
    for run in seed_runs(Path(out)):
        config = run_dir.read_config(run.folder)
        if config is not None:
            s, seeds = config.get("lm_study") or {}, (config.get("study") or {}).get("seeds")
            return {"baseline": s.get("baseline", "softmax"),
                    "reference": s.get("reference", "sample-top_p0.9"),
                    "samples": s.get("bootstrap_samples", RESAMPLES),
                    "seeds": list(seeds) if seeds else None,
                    "transforms": list(s["transforms"]) if s.get("transforms") else None}
    return {}


def write_report(out: Path, *, baseline: str = "softmax", reference: str = "sample-top_p0.9",
                 samples: int = RESAMPLES, seeds: list[int] | None = None,
                 target_ppl: tuple[float, str] | None = None,
                 transforms: list[str] | None = None) -> Path:
    """Every CSV and figure of the study folder ``out`` and ``REPORT.md`` (module docstring);
    returns the report's path. ``seeds``: the seeds the study trains (missing ones are
    reported); None: those found. ``target_ppl``: (test perplexity, its source) the softmax
    model is held to; None: its corpus's (:data:`~arelu_cli.pipeline.lm_claims.TARGETS`), if
    any. ``transforms``: the study's ``[lm_study] transforms`` (None: unknown), so that the
    report tells a question the study does not ask from one not measured yet."""
    out = Path(out)
    # every input read and checked before any output is written
    selected = read_json(out / SELECTED, "restore it, or delete the study's runs/ to sweep "
                         "again") if (out / SELECTED).is_file() else {}
    runs = seed_runs(out)
    evals = [read_eval(run, d, out) for run in runs for d in run.decodings()]
    rates = {(r.transform, d, r.seed): _gen_rate(r, d) for r in runs for d in r.decodings()}
    seeds = sorted(seeds if seeds is not None else {r.seed for r in runs})
    bench = _bench(out)
    summary_table = summary_rows(evals, seeds, bench, rates)
    sig = significance_rows(out, runs, evals, baseline, reference, samples)
    sweep, curves = sweep_rows(out, selected), curve_rows(out, runs)
    setup = setup_lines(runs, selected)
    lacking = missing_lines(runs, evals, selected, seeds, baseline, reference, sweep, out)
    corpus = corpus_of([row.get("signature") for row in evals])
    target = target_ppl or TARGETS.get(corpus or "")
    plotted = {"summary.csv": (plot_lm_summary, bool(summary_table) and not lm_summary_points(
                   pd.DataFrame(summary_table, columns=SUMMARY_COLUMNS)).empty),
               "dev_curves.csv": (plot_lm_curves, bool(curves))}
    pngs = {name: out / Path(name).with_suffix(".png") for name in plotted}
    for png in pngs.values():
        check_ours(png, png_ours)
    for name, (_, drawn) in plotted.items():
        if not drawn:  # a figure of nothing: an earlier one is stale
            pngs[name].unlink(missing_ok=True)
    figures = [pngs[name].name for name, (_, drawn) in plotted.items() if drawn]
    write_tables(out, [("lm_eval.csv", evals, ("run", *EVAL_COLUMNS)),
                       ("summary.csv", summary_table, SUMMARY_COLUMNS),
                       ("significance.csv", sig, SIG_COLUMNS), ("sweep.csv", sweep, SWEEP_COLUMNS),
                       ("dev_curves.csv", curves, CURVE_COLUMNS)],
                 {name: draw for name, (draw, drawn) in plotted.items() if drawn})
    text = report_text(out, summary_table, sig, sweep, setup, lacking, baseline=baseline,
                       reference=reference, samples=samples, target_ppl=target,
                       bench=bench is not None, shifts=tau_shifts(runs), corpus=corpus,
                       figures=figures,
                       planned=None if transforms is None else [label(t) for t in transforms])
    return write_markdown(out / "REPORT.md", text)
