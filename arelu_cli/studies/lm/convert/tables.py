"""The conversion study's tables, read only from the files of its folder ``OUT``
(:mod:`~arelu_cli.studies.lm.convert.stages` says where each comes from):

* ``lm_eval.csv``: every lm-eval row, with its ``arm``, ``run``, ``step`` and ``seed``
  (step 0 is the pretrained model with the arm's transform, one evaluation for every seed;
  LoRA's step 0 is its tau rule's; ``scratch`` is the 1.5-ReLU reference at its last step;
  ``pretrained`` is the pretrained model at the perplexity stride);
* ``summary.csv``: per arm x step x decoding, mean and sample std over seeds;
* ``significance.csv``: at every step, each arm x decoding against the softmax control's
  nucleus sampling at the same step, on distinct-2, loop share and Zipf coefficient and
  their gaps to human text: the PTB study's paired bootstrap over test prompts
  (:func:`arelu_cli.studies.lm.bootstrap.significance_rows`' pieces, one implementation).
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pandas as pd

from arelu_cli.studies.lm.convert.evaluate import HUMAN, paths
from arelu_cli.util.errors import UserError

METRICS = ("eps_ppl", "ppl", "sp", "jsd", "support_mean", "zero_share", "distinct_2", "loop",
           "zipf", "zipf_gap", "distinct_2_gap", "length", "dev_eps_ppl")
CONTROL, REFERENCE = "softmax", "sample-top_p0.9"
"""The bootstrap's reference: the softmax control's nucleus sampling."""


def _json(path: Path) -> dict:
    return json.loads(path.read_text()) if path.is_file() else {}


def arm_runs(out: Path) -> dict[str, tuple[str, str]]:
    """arm -> (run name, the run whose step 0 it shares), as the study chose them."""
    recipe, selection = _json(out / "recipe.json"), _json(out / "selection.json")
    found = {}
    for arm in recipe.get("finetune", {}).get("arms", []):
        if arm == "relu-tau_dev":
            run = selection.get("tau_dev", {}).get("run")
        else:
            run = arm
        if run is None:
            continue
        start = run
        if arm == "relu-lora":
            rule = selection.get("lora", {}).get("rule")
            if rule is None:
                continue
            start = "relu-tau_for" if rule == "tau_for" else selection["tau_dev"]["run"]
        found[arm] = (run, start)
    return found


def _read_row(path: Path) -> dict:
    frame = pd.read_csv(path)
    if len(frame) != 1:
        raise UserError(f"{path} holds {len(frame)} rows, not one lm-eval row; delete it and "
                        "its generations to evaluate again")
    return frame.iloc[0].to_dict()


def eval_rows(out: Path) -> list[dict]:
    """Every evaluation of the study (module docstring), in a stable order."""
    rows = []

    def add(arm: str, run: str, step: int, seed: int | None, folder: Path) -> None:
        for csv in sorted(folder.glob("*.csv")):
            row = _read_row(csv)
            rows.append({"arm": arm, "run": run, "step": step,
                         "eval_seed": seed, "folder": str(folder.relative_to(out)),
                         **row})

    for arm, (run, start) in arm_runs(out).items():
        add(arm, start, 0, None, out / "runs" / start / "step-0" / "eval")
        for seed_dir in sorted((out / "runs" / run).glob("seed-*")):
            seed = int(seed_dir.name.removeprefix("seed-"))
            for step_dir in sorted((seed_dir / "eval").glob("step-*")):
                add(arm, run, int(step_dir.name.removeprefix("step-")), seed, step_dir)
    for seed_dir in sorted((out / "runs" / "scratch").glob("seed-*")):
        for step_dir in sorted((seed_dir / "eval").glob("step-*")):
            add("scratch", "scratch", int(step_dir.name.removeprefix("step-")),
                int(seed_dir.name.removeprefix("seed-")), step_dir)
    add("pretrained", "pretrain", 0, None, out / "pretrain" / "eval-ppl")
    return rows


def summary_rows(rows: list[dict]) -> list[dict]:
    """Per arm x step x decoding: seeds, and mean and sample std of :data:`METRICS`."""
    groups: dict[tuple, list[dict]] = {}
    for r in rows:
        groups.setdefault((r["arm"], r["step"], r["decoding"]), []).append(r)
    out = []
    for (arm, step, decoding), found in groups.items():
        row = {"arm": arm, "step": step, "decoding": decoding, "n": len(found),
               "seeds": " / ".join("-" if pd.isna(r["eval_seed"]) else str(int(r["eval_seed"]))
                                   for r in found),
               "tau": found[0]["tau"], "transform": found[0]["transform"],
               "stride": found[0]["stride"], "prompts": found[0]["prompts"]}
        for metric in METRICS:
            values = [float(r[metric]) for r in found if not pd.isna(r.get(metric))]
            row[metric] = statistics.fmean(values) if values else None
            row[f"{metric}_std"] = statistics.stdev(values) if len(values) > 1 else None
        out.append(row)
    return sorted(out, key=lambda r: (r["arm"], r["step"], r["decoding"]))


def significance_rows(out: Path, rows: list[dict], samples: int) -> list[dict]:
    """At each step, every arm x decoding against the control's nucleus sampling (module
    docstring); none before the control's and the human continuations' files exist."""
    from arelu_cli.studies.lm.bootstrap import (_check_against_row, _test_row, measure,
                                                resample_counts, sides)
    from arelu_cli.studies.lm.runs import read_tokens

    if not (out / HUMAN).is_file():
        return []
    remedy = "delete it and its lm-eval row to evaluate again"
    human_tokens = read_tokens(out / HUMAN, None, remedy)
    counts = resample_counts(len(human_tokens), samples)
    human = measure(human_tokens, counts)
    systems: dict[tuple[str, int, str], dict[int, object]] = {}
    for r in rows:
        if int(r["prompts"]) != len(human_tokens) or r["arm"] == "pretrained":
            continue
        ids = paths(out / r["folder"], r["decoding"])[2]
        measured = measure(read_tokens(ids, len(human_tokens), remedy), counts)
        _check_against_row(measured, r, ids, remedy)
        seed = 0 if pd.isna(r["eval_seed"]) else int(r["eval_seed"])
        systems.setdefault((r["arm"], int(r["step"]), r["decoding"]), {})[seed] = measured
    found = []
    for (arm, step, decoding), seeds in sorted(systems.items()):
        reference = systems.get((CONTROL, step, REFERENCE))
        if reference is None or (arm, decoding) == (CONTROL, REFERENCE):
            continue
        ref = sides(CONTROL, REFERENCE, reference, human)
        for stat, side in sides(arm, decoding, seeds, human).items():
            row = _test_row(side, ref[stat], stat, human.point[stat.removesuffix("_gap")],
                            len(human_tokens), samples)
            found.append({"step": step, **row})
    return found


def write_tables(out: Path, samples: int) -> dict[str, list[dict]]:
    """``lm_eval.csv``, ``summary.csv`` and ``significance.csv`` into ``out``."""
    from arelu_cli.util.results import write_rows

    rows = eval_rows(out)
    tables = {"lm_eval": rows, "summary": summary_rows(rows),
              "significance": significance_rows(out, rows, samples)}
    for name, found in tables.items():
        if found:
            write_rows(found, out / f"{name}.csv")
    return tables
