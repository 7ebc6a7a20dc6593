"""``arelu attention-study RECIPE``: which attention transform a sparse-output Transformer
learns with, measured (beyond the paper), resumable.

The paper's Conclusion leaves alpha-ReLU "as a replacement for softmax in the attention
layers" open and expects the risk that an unnormalized transform stops the model from
learning. This trains one model per ``[attention_study] variants`` entry -- the attention
transform of every kind (:mod:`arelu_cli.nmt.attention`), everything else of the recipe fixed,
the output transform ``[train] transform`` included -- for ``[train] max_steps`` optimizer
steps (never against the clock: no other process can change a result), then:

1. **train** each variant into ``runs/VARIANT/``; a run whose loss, gradient or weights stop
   being finite ends there with ``diverged.json`` (:mod:`arelu_cli.nmt.train_guard`): that
   is a finding, recorded and reported, and never retrained (delete the folder to try again);
2. **evaluate** each run that did not diverge at its last step's kept weights: the test
   translation (``[decode]`` beam) into ``translations/``, and the share of exactly-zero
   attention weights per layer and kind along that beam output (``attention_sparsity.csv``,
   :mod:`arelu_cli.analysis.attention_sparsity`) with the cross-attention of
   ``[attention_study] heatmaps`` sentences (``attention_heatmaps.csv``);
3. **timing** (``[attention_study] timing``; the one stage that wants an idle machine): the
   optimizer-step time of every variant paired with the baseline's
   (:mod:`arelu_cli.analysis.bench_attention`, ``bench_train.csv``) and the decoding time of
   the trained models at ``timing_beams`` (``arelu bench translate``, ``bench_decode.csv``),
   each measured once (delete the file to measure again);
4. **report** (:mod:`arelu_cli.pipeline.attention_report`): the CSVs, the figures and
   ``REPORT.md``.

A variant is a registry name for every kind (``softmax``, ``sparsemax``, ``1.5-entmax``...)
or an alpha-ReLU name with its ``[model] attention_relu`` variant as a suffix
(``1.5-relu-raw``, ``1.5-relu-estimated``, ``1.5-relu-renormalized``). Each stage is skipped
where its outputs are there and newer than the weights they came from: run the same command
again to continue. A committed study keeps run records and outputs but not the (git-ignored)
checkpoints; its tables are rebuilt without training. A run is reused only for the settings
it was trained with (:mod:`arelu_cli.pipeline.reuse`): after an edit of the recipe one line
names the setting, and a larger ``max_steps`` continues each run from its ``last.pt``.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.markup import escape

from arelu_cli.analysis.bench_attention import bench_attention
from arelu_cli.config import Config, ModelConfig
from arelu_cli.errors import UserError
from arelu_cli.nmt import checkpoint
from arelu_cli.nmt.attention import RENORM_EPS, VARIANTS
from arelu_cli.nmt.precision import resolve as resolve_precision
from arelu_cli.nmt.train import snapshot_path, train
from arelu_cli.nmt.divergence import DIVERGED, Diverged
from arelu_cli.pipeline.grid import check_outputs, results_folder
from arelu_cli.pipeline.reuse import SAME, reuse
from arelu_cli.pipeline.study import check_budget, check_timed_with, warn_if_busy_file
from arelu_cli.pipeline.study_runs import TEST, trained, translation_path
from arelu_cli.registry import get_transform
from arelu_cli.results import read_table, write_rows

BENCH = "bench_train.csv"
DECODE = "bench_decode.csv"
SPARSITY = "attention_sparsity.csv"
HEATMAPS = "attention_heatmaps.csv"
OUTPUTS = {"results.csv": "variant", "curves.csv": "variant", "sparsity.csv": "variant",
           "heatmaps.csv": "checkpoint", BENCH: "variant", DECODE: "variant"}
"""The study's tables and the first column of each (what a file of ours starts with)."""

Trainer = Callable[[Config, Path, bool], object]
"""``trainer(config, folder, resume)``: trains a run (the study passes :func:`train`)."""


@dataclass(frozen=True)
class Variant:
    """One attention configuration of the study and where its run lives."""

    label: str
    model: ModelConfig
    folder: Path

    @property
    def diverged(self) -> bool:
        return (self.folder / DIVERGED).is_file()

    def weights(self, step: int) -> Path:
        return snapshot_path(self.folder, step)


_LABEL = re.compile(r"^(?P<name>.+)-(?P<variant>" + "|".join(VARIANTS) + r")"
                    r"(?:-eps(?P<eps>\d+(?:\.\d+)?(?:e-?\d+)?))?$")


def variant_model(model: ModelConfig, label: str) -> ModelConfig:
    """``model`` with the attention of ``label`` for every kind (per-kind keys cleared): a
    registry name, or an alpha-ReLU name with its variant as a suffix and, for
    ``renormalized``, optionally its ``attention_eps`` (``1.5-relu-renormalized-eps0.01``;
    without one, the recipe's)."""
    match = _LABEL.match(label)
    name, relu = (match["name"], match["variant"]) if match else (label, model.attention_relu)
    try:
        transform = get_transform(name)
    except ValueError:
        raise UserError(
            f"[attention_study] variant {label!r} is not an attention configuration: give a "
            "normalized transform (softmax, sparsemax, <a>-entmax, e.g. 1.5-entmax) or an "
            f"alpha-ReLU with its variant ({', '.join(f'<a>-relu-{v}' for v in VARIANTS)}, "
            "optionally <a>-relu-renormalized-eps<E>), e.g. 1.5-relu-renormalized-eps0.01"
        ) from None
    if transform.family == "relu" and name == label:
        raise UserError(f"[attention_study] variant {label!r} must name its alpha-ReLU variant: "
                        f"{', '.join(f'{label}-{v}' for v in VARIANTS)}")
    if transform.family != "relu" and name != label:
        raise UserError(f"[attention_study] variant {label!r}: the -{relu} suffix is for "
                        f"alpha-ReLU attention only (e.g. 1.5-relu-{relu})")
    if match and match["eps"] and relu != "renormalized":
        raise UserError(f"[attention_study] variant {label!r}: -eps is the constant of the "
                        f"renormalized variant only (e.g. {name}-renormalized-eps0.01)")
    eps = float(match["eps"]) if match and match["eps"] else model.attention_eps
    if not eps > 0:
        raise UserError(f"[attention_study] variant {label!r}: eps must be > 0 (e.g. "
                        f"{name}-renormalized-eps0.01)")
    if transform.family != "relu" or relu != "renormalized":
        eps = RENORM_EPS
    if transform.family != "relu":  # the alpha-ReLU keys of the recipe are not this run's
        relu, tau = "raw", 0.0
    else:
        tau = model.attention_tau
    return dataclasses.replace(model, attention=name, attention_encoder="", attention_decoder="",
                               attention_cross="", attention_relu=relu, attention_tau=tau,
                               attention_eps=eps)


def variants(config: Config, out: Path) -> list[Variant]:
    """The variants in the recipe's order, the baseline first."""
    a = config.attention_study
    labels = [a.baseline] + [v for v in a.variants if v != a.baseline]
    return [Variant(label, variant_model(config.model, label), out / "runs" / label)
            for label in labels]


def check(config: Config) -> None:
    """Refuse a study that could not give its tables, before any training."""
    check_budget(config, "an attention study")
    get_transform(config.train.transform)
    variants(config, Path("."))


def run_config(config: Config, variant: Variant) -> Config:
    return dataclasses.replace(config, model=variant.model,
                               train=dataclasses.replace(config.train, max_minutes=0.0))


def outputs(config: Config, variant: Variant) -> list[Path]:
    """What evaluation makes from a run: its test translation and attention counts."""
    beam, step = config.decode.beam, config.train.max_steps
    made = [translation_path(variant.folder, step, beam), variant.folder / SPARSITY]
    return made + ([variant.folder / HEATMAPS] if config.attention_study.heatmaps else [])


def fresh(output: Path, weights: Path) -> bool:
    """``output`` is there and was made from these weights (or they are gone: a committed
    study keeps outputs, not checkpoints)."""
    if not output.is_file():
        return False
    return not weights.is_file() or output.stat().st_mtime_ns >= weights.stat().st_mtime_ns


def train_variant(trainer: Trainer, config: Config, variant: Variant, console: Console) -> None:
    """Train (or resume, or continue to a larger ``max_steps``) one run; one trained with
    other settings is refused (:func:`arelu_cli.pipeline.reuse.reuse`); a divergence is
    recorded by the trainer and reported, not raised, and a diverged run is never
    retrained."""
    folder = variant.folder
    same = reuse(folder, run_config(config, variant)) == SAME  # else refused, or longer
    if variant.diverged:
        return
    if same and trained(folder) and ((folder / checkpoint.LAST).is_file()
                                     or all(p.is_file() for p in outputs(config, variant))):
        return
    resume = (folder / checkpoint.LAST).is_file()
    console.rule(f"{'resume' if resume else 'train'} {folder} (attention {variant.label})")
    try:
        trainer(run_config(config, variant), folder, resume)
    except Diverged as err:
        console.print(f"[bold yellow]diverged:[/] attention {escape(variant.label)}: "
                      f"{escape(str(err))} (recorded in {escape(str(folder / DIVERGED))}; "
                      "the study goes on)", highlight=False, soft_wrap=True)
        if not variant.diverged:  # a trainer that raises without recording it
            raise


def evaluate(config: Config, variant: Variant, console: Console) -> None:
    """Stage 2 for one trained run: test translation, attention sparsity, heatmap rows."""
    from arelu_cli.analysis.attention_sparsity import heatmap_rows, measure
    from arelu_cli.analysis.steps import split_indices
    from arelu_cli.nmt.inference import open_checkpoint, translate, write_translation

    a, step = config.attention_study, config.train.max_steps
    weights = variant.weights(step)
    todo = [p for p in outputs(config, variant) if not fresh(p, weights)]
    if not todo:
        return
    if not weights.is_file():
        raise UserError(f"{weights} is missing, so {todo[0]} cannot be made: delete "
                        f"{variant.folder} to train the run again")
    console.print(f"evaluate attention {variant.label} at step {step} (beam {config.decode.beam})")
    decoder = open_checkpoint(weights, device=config.train.device)
    translation, sparsity, *maps = outputs(config, variant)
    if translation in todo:
        write_translation(translate(decoder, config.decode, split=TEST), translation)
    if sparsity in todo:
        write_rows(measure(decoder, [TEST], ["beam"], config.decode,
                           max_sentences=a.sparsity_sentences or None), sparsity)
    if maps and maps[0] in todo:
        chosen = split_indices(decoder, TEST, a.sparsity_sentences or None, 0)[:a.heatmaps]
        write_rows([{"checkpoint": variant.label, "attention": variant.label, **row}
                    for row in heatmap_rows(decoder, TEST, chosen, "beam", config.decode)],
                   maps[0])


def timing(config: Config, out: Path, runs: list[Variant], console: Console) -> None:
    """Stage 3: step times of every variant and decoding times of every trained model that
    did not diverge, each file measured once."""
    from arelu_cli.analysis.bench_translate import bench_translate

    a = config.attention_study
    if not a.timing:
        return
    if not (out / BENCH).is_file():
        console.rule("bench: training step time per attention (wants an idle machine)")
        rows = bench_attention(config, {v.label: v.model for v in runs}, a.baseline,
                               a.bench_repeats, config.train.device, console=console)
        write_rows(rows, out / BENCH)
        warn_if_busy_file(rows, out / BENCH, console)
    check_timed_with(out / BENCH, read_table(out / BENCH, "delete it to measure again"), {
        "transform": config.train.transform,
        "precision": resolve_precision(config.train.precision, config.train.device)})
    decoded = [v for v in runs if not v.diverged]
    if (out / DECODE).is_file() or not decoded or decoded[0].label != a.baseline:
        return
    paths = {str(v.weights(config.train.max_steps)): v.label for v in decoded}
    missing = [p for p in paths if not Path(p).is_file()]
    if missing:
        raise UserError(f"{missing[0]} is missing, so decoding cannot be timed: train the "
                        f"runs again, or set [attention_study] timing = false")
    console.rule("bench: decoding time per attention (wants an idle machine)")
    rows = bench_translate(list(paths), a.timing_beams, TEST, device=config.train.device,
                           max_sentences=a.timing_sentences or None, repeats=a.timing_repeats,
                           log=console.log)
    write_rows([{"variant": paths[r["checkpoint"]], **r} for r in rows], out / DECODE)
    warn_if_busy_file(rows, out / DECODE, console)


def attention_study(config: Config, out: Path, console: Console | None = None,
                    trainer: Trainer | None = None, recipe: str | None = None,
                    allow_data_change: bool = False) -> Path:
    """Run (or continue) every stage into ``out``; returns ``REPORT.md``. An unfinished run
    resumes only on the data it was trained on, unless ``allow_data_change``."""
    from arelu_cli.pipeline.attention_report import write_report

    console = console or Console()
    check(config)
    check_outputs(out, OUTPUTS)
    results_folder(out)
    trainer = trainer or (lambda cfg, folder, resume: train(
        cfg, folder, resume=resume, recipe=recipe, console=console,
        allow_data_change=allow_data_change))
    runs = variants(config, out)
    for variant in runs:  # every run's settings checked before any is trained
        reuse(variant.folder, run_config(config, variant))
    for variant in runs:
        train_variant(trainer, config, variant, console)
        if not variant.diverged:
            evaluate(config, variant, console)
    timing(config, out, runs, console)
    return write_report(config, out, runs)
