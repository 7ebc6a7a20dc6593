"""The attention study (``[study] kind = "attention"``, ``arelu study RECIPE``): which
attention transform a sparse-output Transformer learns with, measured (beyond the paper),
resumable.

The paper's Conclusion leaves alpha-ReLU "as a replacement for softmax in the attention
layers" open and expects the risk that an unnormalized transform stops the model from
learning. This trains one model per ``[attention_study] variants`` entry -- the attention
transform of every kind (:mod:`arelu_cli.model.attention`), everything else of the recipe fixed,
the output transform ``[train] transform`` included -- for ``[train] max_steps`` optimizer
steps (never against the clock: no other process can change a result), then:

1. **train** each variant into ``runs/VARIANT/``; a run whose loss, gradient or weights stop
   being finite ends there with ``diverged.json`` (:mod:`arelu_cli.train.divergence`): that
   is a finding, recorded and reported, and never retrained (delete the folder to try again);
2. **evaluate** each run that did not diverge at its last step's kept weights: the test
   translation (``[decode]`` beam) into ``translations/``, and the share of exactly-zero
   attention weights per layer and kind along that beam output (``attention_sparsity.csv``,
   :mod:`arelu_cli.analysis.attention_sparsity`) with the cross-attention of
   ``[attention_study] heatmaps`` sentences (``attention_heatmaps.csv``);
3. **timing** (``[attention_study] timing``; the one stage that wants an idle machine): the
   optimizer-step time of every variant paired with the baseline's
   (:mod:`arelu_cli.bench.attention`, ``bench_train.csv``) and the decoding time of
   the trained models at ``timing_beams`` (``arelu bench translate``, ``bench_decode.csv``),
   each measured once (delete the file to measure again);
4. **report** (:mod:`arelu_cli.studies.attention.report`): the tables, the figures and
   ``REPORT.md``, written by the runner (:mod:`arelu_cli.studies.runner`).

A variant is a registry name for every kind (``softmax``, ``sparsemax``, ``1.5-entmax``...)
or an alpha-ReLU name with its ``[model] attention_relu`` variant as a suffix
(``1.5-relu-raw``, ``1.5-relu-estimated``, ``1.5-relu-renormalized``). Each stage is skipped
where its outputs are there and newer than the weights they came from: run the same command
again to continue. A committed study keeps run records and outputs but not the (git-ignored)
checkpoints; its tables are rebuilt without training. A run is reused only for the settings
it was trained with (:func:`arelu_cli.studies.core.reuse`): after an edit of the recipe one line
names the setting, and a larger ``max_steps`` continues each run from its ``last.pt``.
"""

from __future__ import annotations

from pathlib import Path

from rich.console import Console

from arelu_cli.bench.attention import bench_attention
from arelu_cli.config import Config
from arelu_cli.registry import get_transform
from arelu_cli.studies.attention import report
from arelu_cli.studies.attention.report import BENCH, DECODE, HEATMAPS, SPARSITY
from arelu_cli.studies.attention.variants import variants
from arelu_cli.studies.contract import Context, Study
from arelu_cli.studies.core import (Run, Task, check_budget, check_runs, output, tolerant,
                                    train_and_make)
from arelu_cli.studies.timings import precision, timed_once
from arelu_cli.studies.translation import TEST, translation
from arelu_cli.train.loop import snapshot_path
from arelu_cli.train.run_dir import diverged
from arelu_cli.util.errors import UserError
from arelu_cli.util.results import write_rows

OUTPUTS = {"results.csv": "variant", "curves.csv": "variant", "sparsity.csv": "variant",
           "heatmaps.csv": "checkpoint", BENCH: "variant", DECODE: "variant"}
"""The study's tables and the first column of each (what a file of ours starts with)."""


def check(config: Config) -> None:
    """Refuse a study that could not give its tables, before any training."""
    check_budget(config, "an attention study")
    get_transform(config.train.transform)
    variants(config, Path("."))


def outputs(run: Run) -> list[Task]:
    """What evaluation makes from a run's last kept weights: its test translation, its
    attention counts along the beam output, the cross-attention of a few sentences."""
    from arelu_cli.analysis.attention_sparsity import heatmap_rows, measure
    from arelu_cli.analysis.steps import split_indices
    from arelu_cli.decode.translate import open_checkpoint

    a, decode, step = run.config.attention_study, run.config.decode, run.steps
    weights = snapshot_path(run.folder, step)

    def decoder():
        return open_checkpoint(weights, device=run.config.train.device)

    def sparsity() -> None:
        write_rows(measure(decoder(), [TEST], ["beam"], decode,
                           max_sentences=a.sparsity_sentences or None), run.folder / SPARSITY)

    def heatmaps() -> None:
        found = decoder()
        chosen = split_indices(found, TEST, a.sparsity_sentences or None, 0)[:a.heatmaps]
        write_rows([{"checkpoint": run.name, "attention": run.name, **row}
                    for row in heatmap_rows(found, TEST, chosen, "beam", decode)],
                   run.folder / HEATMAPS)
    made = [translation(run, step), output((run.folder / SPARSITY,), weights, sparsity)]
    return made + ([output((run.folder / HEATMAPS,), weights, heatmaps)] if a.heatmaps else [])


def timing(config: Config, out: Path, runs: list[Run], console: Console) -> None:
    """Stage 3: step times of every variant and decoding times of every trained model that
    did not diverge, each file measured once (:func:`~arelu_cli.studies.timings.timed_once`)."""
    from arelu_cli.bench.translate import bench_translate

    a = config.attention_study
    if not a.timing:
        return
    timed_once(out / BENCH, "training step time per attention", lambda: bench_attention(
        config, {v.name: v.config.model for v in runs}, a.baseline, a.bench_repeats,
        config.train.device, console=console), console,
        {"transform": config.train.transform, "precision": precision(config)})
    decoded = [v for v in runs if not diverged(v.folder)]
    if (out / DECODE).is_file() or not decoded or decoded[0].name != a.baseline:
        return
    paths = {str(snapshot_path(v.folder, v.steps)): v.name for v in decoded}
    missing = [p for p in paths if not Path(p).is_file()]
    if missing:
        raise UserError(f"{missing[0]} is missing, so decoding cannot be timed: train the "
                        f"runs again, or set [attention_study] timing = false")
    timed_once(out / DECODE, "decoding time per attention", lambda: [
        {"variant": paths[r["checkpoint"]], **r} for r in bench_translate(
            list(paths), a.timing_beams, TEST, device=config.train.device,
            max_sentences=a.timing_sentences or None, repeats=a.timing_repeats,
            log=console.log)], console)


def stages(config: Config, out: Path, context: Context) -> None:
    """Train and evaluate every variant (a divergence is a finding: the study goes on), then
    time them."""
    train = tolerant(context.train, context.console)
    runs = variants(config, out)
    check_runs(runs)
    for run in runs:
        train_and_make(run, train, context.console, outputs(run))
    timing(config, out, runs, context.console)


STUDY = Study("attention", check, stages, report.tables, report.claims, report.document,
              OUTPUTS, ("curves.png", "sparsity.png", "heatmaps.png"))
