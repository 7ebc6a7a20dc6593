"""``arelu human-eval export|score``: blind human evaluation sheets and their scores."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from arelu_cli.cli.app import console, human_eval_app
from arelu_cli.util.errors import UserError


@human_eval_app.command("export")
def human_eval_export(
    source: Path = typer.Option(..., help="Source sentences of the test set, one a line."),
    reference: Path = typer.Option(..., help="Reference translations, aligned with --source."),
    system: list[str] = typer.Option(
        ..., "--system", help="NAME=FILE: a system's detokenized translations, aligned with "
        "--source. Repeatable (the paper: softmax, 1.5-entmax, 1.5-relu)."),
    out: Path = typer.Option(Path("results/human_eval"), help="Folder for the sheets and the "
                             "instructions (what annotators get); the key goes to OUT-key/."),
    items: int = typer.Option(135, help="Items per annotator (paper: 135)."),
    annotators: str = typer.Option("a1,a2", help="Annotator names, comma-separated."),
    shared: float = typer.Option(1 / 3, help="Fraction of each sheet every annotator gets, for "
                                 "Cohen's kappa (paper: 45 of 135)."),
    seed: int = typer.Option(0, help="Seed of the sample and of the candidate shuffles."),
) -> None:
    """Write one blind sheet per annotator (candidates incl. the reference, shuffled) and a key."""
    from arelu_cli.util.options import parse_list
    from arelu_cli.data.textio import read_aligned, read_lines
    from arelu_cli.studies.paper import human_eval

    sources, references = read_aligned(source, reference)
    systems = {}
    for item in system:
        name, sep, path = item.partition("=")
        if not sep or not name or not path:
            raise UserError(f"--system takes NAME=FILE, got {item!r}")
        systems[name] = read_lines(Path(path))
    names = parse_list(annotators, str, "--annotators")
    # Filled-in sheets are the annotators' work, and a new key would no longer match them.
    taken = [path for path in (human_eval.key_path(out), out / "INSTRUCTIONS.txt",
                               *(out / f"sheet_{name}.csv" for name in names)) if path.exists()]
    if taken:
        raise UserError(f"{out} already holds {taken[0].name} of an earlier export (its sheets may "
                        "be filled in); choose another --out or move those files away")
    done = human_eval.export_sheets(sources, references, systems, out, n_items=items,
                                    annotators=names, seed=seed, shared_fraction=shared)
    for name, path in done.sheets.items():
        console.print(f"wrote {path} for {name} ({items} items, {done.n_shared} shared)")
    console.print(f"wrote {done.key}: keep it from the annotators; give them the folder "
                  f"{out} (sheets and INSTRUCTIONS.txt)")


@human_eval_app.command("score")
def human_eval_score(
    sheets: list[Path] = typer.Argument(..., help="The filled sheets (CSV)."),
    key: Path = typer.Option(..., help="key.csv written by `arelu human-eval export`."),
    out: Optional[Path] = typer.Option(
        None, help="Folder for table_human_eval.csv and human_eval_kappa.csv (default: the "
        "results folder that holds the key's folder, where `arelu report` reads them)."),
) -> None:
    """Mean and std per system, Cohen's kappa on the shared items; write CSV."""
    from arelu_cli.studies.paper import human_eval
    from arelu_cli.studies.paper.columns import COLUMNS
    from arelu_cli.util.results import write_rows

    systems, agreement = human_eval.score_sheets(sheets, key)
    folder = out or key.parent.parent
    write_rows(systems, folder / "table_human_eval.csv", COLUMNS["table_human_eval.csv"])
    write_rows(agreement, folder / "human_eval_kappa.csv", COLUMNS["human_eval_kappa.csv"])
    print_scores(systems, agreement)
    console.print(f"wrote {folder / 'table_human_eval.csv'} and {folder / 'human_eval_kappa.csv'}")


def print_scores(systems: list[dict], agreement: list[dict]) -> None:
    """Mean ± std per system and kappa per annotator pair, as rich tables."""
    from rich.table import Table

    table = Table(title="human evaluation, 4-point meaning scale (paper Table tab:human)")
    for col in ("system", "judgements", "mean", "std"):
        table.add_column(col, justify="right")
    for r in systems:
        table.add_row(r["system"], str(r["n"]), f"{r['mean']:.2f}",
                      "-" if r["std"] is None else f"{r['std']:.2f}")
    console.print(table)
    for r in agreement:
        console.print(f"Cohen's kappa {r['annotator_a']}/{r['annotator_b']}: {r['kappa']:.3f} "
                      f"unweighted, {r['kappa_linear']:.3f} linear, over {r['n_judgements']} "
                      f"judgements of {r['n_items']} shared items (paper: 0.56)")
    if not agreement:
        console.print("no shared item was scored by two annotators: no kappa")
