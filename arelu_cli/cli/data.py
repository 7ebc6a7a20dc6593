"""``arelu prepare``: get a corpus, clean it, learn BPE, write a prepared folder."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from rich.console import Console
from rich.markup import escape

from arelu_cli.cli.app import app, console


@app.command()
def prepare(
    corpus: str = typer.Argument(..., help="toy, multi30k, iwslt14, wmt14-en-de, wmt13-en-ru or custom; language "
                                "modelling: ptb, tinyshakespeare, text (your {train,dev,test}.txt) or toy-lm."),
    out: Optional[Path] = typer.Option(None, help="Prepared folder to write (default: data/CORPUS)."),
    source: Optional[Path] = typer.Option(
        None, help="Folder with the corpus files in the publisher's layout; without it, download."),
    split_file: list[str] = typer.Option(
        [], "--split-file", help="SPLIT=SRC_FILE,TGT_FILE: read a split (train, dev, test) from "
        "these aligned plain-text files instead. Repeatable."),
    src_lang: Optional[str] = typer.Option(None, help="Source language code (default: the corpus's)."),
    tgt_lang: Optional[str] = typer.Option(None, help="Target language code (default: the corpus's)."),
    merges: Optional[int] = typer.Option(None, help="BPE merges (default: the paper's recipe for the corpus)."),
    joint: bool = typer.Option(True, "--joint/--separate", help="One BPE vocabulary for both languages, or one each."),
    seed: int = typer.Option(0, help="Seed of the toy generator."),
    train_size: Optional[int] = typer.Option(
        None, help="Toy: training pairs (toy-lm: lines) to generate (50000); others: keep the first N "
        "cleaned pairs (lines)."),
    eval_size: Optional[int] = typer.Option(None, help="Toy and toy-lm: dev and test pairs (lines) each, at least 1 (1000)."),
    toy_vocab: Optional[int] = typer.Option(None, help="Toy: content words per language, at least 100 (400)."),
    max_words: Optional[int] = typer.Option(None, help="Drop training pairs with a side longer than this."),
    max_ratio: Optional[float] = typer.Option(None, help="Drop training pairs whose word-count ratio exceeds this."),
    force: bool = typer.Option(
        False, "--force", help="Rebuild, even replacing a folder prepared from another corpus "
        "or other files (never a folder or file that arelu prepare did not write)."),
) -> None:
    """Get a corpus, clean it, learn BPE and write a prepared folder (a no-op when up to date)."""
    from arelu_cli.data import prepare as prep

    request = prep.PrepareRequest(
        corpus=corpus, out=out or Path("data") / corpus, source=source,
        split_files=dict(prep.parse_split_file(item) for item in split_file),
        src_lang=src_lang, tgt_lang=tgt_lang, merges=merges, joint=joint, seed=seed, force=force,
        train_size=train_size, eval_size=eval_size, toy_vocab=toy_vocab,
        max_words=max_words, max_ratio=max_ratio)
    with console.status(f"preparing {corpus}") as status:
        result = prep.prepare(request, log=lambda step: status.update(f"{corpus}: {step}"))
    if not result.rebuilt:
        console.print(f"{result.path} is up to date (same inputs and options; --force rebuilds)",
                      markup=False, soft_wrap=True)
        return
    console.print(prep.summary_table(result))
    for text in prep.warnings(result.meta, merges_given=merges is not None):
        Console(stderr=True).print(f"[bold yellow]warning:[/] {escape(text)}", highlight=False,
                                   soft_wrap=True)
