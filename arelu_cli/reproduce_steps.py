"""The steps of ``arelu reproduce`` after training: each reads the trained runs of a results
folder and writes one of the paper's CSVs (:mod:`arelu_cli.report.columns`), keeping the
raw CSV of the matching single command under ``analysis/``.

Decoding uses the recipe's ``[decode]`` settings (beam 5 in the paper's recipes) and each
run's best checkpoint (by validation BLEU, as in the paper's Results).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from rich.console import Console

from arelu_cli.analysis import empty_check, self_norm, sparsity
from arelu_cli.analysis.bench_translate import bench_translate
from arelu_cli.analysis.score import bleu_chrf
from arelu_cli.analysis.steps import split_indices
from arelu_cli.analysis.tau_table import empirical_rows
from arelu_cli.config import Config
from arelu_cli.data.prepare import PrepareRequest, prepare
from arelu_cli.data.prepared import load_prepared
from arelu_cli.report import human_eval, tables
from arelu_cli.report.build import regenerate
from arelu_cli.report.columns import write_csv
from arelu_cli.report.distributions import self_norm_rows, sparsity_rows
from arelu_cli.report.examples import translation_examples_rows
from arelu_cli.reproduce import DEV, TEST, Step, up_to_date
from arelu_cli.results import write_rows
from arelu_cli.translate import (Decoder, open_checkpoint, resolve_checkpoint, translate,
                                 write_translation)

SPARSE_FIRST = ("1.5-relu", "1.5-entmax")
"""The pair the paper compares in its sparsity figures and translation examples."""


def prepare_data(config: Config, source: Path | None, console: Console) -> None:
    """``arelu prepare`` of the recipe's corpus into its ``[data] path`` (a no-op when the
    folder is up to date)."""
    result = prepare(PrepareRequest(config.reproduce.corpus, Path(config.data.path),
                                    source=source), log=console.print)
    if not result.rebuilt:
        console.print(f"{config.data.path} is up to date")


def tau_table(config: Config, out: Path) -> None:
    """Table 3: the analytic rows at the paper's vocabularies plus this corpus's tau-tilde."""
    write_csv(tables.table3_rows(empirical_rows("both", config, [1.5], ("paper", "tail"))),
              out, "table3_tau.csv")


def _run(out: Path, name: str) -> Path:
    return out / "runs" / name


def _hyp_path(out: Path, name: str) -> Path:
    return out / "translations" / f"{name}.{TEST}.txt"


def _open(out: Path, name: str, device: str) -> Decoder:
    return open_checkpoint(_run(out, name), device=device)


def _translate_step(config: Config, out: Path, name: str, device: str) -> Step:
    def run() -> None:
        decoder = _open(out, name, device)
        found = translate(decoder, config.decode, split=TEST)
        write_translation(found, _hyp_path(out, name))
    return Step(f"translate {name} (beam {config.decode.beam})",
                lambda: up_to_date(_hyp_path(out, name), [resolve_checkpoint(_run(out, name))]),
                run)


def _hypotheses(out: Path, name: str) -> list[str]:
    return _hyp_path(out, name).read_text(encoding="utf-8").splitlines()


def score(config: Config, out: Path, device: str) -> None:
    """Table 1: detokenized cased BLEU (and chrF) of every transform's test translation."""
    refs = load_prepared(config.data.path).references(TEST)
    scores = {}
    for name in config.reproduce.transforms:
        bleu, chrf, bleu_sig, _ = bleu_chrf(_hypotheses(out, name), refs)
        scores[name] = tables.BleuScore(bleu, chrf, bleu_sig,
                                        _open(out, name, device).signature(beam=config.decode.beam))
    write_csv(tables.table1_rows(config.reproduce.corpus, scores, TEST), out, "table1_bleu.csv")


def empty(config: Config, out: Path, device: str) -> None:
    """Table 2: sentences of dev whose empty translation outscores the beam hypothesis."""
    counts, summaries, details = {}, [], []
    for name in config.reproduce.transforms:
        decoder = _open(out, name, device)
        rows, sentences = empty_check.measure(decoder, [DEV], config.decode)
        counts[name] = tables.EmptyCount(rows[0]["empty_better"], rows[0]["sentences"],
                                         rows[0]["signature"])
        summaries += rows
        details += sentences
    write_rows(summaries, out / "analysis" / "empty_check.csv")
    write_rows(details, out / "analysis" / "empty_check_sentences.csv")
    write_csv(tables.table2_rows(config.reproduce.corpus, counts, DEV), out, "table2_empty.csv")


def _sparse(config: Config) -> list[str]:
    return [n for n in config.reproduce.transforms if not n.startswith("softmax")]


def sparsity_figure(config: Config, out: Path, device: str) -> None:
    """Figs. sparsity (test) and sparsity_train: zero output components at every
    teacher-forced step, for every sparse transform."""
    rows, raw = [], []
    for split, sample in ((TEST, None), ("train", config.reproduce.train_sentences)):
        fractions, sigs = {}, {}
        for name in _sparse(config):
            decoder = _open(out, name, device)
            indices = split_indices(decoder, split, sample)
            counts = sparsity.zero_counts(decoder, split, "reference", config.decode,
                                          indices=indices)
            fractions[name] = counts / decoder.data.vocab_size
            sigs[name] = decoder.signature(split=split, along="reference")
            raw += sparsity.distribution_rows(decoder, split, "reference", counts, config.decode,
                                              len(indices))
        if fractions:
            rows += sparsity_rows(config.reproduce.corpus, split, fractions, signatures=sigs)
    write_rows(raw, out / "analysis" / "sparsity.csv")
    write_csv(rows, out, "fig_sparsity.csv")


def self_norm_figure(config: Config, out: Path, device: str) -> None:
    """Fig. self_norm: sum of the alpha-ReLU output at every beam-search step on test."""
    sums, sigs, summaries = {}, {}, []
    for name in [n for n in config.reproduce.transforms if n.endswith("-relu")]:
        decoder = _open(out, name, device)
        indices = split_indices(decoder, TEST, None)
        values = self_norm.output_sums(decoder, TEST, "beam", config.decode, indices=indices)
        sums[name], sigs[name] = values, decoder.signature(split=TEST, along="beam")
        summaries.append(self_norm.summary_row(decoder, TEST, "beam", values, config.decode,
                                               len(indices)))
    write_rows(summaries, out / "analysis" / "self_norm.csv")
    write_csv(self_norm_rows(config.reproduce.corpus, TEST, sums, signatures=sigs) if sums else [],
              out, "fig_self_norm.csv")


def inference_time(config: Config, out: Path, device: str) -> None:
    """Fig. infTime: time to translate the test set per transform and beam, the median of
    ``timing_repeats`` interleaved timings."""
    r = config.reproduce
    rows = bench_translate([_run(out, n) for n in r.transforms], list(r.beams), TEST,
                           device=device, max_sentences=r.timing_sentences or None,
                           repeats=r.timing_repeats)
    write_rows(rows, out / "analysis" / "bench_translate.csv")
    seconds = {(row["transform"], row["beam"]): row["seconds"] for row in rows}
    sigs = {row["transform"]: row["signature"] for row in rows}
    write_csv(tables.inference_time_rows(r.corpus, seconds, sigs), out, "fig_inference_time.csv")


def examples_and_sheets(config: Config, out: Path) -> None:
    """Translation examples where two transforms disagree, and blind human-eval sheets."""
    data, names = load_prepared(config.data.path), list(config.reproduce.transforms)
    sources, refs = data.sources(TEST), data.references(TEST)
    hyps = {name: _hypotheses(out, name) for name in names}
    pair = [n for n in SPARSE_FIRST if n in hyps] or names[:2]
    pair += [n for n in names if n not in pair][:2 - len(pair)]
    rows = (translation_examples_rows(sources, refs, pair[0], hyps[pair[0]], pair[1],
                                      hyps[pair[1]], n=6) if len(pair) == 2 else [])
    write_csv(rows, out, "translation_examples.csv")
    human_eval.export_sheets(sources, refs, hyps, out / "human_eval",
                             n_items=min(config.reproduce.human_eval_items, len(sources)))


def analysis_steps(config: Config, out: Path, device: str) -> list[Step]:
    """Translate, then every analysis; each is done when its CSV exists and is newer than the
    checkpoints (or translations) it was computed from."""
    names = config.reproduce.transforms
    steps = [_translate_step(config, out, name, device) for name in names]

    def models() -> list[Path]:
        return [resolve_checkpoint(_run(out, name)) for name in names]

    def hypotheses() -> list[Path]:
        return [_hyp_path(out, name) for name in names]

    table: list[tuple[str, str, Callable[[], list[Path]], Callable[[], None]]] = [
        ("score (Table 1)", "table1_bleu.csv", hypotheses, lambda: score(config, out, device)),
        ("empty check (Table 2)", "table2_empty.csv", models,
         lambda: empty(config, out, device)),
        ("sparsity", "fig_sparsity.csv", models, lambda: sparsity_figure(config, out, device)),
        ("self-normalization", "fig_self_norm.csv", models,
         lambda: self_norm_figure(config, out, device)),
        ("inference time", "fig_inference_time.csv", models,
         lambda: inference_time(config, out, device)),
        ("examples and human-eval sheets", "translation_examples.csv", hypotheses,
         lambda: examples_and_sheets(config, out)),
    ]
    steps += [Step(name, lambda csv=csv, inputs=inputs: up_to_date(out / csv, inputs()), run)
              for name, csv, inputs, run in table]
    return steps


def write_report(config: Config, out: Path, gpu_watts: float | None) -> Path:
    """The CSVs computable from the runs, every PNG and REPORT.md."""
    rebuilt = regenerate(out, gpu_watts=gpu_watts)
    assert rebuilt.report is not None
    return rebuilt.report

