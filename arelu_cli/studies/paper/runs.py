"""Training run folders -> the paper's training figures and its training-time table.

A run folder is what ``arelu train`` writes (:mod:`arelu_cli.train.run_dir`); a run is a
:class:`~arelu_cli.studies.core.Run` read back from it, and a grid trained with several
seeds keeps one per seed (:mod:`arelu_cli.studies.paper.layout`). Every row carries its
run's seed. Builders:

* :func:`training_dynamics_rows` -- Figs. train_dyn_rel / train_dyn_abs (BLEU, loss vs step
  and vs wall time);
* :func:`tau_norm_rows` -- Fig. tau_z_evo (mean tau(z) of 1.5-entmax and ||z|| vs step);
* :func:`training_time_rows` -- the appendix table "Power consumed by GPUs for training";
* :func:`tau_sweep_rows` -- Fig. tau (validation BLEU of alpha-ReLU runs with different tau).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Optional

import pandas as pd

from arelu_cli.model.attention import describe as describe_attention
from arelu_cli.studies.core import Run
from arelu_cli.studies.paper.layout import find_run_dirs
from arelu_cli.train import run_dir
from arelu_cli.train.log import COLUMNS as LOG_COLUMNS
from arelu_cli.util.errors import UserError


def load_run(folder: str | Path, name: Optional[str] = None) -> Run:
    """The run in ``folder``, its record and log checked (a clear error when either is
    unusable); ``name`` defaults to the folder's name."""
    folder = Path(folder)
    for path in (run_dir.config_path(folder), run_dir.log_path(folder)):
        if not path.is_file():
            raise UserError(f"{folder} is not a training run: {path.name} is missing "
                            "(a run folder is what `arelu train --out FOLDER` writes)")
    run, log_path = Run.read(folder, name), run_dir.log_path(folder)
    log = run.log
    if tuple(log.columns) != LOG_COLUMNS:
        raise UserError(f"{log_path} has columns {list(log.columns)}, expected {list(LOG_COLUMNS)}")
    if log.empty:
        raise UserError(f"{log_path} has no rows yet: train for at least log_every steps")
    return run


def load_runs(parent: str | Path) -> list[Run]:
    """Every run under ``parent``, named by its path below it (``softmax/seed-2``)."""
    parent = Path(parent)
    return [load_run(p, p.relative_to(parent).as_posix()) for p in find_run_dirs(parent)]


def tau_of(run: Run) -> Optional[float]:
    """alpha-ReLU's fixed threshold (its record's ``resolved.tau``); None for others."""
    return run.resolved.get("tau") if "relu" in run.transform else None


def n_gpus_of(run: Run) -> int:
    """Processes that trained it (its record's ``resolved.world_size``)."""
    return int(run.resolved.get("world_size", 1))


def beside_of(run: Run) -> int:
    """Other runs trained at the same time as it (its ``summary.json``'s ``beside``; 0 for a
    run trained alone or before that was recorded)."""
    path = run_dir.summary_path(run.folder)
    return int(run_dir.read_summary(run.folder).get("beside") or 0) if path.is_file() else 0


def signature_of(run: Run) -> str:
    """The signature of its last log row."""
    return str(run.log["signature"].iloc[-1])


def data_fingerprint_of(run: Run) -> Optional[str]:
    """The :func:`~arelu_cli.data.prepared.data_fingerprint` of the folder it was trained on
    when training began; None when its record holds none."""
    return run.resolved.get("data_fingerprint")


def attention_of(run: Run) -> Optional[str]:
    """Its attention (:func:`arelu_cli.model.attention.describe`): None for softmax."""
    return describe_attention(run.config.model)


def _value(x: object) -> object:
    """NaN -> None so that empty cells stay empty in the CSV."""
    return None if isinstance(x, float) and math.isnan(x) else x


def _rows(run: Run, columns: Sequence[str], mask: Optional[pd.Series] = None) -> list[dict]:
    log = run.log if mask is None else run.log[mask]
    head = {"corpus": run.corpus, "run": run.name, "transform": run.transform, "seed": run.seed}
    return [{**head, **{c: _value(r[c]) for c in columns}, "signature": r["signature"]}
            for r in log.to_dict("records")]


def training_dynamics_rows(runs: Iterable[Run]) -> list[dict]:
    """Every log row of every run: BLEU/loss vs step and wall time (Figs. train_dyn_*)."""
    cols = ("step", "wall_s", "train_loss", "val_loss", "val_bleu")
    rows = []
    for run in runs:
        beside = beside_of(run)
        rows += [{**row, "beside": beside} for row in _rows(run, cols)]
    return rows


def tau_norm_rows(runs: Iterable[Run]) -> list[dict]:
    """The rows with logit statistics: mean tau(z), the transform's tau and ||z|| (Fig. tau_z_evo)."""
    cols = ("step", "tau", "tau_z", "logit_norm")
    return [row for run in runs for row in _rows(run, cols, run.log["logit_norm"].notna())]


def _best(log: pd.DataFrame) -> tuple[Optional[float], Optional[int]]:
    valid = log.dropna(subset=["val_bleu"])
    if valid.empty:
        return None, None
    best = valid.loc[valid["val_bleu"].idxmax()]
    return float(best["val_bleu"]), int(best["step"])


def training_time_rows(runs: Iterable[Run], gpu_watts: Optional[float] = None,
                       n_gpus: Optional[int] = None) -> list[dict]:
    """Hours, tokens/s and kWh per run (the appendix's GPU power table).

    ``gpu_watts`` is the power of one GPU; ``kwh = hours * gpu_watts / 1000 * n_gpus`` with
    ``n_gpus`` given or the run's world size. Without ``gpu_watts`` (a CPU run) kWh is empty.
    """
    if gpu_watts is not None and not (gpu_watts > 0 and math.isfinite(gpu_watts)):  # NaN too
        raise UserError(f"[reproduce] gpu_watts must be positive and finite (watts per GPU), "
                        f"got {gpu_watts:g}")
    if n_gpus is not None and n_gpus < 1:
        raise UserError(f"the number of GPUs must be >= 1, got {n_gpus}")
    rows = []
    for run in runs:
        log, gpus = run.log, n_gpus or n_gpus_of(run)
        hours = float(log["wall_s"].iloc[-1]) / 3600.0
        speed = log["tokens_per_s"].dropna()
        best_bleu, best_step = _best(log)
        rows.append({
            "corpus": run.corpus, "run": run.name, "transform": run.transform,
            "seed": run.seed, "steps": int(log["step"].iloc[-1]), "hours": hours,
            "tokens_per_s": float(speed.median()) if len(speed) else None,
            "best_bleu": best_bleu, "best_step": best_step, "n_gpus": gpus,
            "gpu_watts": gpu_watts,
            "kwh": hours * gpu_watts / 1000.0 * gpus if gpu_watts is not None else None,
            "beside": beside_of(run), "signature": signature_of(run)})
    return rows


def tau_sweep_rows(runs: Iterable[Run]) -> list[dict]:
    """Validation rows of alpha-ReLU runs trained with different fixed tau (Fig. tau).

    Each row repeats its run's best and last validation BLEU, so the figure's "final BLEU
    vs tau" panel needs no second file. Runs of other transforms are a UserError.
    """
    rows, taus = [], {run: tau_of(run) for run in runs}
    for run in sorted(taus, key=lambda r: (taus[r] is None, taus[r], r.seed, r.name)):
        if taus[run] is None:
            raise UserError(f"run {run.name} ({run.transform}) has no fixed tau: the tau sweep "
                            "takes alpha-ReLU runs only")
        valid = run.log.dropna(subset=["val_bleu"])
        best, _ = _best(run.log)
        final = float(valid["val_bleu"].iloc[-1]) if len(valid) else None
        for r in valid.to_dict("records"):
            rows.append({"corpus": run.corpus, "run": run.name, "transform": run.transform,
                         "seed": run.seed, "tau": taus[run], "step": int(r["step"]),
                         "wall_s": r["wall_s"],
                         "val_bleu": r["val_bleu"], "val_loss": _value(r["val_loss"]),
                         "best_bleu": best, "final_bleu": final, "signature": r["signature"]})
    return rows
