"""The steps of ``arelu reproduce`` after training: each reads the trained runs of a results
folder and writes one of the paper's CSVs (:mod:`arelu_cli.studies.paper.columns`), keeping the
raw CSV of the matching single command under ``analysis/`` (``analysis/seed-S/`` with
several seeds).

Every step covers every (transform, seed) cell of the grid: the CSVs get one row (or one
histogram) per cell, each with the seed in its ``seed`` column and its signature. Decoding
uses the recipe's ``[decode]`` settings (beam 5 in the paper's recipes) and each run's best
checkpoint (by validation BLEU, as in the paper's Results).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from rich.console import Console

from arelu_cli.analysis import empty_check, self_norm, sparsity
from arelu_cli.bench.translate import bench_translate
from arelu_cli.analysis.steps import split_indices
from arelu_cli.analysis.tau_table import empirical_rows
from arelu_cli.config import Config
from arelu_cli.data.prepare import PrepareRequest, prepare
from arelu_cli.data.prepared import load_prepared
from arelu_cli.data.textio import read_text_lines
from arelu_cli.decode.bleu import bleu_chrf
from arelu_cli.studies.paper import human_eval, tables
from arelu_cli.studies.paper.columns import COLUMNS, read_csv
from arelu_cli.studies.paper.distributions import self_norm_rows, sparsity_rows
from arelu_cli.studies.paper.examples import translation_examples_rows
from arelu_cli.studies.core import Run, Task, fresh, make, run_config
from arelu_cli.studies.paper.grid import Grid
from arelu_cli.studies.translation import DEV, TEST, bootstrap_rows, seed_groups, translation
from arelu_cli.util.results import write_rows
from arelu_cli.util.signatures import signature
from arelu_cli.decode.translate import Decoder, open_checkpoint, resolve_checkpoint

SPARSE_FIRST = ("1.5-relu", "1.5-entmax")
"""The pair the paper compares in its sparsity figures and translation examples."""
BASELINE = "softmax"
"""What Table 1's significance tests compare every transform with (the grid's first
transform when softmax is not in it)."""


def prepare_data(config: Config, source: Path | None, console: Console) -> None:
    """``arelu prepare`` of the recipe's corpus into its ``[data] path`` (a no-op when the
    folder is up to date)."""
    result = prepare(PrepareRequest(config.reproduce.corpus, Path(config.data.path),
                                    source=source), log=console.print)
    if not result.rebuilt:
        console.print(f"{config.data.path} is up to date", markup=False, soft_wrap=True)


def tau_table(grid: Grid) -> None:
    """Table 3: the analytic rows at the paper's vocabularies plus this corpus's tau-tilde
    (first batch through the untrained model, one row pair per seed's initialization)."""
    rows = [row for seed in grid.seeds
            for row in empirical_rows("both", run_config(grid.config, seed=seed), [1.5], ("paper", "tail"))]
    write_rows(tables.table3_rows(rows), grid.out / "table3_tau.csv", COLUMNS["table3_tau.csv"])


def tau_table_done(grid: Grid) -> bool:
    """Table 3 is newer than the prepared corpus and has the rows of exactly the grid's seeds."""
    if not fresh([grid.out / "table3_tau.csv"], [Path(grid.config.data.path) / "meta.json"]):
        return False
    frame = read_csv(grid.out, "table3_tau.csv")
    found = set(frame.loc[frame["tau_empirical"].notna(), "seed"])
    return found == set(grid.seeds)


def _open(grid: Grid, name: str, seed: int) -> Decoder:
    return open_checkpoint(grid.run_folder(name, seed), device=grid.device)


def _signature(grid: Grid, decoder: Decoder, seed: int, **extra: object) -> str:
    """The run's signature: the checkpoint's, with the recipe and the training seed."""
    return decoder.signature(recipe=grid.recipe or None, seed=seed, **extra)


def _cells(grid: Grid) -> list[tuple[str, int]]:
    return [(name, seed) for seed in grid.seeds for name in grid.config.reproduce.transforms]


def _translate_step(grid: Grid, run: Run) -> Task:
    """The run's test translation with its best weights, made by the core when missing or
    older than them (:func:`arelu_cli.studies.translation.translation`)."""
    def output() -> Task:  # its weights are known once the run has trained
        return translation(run, path=grid.translation(run.name, run.seed))
    return Task(f"translate {grid.label(run.name, run.seed)} (beam {grid.config.decode.beam})",
                lambda: make([output()]), ready=lambda: output().done())


def _hypotheses(grid: Grid, name: str, seed: int) -> list[str]:
    return read_text_lines(grid.translation(name, seed))


def score(grid: Grid) -> None:
    """Table 1: detokenized cased BLEU (and chrF) of every (transform, seed) test
    translation, and each transform against the baseline by paired bootstrap: per seed
    (same seed on both sides) and, with several seeds, on their outputs concatenated,
    resampled by test sentence (:func:`arelu_cli.studies.translation.bootstrap_rows`)."""
    refs = load_prepared(grid.config.data.path).references(TEST)
    corpus, beam = grid.config.reproduce.corpus, grid.config.decode.beam
    names = list(grid.config.reproduce.transforms)
    hyps = {cell: _hypotheses(grid, *cell) for cell in _cells(grid)}
    rows, sigs = [], {}
    for seed in grid.seeds:
        for name in names:
            bleu, chrf, bleu_sig, _ = bleu_chrf(hyps[name, seed], refs)
            sigs[name, str(seed)] = _signature(grid, _open(grid, name, seed), seed, beam=beam)
            rows.append(tables.table1_row(corpus, name, bleu, chrf, bleu_sig,
                                          sigs[name, str(seed)], TEST, seed))
    joined = "+".join(map(str, grid.seeds))
    sigs |= {(name, joined): signature(transform=name, data=corpus, recipe=grid.recipe or None,
                                       seed=joined, beam=beam) for name in names}
    base = BASELINE if BASELINE in names else names[0]
    tests = tables.significance_rows(corpus, bootstrap_rows(
        [(name, base) for name in names], hyps, refs, seed_groups(grid.seeds, joined)), sigs)
    write_rows(rows, grid.out / "table1_bleu.csv", COLUMNS["table1_bleu.csv"])
    write_rows(tests, grid.out / "table1_significance.csv", COLUMNS["table1_significance.csv"])


SeedRows = tuple[list[dict], dict[str, list[dict]]]
"""One seed's rows of a catalog CSV, and the raw CSVs of the matching single command
(``{file name: rows}``)."""


def per_seed(csv: str, analysis: Callable[[Grid, int], SeedRows]) -> Callable[[Grid], None]:
    """``analysis`` of every seed: their rows in ``csv`` (the catalog's columns), each
    seed's raw CSVs in its ``analysis/`` folder."""
    def run(grid: Grid) -> None:
        rows = []
        for seed in grid.seeds:
            found, raw = analysis(grid, seed)
            rows += found
            for name, lines in raw.items():
                write_rows(lines, grid.analysis(seed) / name)
        write_rows(rows, grid.out / csv, COLUMNS[csv])
    return run


def empty(grid: Grid, seed: int) -> SeedRows:
    """Table 2: sentences of dev whose empty translation outscores the beam hypothesis."""
    rows, summaries, details = [], [], []
    for name in grid.config.reproduce.transforms:
        decoder = _open(grid, name, seed)
        found, sentences = empty_check.measure(decoder, [DEV], grid.config.decode)
        rows.append(tables.table2_row(
            grid.config.reproduce.corpus, name, found[0]["empty_better"], found[0]["sentences"],
            _signature(grid, decoder, seed, split=DEV, beam=grid.config.decode.beam), DEV, seed))
        summaries += found
        details += sentences
    return rows, {"empty_check.csv": summaries, "empty_check_sentences.csv": details}


def sparsity_figure(grid: Grid, seed: int) -> SeedRows:
    """Figs. sparsity (test) and sparsity_train: zero output components at every
    teacher-forced step (test and a train sample), for every sparse transform."""
    config, rows, raw = grid.config, [], []
    for split, sample in ((TEST, None), ("train", config.reproduce.train_sentences)):
        fractions, sigs = {}, {}
        for name in [n for n in config.reproduce.transforms if not n.startswith("softmax")]:
            decoder = _open(grid, name, seed)
            indices = split_indices(decoder, split, sample)
            counts = sparsity.zero_counts(decoder, split, "reference", config.decode,
                                          indices=indices)
            fractions[name] = counts / decoder.data.vocab_size
            sigs[name] = _signature(grid, decoder, seed, split=split, along="reference")
            raw += sparsity.distribution_rows(decoder, split, "reference", counts, config.decode,
                                              len(indices))
        if fractions:
            rows += sparsity_rows(config.reproduce.corpus, split, fractions, signatures=sigs,
                                  seed=seed)
    return rows, {"sparsity.csv": raw}


def self_norm_figure(grid: Grid, seed: int) -> SeedRows:
    """Fig. self_norm: sum of the alpha-ReLU output at every beam-search step on test."""
    config, sums, sigs, summaries = grid.config, {}, {}, []
    for name in [n for n in config.reproduce.transforms if n.endswith("-relu")]:
        decoder = _open(grid, name, seed)
        indices = split_indices(decoder, TEST, None)
        sums[name] = self_norm.output_sums(decoder, TEST, "beam", config.decode, indices=indices)
        sigs[name] = _signature(grid, decoder, seed, split=TEST, along="beam")
        summaries.append(self_norm.summary_row(decoder, TEST, "beam", sums[name], config.decode,
                                               len(indices)))
    rows = self_norm_rows(config.reproduce.corpus, TEST, sums, signatures=sigs,
                          seed=seed) if sums else []
    return rows, {"self_norm.csv": summaries}


def inference_time(grid: Grid, seed: int) -> SeedRows:
    """Fig. infTime: time to translate the test set per transform and beam, the median of
    ``timing_repeats`` interleaved timings; each seed's models are timed together and
    normalized by their fastest."""
    r = grid.config.reproduce
    found = bench_translate([grid.run_folder(n, seed) for n in r.transforms], list(r.beams),
                            TEST, device=grid.device, max_sentences=r.timing_sentences or None,
                            repeats=r.timing_repeats)
    seconds = {(row["transform"], row["beam"]): row["seconds"] for row in found}
    sigs = {n: _signature(grid, _open(grid, n, seed), seed, split=TEST) for n in r.transforms}
    return (tables.inference_time_rows(r.corpus, seconds, sigs, seed),
            {"bench_translate.csv": found})


def examples_and_sheets(grid: Grid) -> None:
    """Translation examples where two transforms disagree, and blind human-eval sheets, from
    the first seed's translations (annotators judge one output per transform)."""
    data, names = load_prepared(grid.config.data.path), list(grid.config.reproduce.transforms)
    sources, refs = data.sources(TEST), data.references(TEST)
    hyps = {name: _hypotheses(grid, name, grid.seeds[0]) for name in names}
    pair = [n for n in SPARSE_FIRST if n in hyps] or names[:2]
    pair += [n for n in names if n not in pair][:2 - len(pair)]
    rows = (translation_examples_rows(sources, refs, pair[0], hyps[pair[0]], pair[1],
                                      hyps[pair[1]], n=6) if len(pair) == 2 else [])
    write_rows(rows, grid.out / "translation_examples.csv", COLUMNS["translation_examples.csv"])
    human_eval.export_sheets(sources, refs, hyps, grid.out / "human_eval",
                             n_items=min(grid.config.reproduce.human_eval_items, len(sources)))


def analysis_steps(grid: Grid, runs: Sequence[Run]) -> list[Task]:
    """Translate each of the transforms' ``runs``, then every analysis; each is done when
    its CSVs exist and are newer than the checkpoints (or translations) of every cell they
    were computed from."""
    steps = [_translate_step(grid, run) for run in runs]

    def models() -> list[Path]:
        return [resolve_checkpoint(run.folder) for run in runs]

    def hypotheses() -> list[Path]:
        return [grid.translation(run.name, run.seed) for run in runs]

    table: list[tuple[str, tuple[str, ...], Callable[[], list[Path]], Callable[[Grid], None]]] = [
        ("score (Table 1)", ("table1_bleu.csv", "table1_significance.csv"), hypotheses, score),
        *[(name, (csv,), models, per_seed(csv, analysis)) for name, csv, analysis in (
            ("empty check (Table 2)", "table2_empty.csv", empty),
            ("sparsity", "fig_sparsity.csv", sparsity_figure),
            ("self-normalization", "fig_self_norm.csv", self_norm_figure),
            ("inference time", "fig_inference_time.csv", inference_time))],
        ("examples and human-eval sheets",
         ("translation_examples.csv", "human_eval-key/key.csv"), hypotheses,
         examples_and_sheets),
    ]
    steps += [Task(name, lambda run=run: run(grid), ready=lambda csvs=csvs, inputs=inputs: fresh(
                       [grid.out / csv for csv in csvs], inputs()))
              for name, csvs, inputs, run in table]
    return steps

