"""``arelu reproduce``, ``arelu study`` and ``arelu report``: the commands of the studies
(:mod:`arelu_cli.studies`), all on one runner."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path
from typing import Optional

import typer

from arelu_cli.cli.app import app, console

SET_HELP = "SECTION.KEY=VALUE: override any recipe key, e.g. {}. Repeatable."
OUT = typer.Option(None, help="Results folder (default results/NAME).")
SOURCE = typer.Option(None, help="Folder with the corpus files in the publisher's layout: "
                      "prepare \\[data] path from them first (see `arelu prepare`).")
ALLOW_DATA_CHANGE = typer.Option(
    False, "--allow-data-change", help="Resume unfinished runs even though the prepared data "
    "folder changed since they began (recorded in each run's record).")


def _config(recipe: str, overrides: list[str]):
    from arelu_cli.config import load_config, parse_override, resolve_recipe

    path = resolve_recipe(recipe)
    return path, load_config(path, {(sec, key): value
                                    for sec, key, value in map(parse_override, overrides)})


def _run(config, recipe: str, path: Path, out: Optional[Path], source: Optional[Path],
         allow_data_change: bool) -> None:
    """Run the study of ``config`` into ``out`` (default ``results/NAME``); ``recipe``: the
    recipe as the user named it (what ``commands.txt`` and ``study.json`` record)."""
    from arelu_cli.studies.contract import Context
    from arelu_cli.studies.core import trainer
    from arelu_cli.studies.runner import run

    context = Context(console, trainer(path.stem, console, allow_data_change), recipe,
                      "arelu " + " ".join(sys.argv[1:]), source)
    report = run(config, out or Path("results") / path.stem, context)
    console.print(f"report: {report}")


@app.command()
def reproduce(
    recipe: str = typer.Argument(..., help="Recipe name (toy, multi30k, iwslt14, wmt14-en-de, "
                                 "wmt13-en-ru: recipes/NAME.toml) or a TOML file."),
    out: Optional[Path] = OUT,
    source: Optional[Path] = SOURCE,
    set_: list[str] = typer.Option([], "--set", help=SET_HELP.format(
        "--set reproduce.seeds=[1,2,3] or --set reproduce.train_minutes=6")),
) -> None:
    """The paper's whole grid for one recipe: every table, figure and REPORT.md (resumable).

    Prepare, tau, train every transform, translate, score, empty-check, sparsity, self-norm,
    timing, then every CSV, PNG and REPORT.md. Steps whose outputs exist are skipped, so
    running it again continues an interrupted grid.
    """
    from arelu_cli.util.errors import UserError

    path, config = _config(recipe, set_)
    if config.study.kind not in ("", "paper"):
        raise UserError(f"{path} is a recipe of the {config.study.kind} study; run it with "
                        f"arelu study {recipe}")
    config = dataclasses.replace(config, study=dataclasses.replace(config.study, kind="paper"))
    _run(config, recipe, path, out, source, False)


@app.command()
def study(
    recipe: str = typer.Argument(..., help="A recipe whose \\[study] kind names the study: "
                                 "multi30k-study, multi30k-attention, ptb-lm-study, "
                                 "ptb-convert (recipes/NAME.toml) or a TOML file."),
    out: Optional[Path] = OUT,
    source: Optional[Path] = SOURCE,
    corpus: Optional[str] = typer.Option(None, help="`arelu prepare` corpus name used with "
                                         "--source (default: the \\[data] path's folder name)."),
    set_: list[str] = typer.Option([], "--set", help=SET_HELP.format("--set study.seeds=[1,2]")),
    allow_data_change: bool = ALLOW_DATA_CHANGE,
) -> None:
    """Run the study a recipe's \\[study] kind names (tuned, attention, lm, convert), resumable.

    Every run has a step budget, so its numbers cannot depend on what else the machine runs;
    a timing stage wants an idle machine. Stages whose outputs exist are skipped: run the
    same command again to continue. `arelu report` rebuilds the report from the folder.
    """
    from arelu_cli.config import parse_override, recipe_tables, resolve_recipe
    from arelu_cli.data.prepare import PrepareRequest, prepare
    from arelu_cli.data.prepared import load_prepared
    from arelu_cli.studies.runner import load, studies
    from arelu_cli.util.errors import UserError

    path = resolve_recipe(recipe)
    found = load(recipe_tables(path, {(sec, key): value
                                      for sec, key, value in map(parse_override, set_)}))
    if found is None:
        kinds = ", ".join(sorted(k for k in studies() if k != "paper"))
        raise UserError(f"{path} names no study: set [study] kind to one of {kinds} in it (the "
                        f"paper's grid of a recipe is arelu reproduce {recipe})")
    study, config = found
    study.check(config)  # a recipe of another kind, before any data
    if source is not None:
        prepare(PrepareRequest(corpus or Path(config.data.path).name, Path(config.data.path),
                               source=source), log=console.print)
    if config.study.kind != "paper":
        load_prepared(config.data.path)  # a missing corpus is one line before any folder
    _run(config, recipe, path, out, None, allow_data_change)


@app.command("report")
def report(
    results_dir: Path = typer.Argument(..., help="A study's results folder (the --out of "
                                       "arelu reproduce or arelu study)."),
    set_: list[str] = typer.Option([], "--set", help=SET_HELP.format(
        "--set reproduce.gpu_watts=250") + " Only for this report."),
) -> None:
    """Rebuild a study folder's tables, figures and REPORT.md from its files (no training)."""
    from arelu_cli.config import parse_override
    from arelu_cli.studies.runner import report as rebuild

    done = rebuild(results_dir, {(sec, key): value
                                 for sec, key, value in map(parse_override, set_)})
    console.print(f"wrote {done}")
