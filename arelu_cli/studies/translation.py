"""What a translation study makes and scores over the core (:mod:`.core`): a run's test
translation at a step (a :class:`~arelu_cli.studies.core.Task`), its dev log, and the one
paired bootstrap of test BLEU over seeds that every table of tests is built from
(:func:`bootstrap_rows`, :mod:`arelu_cli.analysis.significance`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from pathlib import Path

import pandas as pd

from arelu_cli.analysis.significance import RESAMPLES, bootstrap_signature, compare_to_baseline
from arelu_cli.data.prepared import load_prepared
from arelu_cli.data.textio import read_text_lines
from arelu_cli.decode.bleu import paper_bleu
from arelu_cli.studies.core import Run, Task, output
from arelu_cli.train import run_dir
from arelu_cli.train.loop import snapshot_path
from arelu_cli.util.errors import UserError

TEST, DEV = "test", "dev"


def references(data: str | Path) -> list[str]:
    """The test references of the prepared folder ``data``, which a report's BLEU tables
    need beside the committed translations."""
    return load_prepared(data).references(TEST)


def dev_log(folder: Path) -> pd.DataFrame:
    """The run's log, refused in one line when it is cut short (no dev BLEU at the step the
    run's summary says it finished at)."""
    steps = run_dir.read_summary(folder).get("steps")
    log = run_dir.read_log(folder)
    bleu = log.dropna(subset=["val_bleu"]) if "val_bleu" in log else log.iloc[0:0]
    if steps is not None and (bleu.empty or int(bleu["step"].iloc[-1]) != int(steps)):
        last = ("no validation" if bleu.empty
                else f"its last validation at step {int(bleu['step'].iloc[-1])}")
        raise UserError(f"{run_dir.log_path(folder)} has {last}, but the run finished at step "
                        f"{steps} (cut short?); {run_dir.again(folder)}")
    return log


def translation_path(folder: Path, step: int, beam: int) -> Path:
    return folder / "translations" / f"{TEST}.step-{step}.beam-{beam}.txt"


def translation(run: Run, step: int | None = None, path: Path | None = None) -> Task:
    """The test translation of ``run`` (``[decode]``) with its weights kept at ``step``, into
    its ``translations/``; without ``step``, with its best weights (``best.pt``, else
    ``last.pt``), into ``path``."""
    from arelu_cli.decode.translate import (open_checkpoint, resolve_checkpoint, translate,
                                            write_translation)

    if step is None:
        weights = resolve_checkpoint(run.folder)
    else:
        path = translation_path(run.folder, step, run.config.decode.beam)
        weights = snapshot_path(run.folder, step)

    def write() -> None:
        decoder = open_checkpoint(weights, device=run.config.train.device)
        write_translation(translate(decoder, run.config.decode, split=TEST), path)
    return output((path,), weights, write)


def translation_lines(path: Path, references: int) -> list[str]:
    """The lines of the test translation ``path``, refused in one line naming it when it
    has another number of lines than the test set has references (a file cut short)."""
    lines = read_text_lines(path)
    if len(lines) != references:
        raise UserError(f"{path} has {len(lines)} lines but the test set has {references} "
                        "references (cut short?); delete it, and its .json, to translate "
                        "again")
    return lines


def seed_groups(seeds: Sequence[int], joined: str) -> list[tuple[str, tuple[int, ...]]]:
    """Each seed alone, then (with several) all of them under the label ``joined``."""
    return [(str(s), (s,)) for s in seeds] + ([(joined, tuple(seeds))] if len(seeds) > 1
                                              else [])


def bootstrap_rows(pairs: Sequence[tuple[str, str]],
                   hyps: Mapping[tuple[str, int], Sequence[str]], refs: Sequence[str],
                   groups: Sequence[tuple[str, tuple[int, ...]]],
                   samples: int = RESAMPLES) -> list[dict]:
    """The paired bootstrap of every ``(system, baseline)`` pair (``hyps[name, seed]``:
    test translations) in every group of seeds (:func:`seed_groups`): one seed tests the two
    runs of that seed; several concatenate their translations in seed order on both sides,
    resampled by test sentence (:func:`~arelu_cli.analysis.significance.compare_to_baseline`
    with ``runs``). Only the seeds both sides have count; a group of several left with fewer
    than two is skipped. Each row: ``transform``, ``baseline``, ``seeds`` (the group's
    label), the fields of :class:`~arelu_cli.analysis.significance.PairedBootstrap` and
    ``bleu_signature`` (the test's sacrebleu signature)."""
    metric, rows = paper_bleu(), []
    for label, seeds in groups:
        for name, base in pairs:
            both = [s for s in seeds if (name, s) in hyps and (base, s) in hyps]
            if not both or (len(seeds) > 1 and len(both) < 2):
                continue
            lines = {side: [x for s in both for x in hyps[side, s]] for side in (name, base)}
            result = compare_to_baseline(lines[base], {name: lines[name]}, list(refs) * len(both),
                                         samples, metric=metric, runs=len(both))[name]
            rows.append({"transform": name, "baseline": base, "seeds": label,
                         **dataclasses.asdict(result),
                         "bleu_signature": bootstrap_signature(metric, samples)})
    return rows
