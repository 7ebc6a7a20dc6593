"""What ``arelu prepare`` is asked (:class:`PrepareRequest`) and answers
(:class:`PrepareResult`), and the check of its output folder: shared by the translation
pipeline (:mod:`arelu_cli.data.prepare`) and the language-modelling one
(:mod:`arelu_cli.data.lm_prepare`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from arelu_cli.data.prepared import foreign_files, read_meta
from arelu_cli.util.errors import UserError

Log = Callable[[str], None]


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
