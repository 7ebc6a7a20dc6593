"""What ``arelu prepare`` is asked (:class:`PrepareRequest`) and answers
(:class:`PrepareResult`), and the check of its output folder: shared by the translation
pipeline (:mod:`arelu_cli.data.prepare`) and the language-modelling one
(:mod:`arelu_cli.data.lm_prepare`)."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from arelu_cli.data.prepared import foreign_files, read_meta
from arelu_cli.util.errors import UserError

Log = Callable[[str], None]

MAX_MERGES = 1_000_000
"""The most BPE merges ``--merges`` may ask for: four times the largest vocabularies in use
(about 256K tokens), and the tokenizers trainer allocates for every merge asked for, learned
or not (a billion aborts it on an allocation no machine can make)."""
OPTION_FLAGS = {"seed": "--seed", "merges": "--merges", "train_size": "--train-size",
                "joint": "--joint/--separate", "src_lang": "--src-lang",
                "tgt_lang": "--tgt-lang", "clean": "--max-words/--max-ratio"}
"""The ``prepare`` option behind each key of a prepared folder's ``options``."""


@dataclass(frozen=True)
class PrepareRequest:
    """The options of ``arelu prepare``; ``None`` means the corpus's default."""

    corpus: str
    out: Path
    source: Path | None = None
    split_files: dict[str, tuple[Path, Path]] = field(default_factory=dict)
    """Split name -> (source file, target file), plain aligned text; overrides the corpus layout."""
    src_lang: str | None = None
    tgt_lang: str | None = None
    merges: int | None = None
    joint: bool = True
    seed: int = 0
    force: bool = False
    train_size: int | None = None
    """Toy: pairs generated; other corpora: keep the first N cleaned training pairs."""
    eval_size: int | None = None
    """Toy only: dev and test pairs each."""
    toy_vocab: int | None = None
    """Toy only: content-word concepts per language."""
    max_words: int | None = None
    max_ratio: float | None = None


@dataclass(frozen=True)
class PrepareResult:
    """What ``prepare`` did: ``rebuilt`` is False when the folder was already up to date."""

    path: Path
    meta: dict
    rebuilt: bool
    seconds: float


def check_out(out: Path, corpus: str, force: bool) -> dict | None:
    """The meta of the prepared folder ``out`` (None when there is none yet); refuses an
    ``out`` that is not a prepared folder or holds other files, and (unless forced) one of
    another corpus."""
    if out.exists() and not out.is_dir():
        raise UserError(f"--out {out} is a file; give a folder")
    if not out.exists():
        return None
    meta = read_meta(out)
    if meta is None:
        if any(out.iterdir()):
            raise UserError(f"{out} exists and is not a prepared corpus folder (no meta.json); "
                            f"choose another --out (--force only replaces a folder that "
                            f"arelu prepare made)")
        return None
    foreign = foreign_files(out, meta)
    if foreign:
        raise UserError(f"{out} holds files arelu prepare did not write ({', '.join(foreign[:3])}"
                        f"); move them out of it or choose another --out")
    if meta["corpus"] != corpus and not force:
        raise UserError(f"{out} holds the prepared corpus {meta['corpus']!r}, not {corpus!r}; "
                        f"choose another --out or pass --force to replace it")
    return meta


def check_merges(merges: int | None) -> None:
    """``--merges`` (None: the corpus's default) within [1, :data:`MAX_MERGES`]."""
    if merges is None:
        return
    if merges < 1:
        raise UserError(f"--merges must be at least 1, got {merges}; leave it out for the "
                        "corpus's default")
    if merges > MAX_MERGES:
        raise UserError(f"--merges {merges:,} is more than {MAX_MERGES:,}, the most arelu "
                        "prepare learns (the tokenizers trainer allocates memory for every merge "
                        "asked for); ask for at most that, or leave it out for the corpus's "
                        "default")


def check_same_options(out: Path, meta: dict, options: dict) -> None:
    """Refuse (unless forced: the caller checks) to rebuild a prepared folder with other
    options: its vocabulary and ids would change under every run trained on it."""
    old = meta.get("options") or {}
    new = json.loads(json.dumps(options))  # tuples as lists, as meta.json holds them
    changed = [key for key in new if old.get(key) != new[key]]
    if not changed:
        return
    key = changed[0]
    flag = OPTION_FLAGS.get(key, key)
    raise UserError(f"{out} holds a {meta['corpus']} corpus prepared with other options "
                    f"({flag}: {old.get(key)!r} there, {new[key]!r} now); pass --force to "
                    "replace it (checkpoints trained on it will no longer match) or choose "
                    "another --out")


def identical_splits(texts: Mapping[str, Sequence]) -> list[list[str]]:
    """Groups of two or more splits whose texts are equal (one file given as train, dev and
    test, say), in split order."""
    groups: list[list[str]] = []
    for name, text in texts.items():
        group = next((g for g in groups if texts[g[0]] == text), None)
        if group is None:
            groups.append([name])
        else:
            group.append(name)
    return [g for g in groups if len(g) > 1]
