"""``arelu reproduce``, ``arelu study``, ``arelu attention-study`` and ``arelu report``: the
multi-step commands."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import typer

from arelu_cli.cli.app import app, console


SET_HELP = "SECTION.KEY=VALUE: override any recipe key, e.g. {}. Repeatable."
OUT = typer.Option(None, help="Results folder (default results/NAME).")
STUDY_SOURCE = typer.Option(
    None, help="Corpus files in the publisher's layout: prepare \\[data] path from them first.")
ALLOW_DATA_CHANGE = typer.Option(
    False, "--allow-data-change", help="Resume unfinished runs even though the prepared data "
    "folder changed since they began (recorded in each run's config.json).")


@app.command()
def reproduce(
    recipe: str = typer.Argument(..., help="Recipe name (toy, multi30k, iwslt14, wmt14-en-de, "
                                 "wmt13-en-ru: recipes/NAME.toml) or a TOML file."),
    out: Optional[Path] = OUT,
    source: Optional[Path] = typer.Option(
        None, help="Folder with the corpus files in the publisher's layout (see `arelu prepare`)."),
    set_: list[str] = typer.Option([], "--set", help=SET_HELP.format(
        "--set reproduce.seeds=[1,2,3] or --set reproduce.train_minutes=6")),
) -> None:
    """The paper's whole grid for one recipe: prepare, tau, train every transform, translate,
    score, empty-check, sparsity, self-norm, timing, then every CSV, PNG and REPORT.md.

    Steps whose outputs exist are skipped, so running it again continues an interrupted grid.
    """
    from arelu_cli.config import resolve_recipe
    from arelu_cli.pipeline.reproduce import Request, reproduce as run_grid

    path = resolve_recipe(recipe)
    run_grid(Request(path, out or Path("results") / path.stem, source, tuple(set_),
                     command="arelu " + " ".join(sys.argv[1:])), console)


def corpus_option(default: str) -> typer.models.OptionInfo:
    return typer.Option(default, help="`arelu prepare` corpus name used with --source.")


def run_study(plan, what: str, recipe: str, out: Optional[Path], source: Optional[Path],
              corpus: str, overrides: list[str], allow_data_change: bool) -> None:
    """Run the study ``plan`` (``plan(config, out, console, recipe=, allow_data_change=)``)
    of the recipe with its ``--set`` overrides into ``out`` (default ``results/NAME``); with
    ``source``, its ``[data] path`` prepared from the corpus files first."""
    from arelu_cli.config import load_config, parse_override, resolve_recipe
    from arelu_cli.data.prepare import PrepareRequest, prepare as run_prepare
    from arelu_cli.data.prepared import load_prepared

    path = resolve_recipe(recipe)
    config = load_config(path, {(sec, key): value
                                for sec, key, value in map(parse_override, overrides)})
    if source is not None:
        run_prepare(PrepareRequest(corpus, Path(config.data.path), source=source),
                    log=console.print)
    load_prepared(config.data.path)  # a missing corpus is one line before any folder is made
    report = plan(config, out or Path("results") / path.stem, console, recipe=path.stem,
                  allow_data_change=allow_data_change)
    console.print(f"{what} report: {report}")


@app.command()
def study(
    recipe: str = typer.Argument(..., help="Recipe with \\[sweep] and \\[study] tables, e.g. "
                                 "multi30k-study (recipes/NAME.toml) or a TOML file."),
    out: Optional[Path] = OUT,
    source: Optional[Path] = STUDY_SOURCE,
    corpus: str = corpus_option("multi30k"),
    set_: list[str] = typer.Option([], "--set", help=SET_HELP.format("--set study.seeds=[1,2]")),
    allow_data_change: bool = ALLOW_DATA_CHANGE,
) -> None:
    """A comparison a reviewer accepts: a tuning sweep selected on dev BLEU, every transform
    at several seeds, convergence, test BLEU at equal steps and equal time, paired bootstrap.

    Every run has a step budget, so its BLEU cannot depend on what else the machine runs; the
    one timing stage (bench_train.csv, for equal time) wants an idle machine. Stages whose
    outputs exist are skipped: run the same command again to continue.
    """
    from arelu_cli.pipeline.study import study as plan

    run_study(plan, "study", recipe, out, source, corpus, set_, allow_data_change)


@app.command("attention-study")
def attention_study(
    recipe: str = typer.Argument(..., help="Recipe with an \\[attention_study] table, e.g. "
                                 "multi30k-attention (recipes/NAME.toml) or a TOML file."),
    out: Optional[Path] = OUT,
    source: Optional[Path] = STUDY_SOURCE,
    corpus: str = corpus_option("multi30k"),
    set_: list[str] = typer.Option([], "--set", help=SET_HELP.format(
        "--set attention_study.variants=[\"softmax\",\"1.5-relu-renormalized\"]")),
    allow_data_change: bool = ALLOW_DATA_CHANGE,
) -> None:
    """Beyond the paper: which attention transform the model learns with. One model per
    \\[attention_study] variant (softmax, sparsemax, 1.5-entmax, 1.5-ReLU raw / estimated tau /
    renormalized), the output transform fixed, the same step budget: dev BLEU and loss curves
    (divergence flagged), test BLEU with paired bootstrap, attention sparsity per layer,
    heatmaps, training and decoding speed, REPORT.md.

    Every run has a step budget, so its BLEU cannot depend on what else the machine runs; the
    timing stage (bench_train.csv, bench_decode.csv) wants an idle machine. Stages whose
    outputs exist are skipped: run the same command again to continue.
    """
    from arelu_cli.pipeline.attention_study import attention_study as plan

    run_study(plan, "attention study", recipe, out, source, corpus, set_, allow_data_change)


@app.command("lm-study")
def lm_study(
    recipe: str = typer.Argument(..., help="Language-model recipe with \\[sweep], \\[study] and "
                                 "\\[lm_study] tables, e.g. ptb-lm-study (recipes/NAME.toml) or a "
                                 "TOML file."),
    out: Optional[Path] = OUT,
    source: Optional[Path] = STUDY_SOURCE,
    corpus: str = corpus_option("ptb"),
    set_: list[str] = typer.Option([], "--set", help=SET_HELP.format("--set study.seeds=[1,2]")),
    allow_data_change: bool = ALLOW_DATA_CHANGE,
) -> None:
    """Open-ended generation: language models of each output transform, lr tuned on dev,
    trained at several seeds; every model x decoding measured by lm-eval (epsilon-perplexity,
    sp, JSD, distinct-n, repetition, Zipf vs human); paired bootstrap over test prompts;
    REPORT.md.

    Every run has a step budget, so its numbers cannot depend on what else the machine runs.
    Stages whose outputs exist are skipped: run the same command again to continue.
    """
    from arelu_cli.pipeline.lm_study import lm_study as plan

    run_study(plan, "LM study", recipe, out, source, corpus, set_, allow_data_change)


@app.command("report")
def report(
    results_dir: Path = typer.Argument(..., help="Results folder (what `arelu reproduce` writes)."),
    runs: Optional[Path] = typer.Option(None, help="Folder of training runs, one per transform "
                                        "(default: RESULTS_DIR/runs)."),
    sweep_runs: Optional[Path] = typer.Option(
        None, help="Folder of the alpha-ReLU runs with different tau (default: RESULTS_DIR/tau-sweep)."),
    gpu_watts: Optional[float] = typer.Option(
        None, help="Power of one GPU in W, for the kWh column (paper: 250, 320, 300); "
        "without it kWh stays empty."),
    n_gpus: Optional[int] = typer.Option(None, help="GPUs per run for kWh (default: the run's processes)."),
    tau_csv: list[Path] = typer.Option([], "--tau-csv", help="An `arelu estimate-tau` CSV whose "
                                       "rows join Table 3 (e.g. the empirical tau). Repeatable."),
    command: list[str] = typer.Option([], "--command", help="A command that made this folder, "
                                      "listed in REPORT.md after RESULTS_DIR/commands.txt. Repeatable."),
) -> None:
    """Regenerate the CSVs computable here, draw every figure, and write REPORT.md; for a
    language-model study's folder (`arelu lm-study`), its tables and REPORT.md from its files."""
    import shlex

    from arelu_cli.util.errors import UserError
    from arelu_cli.pipeline.lm_report import report_settings, write_report
    from arelu_cli.report.build import regenerate

    lm = report_settings(results_dir)
    if lm is not None:
        given = [flag for flag, value in (("--runs", runs), ("--sweep-runs", sweep_runs),
                                          ("--gpu-watts", gpu_watts), ("--n-gpus", n_gpus),
                                          ("--tau-csv", tau_csv), ("--command", command)) if value]
        if given:
            raise UserError(f"{results_dir} is a language-model study, whose report takes no "
                            f"{', '.join(given)}; run `arelu report {results_dir}` alone")
        console.print(f"wrote {write_report(results_dir, **lm)}")
        return

    this = ["arelu", "report", str(results_dir)]
    for flag, value in (("--runs", runs), ("--sweep-runs", sweep_runs),
                        ("--gpu-watts", gpu_watts), ("--n-gpus", n_gpus)):
        this += [flag, str(value)] if value is not None else []
    this += [part for path in tau_csv for part in ("--tau-csv", str(path))]
    done = regenerate(results_dir, [*command, shlex.join(this)], runs_dir=runs,
                      sweep_dir=sweep_runs, gpu_watts=gpu_watts, n_gpus=n_gpus, tau_csvs=tau_csv)
    for path in [*done.csvs, *done.pngs]:
        console.print(f"wrote {path}")
    console.print(f"wrote {done.report}")
