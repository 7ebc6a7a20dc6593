"""``arelu translate``, ``score``, ``empty-check``, ``sparsity``, ``self-norm``: a
trained model's translations and the paper's analyses of them."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.markup import escape

from arelu_cli.cli.app import (CHECKPOINT, CHECKPOINTS, app, checkpoint_paths, console, decoding,
                               progress, stdin_is_piped)
from arelu_cli.data.textio import STDIO, read_text_lines
from arelu_cli.util.errors import UserError


@app.command()
@decoding
def translate(
    *,
    checkpoint: Optional[Path] = CHECKPOINT,
    input: Optional[Path] = typer.Option(None, "--input", help="Raw source text, one sentence a "
                                         "line; - reads stdin (the default when it is a pipe "
                                         "and --split is not given)."),
    split: Optional[str] = typer.Option(None, help="Translate this split of the prepared corpus instead."),
    out: Optional[Path] = typer.Option(None, help="Output file, or - for stdout (the default); "
                                       "OUT.json records the run. Messages go to stderr."),
    beam,
    n_best: int = typer.Option(1, "--n-best", help="Write the K best hypotheses per line as "
                               "'i ||| translation ||| score' (K <= beam)."),
    length_penalty, max_tokens, renormalize, data, device,
) -> None:
    """Translate raw text (--input) or a prepared split (--split) by greedy or beam search.

    Scores: the transform's own log outputs; zero-probability tokens are pruned from the beam.
    Lines longer than the model's positions are cut (a warning names them; OUT.json counts them).
    """
    from arelu_cli.decode import translate as tr

    if input is None and split is None and stdin_is_piped():
        input = Path(STDIO)  # `cat x.de | arelu translate > x.en`
    if (input is None) == (split is None):
        raise UserError("give exactly one of --input FILE (raw text, - for stdin) and --split "
                        "NAME (a split of the prepared corpus)")
    decoder = tr.open_checkpoint(checkpoint_paths([checkpoint] if checkpoint else [])[0], data, device)
    cfg = tr.decode_config(decoder, beam=beam, length_penalty=length_penalty, max_tokens=max_tokens)
    if (input is not None and out is not None and STDIO not in (str(input), str(out))
            and input.exists() and out.exists() and out.samefile(input)):
        raise UserError(f"--out {out} is the --input file: translating would overwrite the "
                        "source text; choose another --out")
    lines = read_text_lines(input) if input is not None else None
    bar, advance = progress(len(lines) if lines is not None else len(decoder.data.split(split)))
    with bar:
        result = tr.translate(decoder, cfg, lines=lines, split=split, n_best=n_best,
                              input_name=None if input is None else str(input),
                              renormalize=renormalize, progress=advance)
    tr.write_translation(result, out)
    stderr = Console(stderr=True)
    warning = tr.truncation_warning(result)
    if warning:
        stderr.print(f"[bold yellow]warning:[/] {escape(warning)}", highlight=False, soft_wrap=True)
    to_file = out is not None and str(out) != STDIO
    stderr.print(
        f"{decoder.transform.name}, beam {cfg.beam}: {len(result.hypotheses)} sentences in "
        f"{result.seconds:.2f} s ({result.sentences_per_s:.1f} sentences/s)"
        + (f"; wrote {escape(str(out))}" if to_file else ""), highlight=False, soft_wrap=True)


@app.command()
def score(
    hyp: Path = typer.Option(..., help="Detokenized translations, one a line (arelu translate --out)."),
    ref: Optional[Path] = typer.Option(
        None, help="References, one a line (default: the split named in HYP.json by arelu translate)."),
    out: Path = typer.Option(Path("results/scores.csv"), help="CSV to append the score's row to "
                             "(created if missing; an existing one must be an arelu score CSV)."),
) -> None:
    """Detokenized, case-sensitive BLEU and chrF (sacrebleu); append a row to a CSV.

    BLEU as in the paper (nrefs 1, case mixed, tok 13a, smooth exp); signatures printed.
    """
    from arelu_cli.analysis import score as scoring

    result = scoring.score_files(hyp, ref)
    scoring.append_row(scoring.score_row(result), out)
    console.print(f"BLEU {result.bleu:.2f}  [dim]{result.bleu_signature}[/]")
    console.print(f"chrF {result.chrf:.2f}  [dim]{result.chrf_signature}[/]")
    console.print(f"{result.sentences} sentences vs {escape(result.ref)}; appended to {out}")


@app.command()
def significance(
    hyp: list[Path] = typer.Option(..., help="The system's translations (arelu translate --out); "
                                   "repeat for several runs, e.g. seeds."),
    baseline: list[Path] = typer.Option(..., help="The baseline's translations of the same "
                                        "sentences, one per --hyp, in the same run order."),
    ref: Optional[Path] = typer.Option(
        None, help="References, one a line (default: the split named in each FILE.json)."),
    samples: int = typer.Option(1000, help="Bootstrap resamples (sacrebleu's default)."),
    seed: int = typer.Option(12345, help="Seed of the resamples (sacrebleu's default)."),
    out: Path = typer.Option(Path("results/significance.csv"), help="CSV to append the row to "
                             "(created if missing; an existing one must be an arelu "
                             "significance CSV)."),
) -> None:
    """Paired bootstrap of BLEU: is --hyp better than --baseline beyond the test set's chance?

    Several runs per side (seeds) are tested joined. sacrebleu's --paired-bs on the paper's BLEU; with several runs a resample draws test
    sentences with all their runs' translations (a cluster bootstrap), so a hard sentence
    is not counted as independent evidence once per seed.
    """
    from arelu_cli.analysis import score as scoring

    row = scoring.compare_files(hyp, baseline, ref, samples, seed)
    scoring.append_row(row, out, scoring.SIGNIFICANCE_COLUMNS, "significance")
    runs = f" ({row['runs']} runs joined)" if row["runs"] > 1 else ""
    console.print(f"BLEU {row['bleu']:.2f} vs baseline {row['baseline_bleu']:.2f}{runs}: "
                  f"delta {row['delta']:+.2f} [{row['delta_low']:+.2f}, {row['delta_high']:+.2f}]"
                  f", p = {row['p_value']:.4f}  [dim]{row['bootstrap_signature']}[/]")
    if row["runs"] > 1:
        console.print(f"per run: {row['run_bleu']} vs baseline {row['baseline_run_bleu']}")
    console.print(f"{row['sentences']} sentences vs {escape(row['ref'])}; appended to {out}")


@app.command("empty-check")
@decoding
def empty_check(
    *,
    checkpoint: list[Path] = CHECKPOINTS,
    split: list[str] = typer.Option(["dev"], help="Split(s) to check (paper: dev). Repeatable."),
    beam, length_penalty, max_tokens, renormalize, max_sentences, seed, data, device,
    out: Path = typer.Option(Path("results/empty_check.csv"), help="Summary CSV, one row per "
                             "checkpoint and split; OUT_sentences.csv gets both scores per sentence."),
) -> None:
    """Paper Table 2: % of sentences whose empty translation outscores the beam hypothesis."""
    from arelu_cli.analysis import empty_check as check
    from arelu_cli.util.results import write_rows
    from arelu_cli.decode.translate import decode_config, open_checkpoint

    summaries, details = [], []
    for path in checkpoint_paths(checkpoint):
        decoder = open_checkpoint(path, data, device)
        cfg = decode_config(decoder, beam=beam, length_penalty=length_penalty, max_tokens=max_tokens)
        rows, sentences = check.measure(decoder, split, cfg, renormalize=renormalize,
                                        max_sentences=max_sentences, seed=seed)
        summaries += rows
        details += sentences
    frame = write_rows(summaries, out)
    write_rows(details, out.with_name(f"{out.stem}_sentences.csv"))
    for r in frame.to_dict("records"):
        console.print(f"{r['transform']} {r['split']}: empty better in {r['empty_better']}/"
                      f"{r['sentences']} ({r['empty_better_pct']:.1f}%), empty non-zero in "
                      f"{r['empty_nonzero_pct']:.1f}%, beam output empty in {r['beam_empty']}",
                      soft_wrap=True)
    console.print(f"wrote {out}")


@app.command()
@decoding
def sparsity(
    *,
    checkpoint: list[Path] = CHECKPOINTS,
    split: list[str] = typer.Option(["test"], help="Split(s) to measure, e.g. --split test "
                                    "--split train. Repeatable."),
    along: str = typer.Option("both", help="Steps teacher-forced on the references, along the "
                              "beam output, or both."),
    beam, max_tokens, max_sentences, seed, data, device,
    out: Optional[Path] = typer.Option(
        None, help="CSV: steps per number of zeros (default results/sparsity.csv); with "
        "--attention, zeros per layer and kind (default results/attention_sparsity.csv)."),
    plot: bool = typer.Option(False, "--plot", help="Also draw OUT.png (the paper's histogram; "
                              "with --attention, cross-attention heatmaps)."),
    attention: bool = typer.Option(
        False, "--attention", help="Measure the attention weights instead of the output: the "
        "share of exact zeros per layer and kind (encoder self, decoder self, cross), and the "
        "head-averaged cross-attention of --heatmaps sentences in OUT_heatmaps.csv."),
    heatmaps: int = typer.Option(3, help="--attention: sentences of the first split (beam "
                                 "output when measured) drawn in the heatmaps."),
) -> None:
    """Paper Figs. sparsity: the number of zero output components at every decoding step."""
    from arelu_cli.studies import plots
    from arelu_cli.analysis import sparsity as sp
    from arelu_cli.analysis.steps import parse_along
    from arelu_cli.util.results import write_rows
    from arelu_cli.decode.translate import decode_config, open_checkpoint

    alongs, rows = parse_along(along), []
    if attention:
        from arelu_cli.analysis import attention_sparsity as att

        out = out or Path("results/attention_sparsity.csv")
        frame, written = att.run(checkpoint_paths(checkpoint), split, alongs, out, data=data,
                                 device=device, beam=beam, max_tokens=max_tokens,
                                 max_sentences=max_sentences, seed=seed, heatmaps=heatmaps)
        if plot and heatmaps:
            written.append(plots.plot_attention_heatmaps(written[-1], out.with_suffix(".png")))
        for r in frame.to_dict("records"):
            console.print(f"{r['attention']} {r['split']} ({r['along']}) {r['kind']} layer "
                          f"{r['layer']}: {100 * r['zero_fraction']:.1f}% of weights zero, "
                          f"{100 * r['empty_fraction']:.1f}% of queries empty", soft_wrap=True)
        console.print("wrote " + ", ".join(map(str, written)))
        return
    out = out or Path("results/sparsity.csv")
    for path in checkpoint_paths(checkpoint):
        decoder = open_checkpoint(path, data, device)
        cfg = decode_config(decoder, beam=beam, max_tokens=max_tokens)
        rows += sp.measure(decoder, split, alongs, cfg, max_sentences=max_sentences, seed=seed)
    frame = write_rows(rows, out)
    for r in sp.summary(frame).to_dict("records"):
        console.print(f"{r['transform']} {r['split']} ({r['along']}): {r['steps']} steps, mean "
                      f"{r['mean_zeros']:.1f} of {r['vocab']} zero ({100 * r['mean_zero_fraction']:.1f}%), "
                      f"median {r['median_zeros']:.0f}, range {r['min_zeros']}-{r['max_zeros']}",
                      soft_wrap=True)
    console.print(f"wrote {out}" + (f" and {plots.plot_step_sparsity(out, out.with_suffix('.png'))}"
                                    if plot else ""))


@app.command("self-norm")
@decoding
def self_norm(
    *,
    checkpoint: list[Path] = CHECKPOINTS,
    split: list[str] = typer.Option(["test"], help="Split(s) to measure. Repeatable."),
    along: str = typer.Option("beam", help="Steps along the beam output (the paper's), "
                              "teacher-forced on the references, or both."),
    beam, max_tokens, max_sentences, seed, data, device,
    out: Path = typer.Option(Path("results/self_norm.csv"), help="Summary CSV (mean, std, "
                             "quantiles); OUT_hist.csv gets the histogram."),
    plot: bool = typer.Option(False, "--plot", help="Also draw OUT.png from the histogram."),
) -> None:
    """Paper Fig. self_norm: the distribution of sum_i alpha-ReLU_i(z) per decoding step."""
    from arelu_cli.studies import plots
    from arelu_cli.analysis import self_norm as sn
    from arelu_cli.analysis.steps import parse_along
    from arelu_cli.util.results import write_rows
    from arelu_cli.decode.translate import decode_config, open_checkpoint

    alongs, summaries, histograms = parse_along(along), [], []
    for path in checkpoint_paths(checkpoint):
        decoder = open_checkpoint(path, data, device)
        cfg = decode_config(decoder, beam=beam, max_tokens=max_tokens)
        rows, hist = sn.measure(decoder, split, alongs, cfg, max_sentences=max_sentences, seed=seed)
        summaries += rows
        histograms += hist
    frame = write_rows(summaries, out)
    hist_csv = out.with_name(f"{out.stem}_hist.csv")
    write_rows(histograms, hist_csv)
    for r in frame.to_dict("records"):
        console.print(f"{r['transform']} {r['split']} ({r['along']}): {r['steps']} steps, sum "
                      f"mean {r['mean']:.3f}, std {r['std']:.3f}, 5-95% [{r['q05']:.3f}, "
                      f"{r['q95']:.3f}]", soft_wrap=True)
    console.print(f"wrote {out}, {hist_csv}" + (
        f" and {plots.plot_step_self_norm(hist_csv, out.with_suffix('.png'))}" if plot else ""))
