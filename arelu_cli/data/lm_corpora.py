"""The language-modelling corpora ``arelu prepare`` knows, and how each is read and split.

* ``ptb``: the Penn Treebank in Mikolov's split (``ptb.{train,valid,test}.txt`` in
  ``--source``): already lowercased and tokenized, with its own ``<unk>`` and a 10K-word
  vocabulary, so it is tokenized by words (:mod:`arelu_cli.data.words`), no BPE.
* ``tinyshakespeare``: one raw file (``input.txt``) with no published split. Ours is a
  document split at speaker boundaries: the first 90% of lines for training, the next 5% for
  dev, the last 5% for test, each cut moved forward to the first line that starts a speaker's
  turn (the line after an empty one), so that no turn is split. Byte-level BPE.
* ``text``: a user's plain text, ``{train,dev,test}.txt`` in ``--source``; byte-level BPE.
* ``toy-lm``: generated, no files: the target side of the toy translation corpus
  (:mod:`arelu_cli.data.toy`, a made-up language with inflection and agreement),
  tokenized by words. Small and fast: the corpus of the tests.

Every line is normalized as translation text is (:func:`arelu_cli.data.clean.normalize`) and
kept, empty lines included: a line is its tokens followed by one end-of-sentence token, so an
empty line (a paragraph break) is an end-of-sentence token alone. Reading a file fails as for
translation corpora: missing, empty or non-UTF-8 files are one-line errors; a last line
without its newline is read as a line.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from arelu_cli.data import toy
from arelu_cli.data.clean import normalize_all
from arelu_cli.data.corpora import SPLITS
from arelu_cli.data.textio import read_lines
from arelu_cli.util.errors import UserError

Tokens = Literal["words", "bpe"]
SHARES = (0.90, 0.05)
"""tinyshakespeare: the shares of lines of train and dev (test gets the rest)."""


@dataclass(frozen=True)
class LMSpec:
    """What ``prepare`` needs to know about one language-modelling corpus."""

    name: str
    tokens: Tokens
    about: str
    files: dict[str, str]
    """Split -> file name inside ``--source`` (one file for all splits: a document split)."""
    merges: int = 0
    """BPE merges (``tokens = "bpe"`` only)."""


LM_CORPORA: dict[str, LMSpec] = {spec.name: spec for spec in (
    LMSpec("ptb", "words", "Penn Treebank, Mikolov's split (ptb.{train,valid,test}.txt)",
           {"train": "ptb.train.txt", "dev": "ptb.valid.txt", "test": "ptb.test.txt"}),
    LMSpec("tinyshakespeare", "bpe", "Tiny Shakespeare (input.txt), split 90/5/5 by lines at "
           "speaker boundaries", {s: "input.txt" for s in SPLITS}, merges=4000),
    LMSpec("text", "bpe", "your plain text: {train,dev,test}.txt in --source",
           {s: f"{s}.txt" for s in SPLITS}, merges=8000),
    LMSpec("toy-lm", "words", "generated: the toy corpus's target language, no download", {}),
)}


def is_lm(corpus: str) -> bool:
    return corpus in LM_CORPORA


def speaker_cut(lines: list[str], at: int) -> int:
    """The first index >= ``at`` that starts a speaker's turn (follows an empty line), or
    ``len(lines)`` when none does."""
    for i in range(max(at, 1), len(lines)):
        if lines[i - 1] == "" and lines[i] != "":
            return i
    return len(lines)


def document_split(lines: list[str]) -> tuple[dict[str, list[str]], dict[str, list[int]]]:
    """tinyshakespeare's split (see the module) and each split's [first, end) line numbers."""
    first = speaker_cut(lines, round(SHARES[0] * len(lines)))
    second = speaker_cut(lines, round((SHARES[0] + SHARES[1]) * len(lines)))
    bounds = {"train": [0, first], "dev": [first, second], "test": [second, len(lines)]}
    empty = [split for split, (a, b) in bounds.items() if a == b]
    if empty:
        raise UserError(f"the text has too few speaker turns for a {empty[0]} split (turns are "
                        "separated by empty lines); give a longer text")
    return {split: lines[a:b] for split, (a, b) in bounds.items()}, bounds


def source_files(spec: LMSpec, source: Path | None) -> list[Path]:
    """The files ``spec`` reads from ``source`` (none for toy-lm); a one-line error naming
    what is missing."""
    if spec.name == "toy-lm":
        return []
    names = sorted(set(spec.files.values()))
    if source is None:
        raise UserError(f"{spec.name} needs --source: the folder holding {', '.join(names)}")
    missing = [str(source / name) for name in names if not (source / name).is_file()]
    if missing:
        raise UserError(f"{spec.name}: missing {', '.join(missing)}; --source must hold "
                        f"{', '.join(names)}")
    return [source / name for name in names]


def read_lm(spec: LMSpec, source: Path | None, config: toy.ToyConfig | None
            ) -> tuple[dict[str, list[str]], dict]:
    """Normalized lines per split, and what the split was (meta.json's ``split``); the
    files are those :func:`source_files` found."""
    if spec.name == "toy-lm":
        generated = toy.generate(config)
        return {s: normalize_all(generated[s][1]) for s in SPLITS}, {"kind": "generated"}
    if len(set(spec.files.values())) == 1:
        lines, bounds = document_split(normalize_all(read_lines(source / spec.files["train"])))
        return lines, {"kind": "document", "shares": list(SHARES), "lines": bounds,
                       "rule": "first 90% / next 5% / last 5% of lines, each cut moved to the "
                               "next line that starts a speaker's turn"}
    return ({s: normalize_all(read_lines(source / spec.files[s])) for s in SPLITS},
            {"kind": "files", "files": dict(spec.files)})
