"""The language-model study's runs and the files it reads of them: ``seeds/NAME/seed-S/``
(its compared runs, :func:`seed_runs`), each decoding's ``lm_eval/DECODING.csv`` row
(:func:`read_eval`) and ``generations/DECODING.tokens.json`` (read by the shared
:mod:`arelu_cli.studies.generations`), the tau sweep on dev of its alpha-ReLU models
(:func:`selected_shift`), and :func:`label`, the name a report gives a transform."""

from __future__ import annotations

import numbers
from pathlib import Path

import numpy as np
import pandas as pd

from arelu_cli.analysis.lm_eval import COLUMNS as EVAL_COLUMNS
from arelu_cli.config import Config
from arelu_cli.registry import get_transform
from arelu_cli.studies.core import Run
from arelu_cli.train import run_dir
from arelu_cli.util.errors import UserError
from arelu_cli.util.results import read_table

BENCH, TAU_SWEEP = "bench_generate.csv", "tau_sweep.csv"
SAMPLE = "sample"
TUNED = "sample-tau_dev"
"""alpha-ReLU sampling at the decode-time tau shift selected on dev."""
TEXT = ("transform", "decoding", "split", "checkpoint", "generations", "signature")
"""The columns of an ``lm-eval`` row that are not numbers."""


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


def is_relu(name: str) -> bool:
    return get_transform(name).family == "relu"


def is_entmax15(name: str) -> bool:
    """Whether ``name`` computes 1.5-entmax (with any partial sort)."""
    t = get_transform(name)
    return t.family == "entmax" and t.alpha == 1.5


def seed_runs(config: Config, out: Path) -> tuple[list[Run], list[str]]:
    """The compared runs that have started (``seeds/NAME/seed-S/`` with a record) of the
    study's transforms and seeds, by transform then seed; and one note per folder of
    ``seeds/`` left out (another transform or seed than the recipe's now)."""
    runs, notes = [], []
    names, seeds = config.lm_study.transforms, config.study.seeds
    for folder in sorted((out / "seeds").glob("*/seed-*")):
        seed = folder.name.removeprefix("seed-")
        if not seed.isdigit():
            raise UserError(f"{folder} is not a seed folder (seed-S, S a whole number); move "
                            "it out of the study folder")
        if folder.parent.name not in names or int(seed) not in seeds:
            notes.append(f"{folder.relative_to(out)} is left out: [lm_study] transforms "
                         f"({', '.join(names)}) and [study] seeds "
                         f"({', '.join(map(str, seeds))}) do not include it")
        elif run_dir.read_config(folder) is not None:
            runs.append(Run.read(folder, folder.parent.name))
    return sorted(runs, key=lambda r: (r.name, r.seed)), notes


def eval_path(run: Run, decoding: str) -> Path:
    return run.folder / "lm_eval" / f"{decoding}.csv"


def decodings(run: Run) -> list[str]:
    """The decodings ``run`` has an ``lm-eval`` row of."""
    return sorted(p.stem for p in (run.folder / "lm_eval").glob("*.csv"))


def measure_again(path: Path) -> str:
    return (f"restore it, or delete {path} and the run's generations/{Path(path).stem}.* "
            "to evaluate again")


def read_eval(run: Run, decoding: str, out: Path) -> dict:
    """The one ``lm-eval`` row of ``run`` x ``decoding``, with its ``run`` (relative to
    ``out``); a file of other columns, rows, run or a cell that is not a number where one
    belongs is refused in one line."""
    path = eval_path(run, decoding)
    frame = read_table(path, measure_again(path))
    if list(frame.columns) != list(EVAL_COLUMNS) or len(frame) != 1:
        raise UserError(f"{path} is not one arelu lm-eval row ({len(frame)} rows, columns "
                        f"{','.join(map(str, frame.columns))[:60]!r}); {measure_again(path)}")
    row = frame.iloc[0].to_dict()
    for column in EVAL_COLUMNS:
        if column not in TEXT and not _number(row[column]):
            raise UserError(f"{path}: {column} is {row[column]!r}, not a number; "
                            f"{measure_again(path)}")
    found = (str(row["transform"]), str(row["decoding"]), row["seed"])
    if found[:2] != (run.name, decoding) or pd.isna(found[2]) or int(found[2]) != run.seed:
        raise UserError(f"{path} holds {found[0]} x {found[1]} at seed {found[2]}, not "
                        f"{run.name} x {decoding} at seed {run.seed}; {measure_again(path)}")
    return {"run": run.folder.relative_to(out).as_posix(), **row}


def _number(value: object) -> bool:
    """A number, or an empty cell (NaN: a metric that does not apply)."""
    return isinstance(value, numbers.Number) and not isinstance(value, (bool, np.bool_))


def selected_shift(folder: Path) -> float:
    """The tau shift of the lowest dev epsilon-perplexity in ``folder``'s ``tau_sweep.csv``
    (the smallest shift in size on ties)."""
    path = folder / TAU_SWEEP
    frame = read_table(path, run_dir.again(folder))
    if frame.empty or not {"tau_shift", "dev_eps_ppl"} <= set(frame.columns):
        raise UserError(f"{path} holds no tau sweep; {run_dir.again(folder)}")
    best = min(frame.itertuples(), key=lambda r: (r.dev_eps_ppl, abs(r.tau_shift)))
    return float(best.tau_shift)


def tau_shifts(runs: list[Run]) -> dict[str, float]:
    """Per alpha-ReLU model, the tau shift its sweep on dev selected (``tau_sweep.csv`` of
    its lowest seed that has one: the study sweeps on its first seed only)."""
    found: dict[str, float] = {}
    for run in sorted(runs, key=lambda r: r.seed):
        if run.name not in found and (run.folder / TAU_SWEEP).is_file():
            found[run.name] = selected_shift(run.folder)
    return found
