"""The conversion study's tables, read only from the files of its folder ``OUT``
(:mod:`~arelu_cli.studies.convert.stages` says where each comes from), every input checked
before anything is written:

* ``lm_eval.csv``: every lm-eval row, with its ``arm``, ``run``, ``step``, ``eval_seed`` (the
  fine-tuning seed; empty for step 0, the pretrained weights with the arm's transform,
  evaluated once for every seed) and ``folder``; LoRA's step 0 is its tau rule's, ``scratch``
  is the 1.5-ReLU reference at its last step, ``pretrained`` the pretrained model at the
  perplexity stride;
* ``summary.csv``: per arm x step x decoding, mean and sample std over seeds;
* ``ratios.csv``: pure sampling's epsilon-perplexity of an arm over another's
  (:data:`QUESTIONS`), each seed over the same seed (same batches and dropout draws), the
  mean over seeds with its 95% interval by the one bootstrap resampling the seeds
  (:func:`arelu_cli.analysis.significance.paired`; with three seeds it spans about their
  range); step 0 compares two fixed models and is exact, as are the same numbers on both
  sides (a grid that chose ``tau_for`` itself); one seed gives no interval;
* ``significance.csv``: at every step, each arm x decoding against the control's nucleus
  sampling at the same step (the scratch reference at the control's last step) on
  distinct-2, loop share and Zipf coefficient and their gaps to human text: the paired
  bootstrap over test prompts of :mod:`arelu_cli.studies.generations`;
* ``grid.csv`` (written by the stages): the tau grid's dev epsilon-perplexity.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from arelu_cli.analysis.lm_eval import COLUMNS as EVAL_COLUMNS
from arelu_cli.analysis.significance import SEED, bootstrap_chunks, paired
from arelu_cli.studies.contract import Table, Tables
from arelu_cli.studies.convert.evaluate import paths
from arelu_cli.studies.convert.layout import GRID, arm_runs, lora_rule, missing_lines
from arelu_cli.studies.convert.plots import plot_ratios
from arelu_cli.studies.convert.recipe import Recipe
from arelu_cli.studies.generations import (HUMAN, TEST_COLUMNS, Measured, bootstrap_row,
                                           check_against_row, measure, read_tokens,
                                           resample_counts, sides)
from arelu_cli.util.errors import UserError
from arelu_cli.util.results import read_table
from arelu_cli.util.signatures import signature

WITHIN = 0.02
"""A converted model "reaches" the control at an epsilon-perplexity at most this much higher."""
CONTROL, PURE, NUCLEUS = "softmax", "sample", "sample-top_p0.9"
SPARSE = ("relu-tau_for", "relu-tau_dev", "relu-analytic", "relu-lora", "entmax")
"""The converted arms, in the order the report answers for them."""
CONTROL_Q, RULE_Q, LORA_Q = "control", "tau rule", "LoRA"
QUESTIONS = {CONTROL_Q: 1 + WITHIN, RULE_Q: 1.0, LORA_Q: 1 + WITHIN}
"""Question -> the margin a ratio is tested against: every converted arm (and the scratch
reference) over the control; ``relu-tau_dev`` and ``relu-analytic`` over ``relu-tau_for``;
``relu-lora`` over the full fine-tune at its tau rule."""
METRICS = ("eps_ppl", "ppl", "sp", "jsd", "support_mean", "zero_share", "distinct_2", "loop",
           "zipf", "zipf_gap", "distinct_2_gap", "length", "dev_eps_ppl")
EVAL = ("arm", "run", "step", "eval_seed", "folder", *EVAL_COLUMNS)
SUMMARY = ("arm", "step", "decoding", "n", "seeds", "transform", "tau", "stride", "prompts",
           *(f"{m}_{s}" for m in METRICS for s in ("mean", "std")))
RATIOS = ("arm", "step", "baseline", "baseline_step", "question", "margin", "seeds", "value",
          "delta", "delta_low", "delta_high", "delta_bias", "p_value", "samples",
          "bootstrap_seed", "signature")
SIGNIFICANCE = ("arm", "step", "decoding", "baseline", "reference", *TEST_COLUMNS)
OUTPUTS = {"lm_eval.csv": "arm", "summary.csv": "arm", "ratios.csv": "arm",
           "significance.csv": "arm", GRID: "factor"}
"""The study's tables and the first column of each (what a file of ours starts with)."""


def _read_row(path: Path) -> dict:
    remedy = f"delete it and its generations/{path.stem}.* to evaluate again"
    frame = read_table(path, remedy)
    if list(frame.columns) != list(EVAL_COLUMNS) or len(frame) != 1:
        raise UserError(f"{path} is not one arelu lm-eval row ({len(frame)} rows, columns "
                        f"{','.join(map(str, frame.columns))[:60]!r}); {remedy}")
    return frame.iloc[0].to_dict()


def _steps(folder: Path) -> list[tuple[int, Path]]:
    found = [(p.name.removeprefix("step-"), p) for p in folder.glob("step-*") if p.is_dir()]
    return sorted((int(step), p) for step, p in found if step.isdigit())


def _seeds(folder: Path) -> list[tuple[int, Path]]:
    found = [(p.name.removeprefix("seed-"), p) for p in folder.glob("seed-*") if p.is_dir()]
    return sorted((int(seed), p) for seed, p in found if seed.isdigit())


def eval_rows(recipe: Recipe, out: Path) -> list[dict]:
    """Every evaluation of the study (module docstring), arm by arm in the recipe's order."""
    rows = []

    def add(arm: str, run: str, step: int, seed: int | None, folder: Path) -> None:
        for csv in sorted(folder.glob("*.csv")):
            rows.append({"arm": arm, "run": run, "step": step, "eval_seed": seed,
                         "folder": folder.relative_to(out).as_posix(), **_read_row(csv)})

    for arm, (run, start) in arm_runs(recipe, out).items():
        add(arm, start, 0, None, out / "runs" / start / "step-0" / "eval")
        for seed, folder in _seeds(out / "runs" / run):
            if seed in recipe.finetune.seeds:
                for step, evaluated in _steps(folder / "eval"):
                    add(arm, run, step, seed, evaluated)
    if recipe.reference.scratch:
        for seed, folder in _seeds(out / "runs" / "scratch"):
            for step, evaluated in _steps(folder / "eval"):
                add("scratch", "scratch", step, seed, evaluated)
    add("pretrained", "pretrain", 0, None, out / "pretrain" / "eval-ppl")
    return rows


def _seed(row: dict) -> int | None:
    return None if pd.isna(row["eval_seed"]) else int(row["eval_seed"])


def summary_rows(rows: list[dict]) -> list[dict]:
    """Per arm x step x decoding (the control, the converted arms, the scratch reference,
    the pretrained model; then by step and decoding): the seeds and the mean and sample std
    over them of :data:`METRICS`."""
    groups: dict[tuple, list[dict]] = {}
    for r in rows:
        groups.setdefault((r["arm"], r["step"], r["decoding"]), []).append(r)
    found = []
    for (arm, step, decoding), part in groups.items():
        seeds = [_seed(r) for r in part]
        row = {"arm": arm, "step": step, "decoding": decoding, "n": len(part),
               "seeds": " / ".join("-" if s is None else str(s) for s in seeds),
               "transform": part[0]["transform"], "tau": part[0]["tau"],
               "stride": part[0]["stride"], "prompts": part[0]["prompts"]}
        for metric in METRICS:
            values = pd.Series([r[metric] for r in part], dtype=float).dropna()
            row[f"{metric}_mean"] = float(values.mean()) if len(values) else None
            row[f"{metric}_std"] = float(values.std()) if len(values) > 1 else None
        found.append(row)
    return sorted(found, key=lambda r: (_order(r["arm"]), r["step"], r["decoding"]))


def _order(arm: str) -> int:
    known = (CONTROL, *SPARSE, "scratch", "pretrained")
    return known.index(arm) if arm in known else len(known)


def _pure(rows: list[dict], arm: str, step: int) -> dict[int | None, float]:
    return {_seed(r): float(r["eps_ppl"]) for r in rows
            if r["arm"] == arm and r["step"] == step and r["decoding"] == PURE}


def ratio_row(mine: dict[int | None, float], theirs: dict[int | None, float], margin: float,
              samples: int) -> dict | None:
    """The mean over paired seeds of ``mine[s] / theirs[s]`` against ``margin`` (module
    docstring); None where no seed pairs up."""
    seeds = sorted((s for s in mine if s in theirs), key=lambda s: -1 if s is None else s)
    if not seeds:
        return None
    ratios = np.array([mine[s] / theirs[s] for s in seeds])
    value = float(ratios.mean())
    joined = "+".join("-" if s is None else str(s) for s in seeds)
    row = {"seeds": joined, "value": value, "samples": samples, "bootstrap_seed": SEED,
           "signature": signature(statistic="eps_ppl_ratio", unit="seed", seeds=joined,
                                  margin=margin, bs=samples, bs_seed=SEED)}
    if seeds == [None] or all(mine[s] == theirs[s] for s in seeds):
        # two fixed models evaluated once, or the same numbers (a grid that chose tau_for
        # itself): exact
        delta = value - margin
        return row | {"delta": delta, "delta_low": delta, "delta_high": delta,
                      "delta_bias": 0.0, "p_value": None}
    if len(seeds) < 2:
        return row | {"delta": value - margin, "delta_low": None, "delta_high": None,
                      "delta_bias": None, "p_value": None}
    index = np.concatenate(list(bootstrap_chunks(len(seeds), samples, SEED)))
    resampled = ratios[index].mean(axis=1)
    return row | paired(resampled, np.full(len(resampled), margin), value, margin)


def comparisons(recipe: Recipe, out: Path) -> list[tuple[str, str, str]]:
    """(arm, baseline arm, question) of every ratio (:data:`QUESTIONS`)."""
    arms = arm_runs(recipe, out)
    found = [(arm, CONTROL, CONTROL_Q) for arm in SPARSE if arm in arms]
    found += [(arm, "relu-tau_for", RULE_Q) for arm in ("relu-tau_dev", "relu-analytic")
              if arm in arms and "relu-tau_for" in arms]
    rule = lora_rule(out)
    if "relu-lora" in arms and rule in arms:
        found.append(("relu-lora", rule, LORA_Q))
    return found


def ratio_rows(recipe: Recipe, out: Path, rows: list[dict]) -> list[dict]:
    """Every ratio of :func:`comparisons` at every step both arms have, and the scratch
    reference over the control at the control's last step (the same total steps)."""
    samples, found = recipe.eval.bootstrap_samples, []
    steps = sorted({r["step"] for r in rows if r["arm"] != "scratch"})
    pairs = [(arm, base, q, step, step) for arm, base, q in comparisons(recipe, out)
             for step in steps]
    pairs += [("scratch", CONTROL, CONTROL_Q, step, recipe.finetune.steps)
              for step in sorted({r["step"] for r in rows if r["arm"] == "scratch"})]
    for arm, base, question, step, base_step in pairs:
        row = ratio_row(_pure(rows, arm, step), _pure(rows, base, base_step),
                        QUESTIONS[question], samples)
        if row is not None:
            found.append({"arm": arm, "step": step, "baseline": base,
                          "baseline_step": base_step, "question": question,
                          "margin": QUESTIONS[question], **row})
    return found


def significance_rows(recipe: Recipe, out: Path, rows: list[dict]) -> list[dict]:
    """At each step, every arm x decoding against the control's nucleus sampling (module
    docstring); none before the human continuations' file exists. Every statistic is
    recomputed from the token ids and must equal its lm-eval row's."""
    if not (out / HUMAN).is_file():
        return []
    samples, remedy = recipe.eval.bootstrap_samples, "delete it and its lm-eval row to " \
        "evaluate again"
    human_tokens = read_tokens(out / HUMAN, None, "restore it, or delete it to write it again")
    counts = resample_counts(len(human_tokens), samples)
    human = measure(human_tokens, counts)
    systems: dict[tuple[str, int, str], dict[int, Measured]] = {}
    made: dict[Path, Measured] = {}      # a step 0 that several arms share is measured once
    for r in rows:
        if r["arm"] == "pretrained" or int(r["prompts"]) != len(human_tokens):
            continue
        ids = paths(out / r["folder"], r["decoding"])[2]
        if ids not in made:
            check_against_row(human, r, out / HUMAN, remedy, prefix="human_")
            made[ids] = measure(read_tokens(ids, len(human_tokens), remedy), counts)
            check_against_row(made[ids], r, ids, remedy)
        seed = _seed(r)   # step 0, evaluated once for every seed, is "seed 0" here
        systems.setdefault((r["arm"], r["step"], r["decoding"]), {})[seed or 0] = made[ids]
    found = []
    for (arm, step, decoding), seeds in systems.items():
        at = recipe.finetune.steps if arm == "scratch" else step
        reference = systems.get((CONTROL, at, NUCLEUS))
        if reference is None or (arm, decoding) == (CONTROL, NUCLEUS):
            continue
        ref = sides(CONTROL, NUCLEUS, reference, human)
        for stat, side in sides(arm, decoding, seeds, human).items():
            found.append({"arm": arm, "step": step, "decoding": decoding, "baseline": CONTROL,
                          "reference": NUCLEUS,
                          **bootstrap_row(side, ref[stat], stat,
                                          human.point[stat.removesuffix("_gap")],
                                          len(human_tokens), samples)})
    return sorted(found, key=lambda r: (r["step"], _order(r["arm"]), r["decoding"]))


def grid_rows(out: Path) -> list[dict]:
    path = out / GRID
    if not path.is_file():
        return []
    return read_table(path, f"delete it and {out / 'selection.json'} to choose tau again"
                      ).to_dict("records")


def drawn(ratios: list[dict]) -> bool:
    """Whether ``ratios.png`` has something to draw: a converted arm over the control."""
    return any(r["question"] == CONTROL_Q and r["arm"] != "scratch" for r in ratios)


def tables(recipe: Recipe, out: Path) -> Tables:
    """Every table of the study (module docstring), each input read and checked first; the
    notes say what is not measured yet."""
    rows = eval_rows(recipe, out)
    ratios = ratio_rows(recipe, out, rows)
    return Tables([
        Table("lm_eval.csv", rows, EVAL),
        Table("summary.csv", summary_rows(rows), SUMMARY),
        Table("ratios.csv", ratios, RATIOS, plot_ratios if drawn(ratios) else None),
        Table("significance.csv", significance_rows(recipe, out, rows), SIGNIFICANCE),
        Table(GRID, grid_rows(out), kept=True)], missing_lines(recipe, out))
