"""The prepared corpus folder: what ``arelu prepare`` writes and training/decoding read.

Layout of a folder (``SPLIT`` in train/dev/test, ``SIDE`` in src/tgt)::

    meta.json                     corpus, languages, sizes, vocab, sources' checksums, versions
    tokenizer.json                joint BPE (or tokenizer.src.json + tokenizer.tgt.json)
    SPLIT.LANG                    cleaned raw text, one sentence a line (the BLEU references)
    SPLIT.SIDE.ids.npy            every sentence's token ids, concatenated (uint16 or int32)
    SPLIT.SIDE.offsets.npy        int64, n + 1 entries: sentence i is ids[offsets[i]:offsets[i+1]]

Read it with :func:`load_prepared`::

    data = load_prepared("data/toy")
    data.vocab_size, data.pad_id, data.bos_id, data.eos_id, data.unk_id
    train = data.split("train")        # EncodedSplit, memory-mapped
    train.src(0), train.tgt(0)         # np arrays of ids, without bos/eos
    data.references("test")            # raw detokenized target lines
    data.tgt_tokenizer.decode(ids)     # ids -> detokenized text

The folder is written by :func:`atomic_dir`: into a temporary sibling that replaces the
old folder only once complete, so an interrupted or failed run leaves no half-written output.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from tokenizers import Tokenizer

from arelu_cli.data import bpe
from arelu_cli.errors import UserError

FORMAT = 1
META = "meta.json"


@dataclass(frozen=True)
class EncodedSplit:
    """Token ids of one split, both sides, as flat arrays plus offsets (memory-mapped)."""

    src_ids: np.ndarray
    src_offsets: np.ndarray
    tgt_ids: np.ndarray
    tgt_offsets: np.ndarray

    def __len__(self) -> int:
        return len(self.src_offsets) - 1

    def src(self, i: int) -> np.ndarray:
        """Source ids of sentence ``i`` (no bos/eos)."""
        return self.src_ids[self.src_offsets[i]:self.src_offsets[i + 1]]

    def tgt(self, i: int) -> np.ndarray:
        """Target ids of sentence ``i`` (no bos/eos)."""
        return self.tgt_ids[self.tgt_offsets[i]:self.tgt_offsets[i + 1]]

    @property
    def src_lengths(self) -> np.ndarray:
        return np.diff(self.src_offsets)

    @property
    def tgt_lengths(self) -> np.ndarray:
        return np.diff(self.tgt_offsets)


@dataclass(frozen=True)
class Prepared:
    """A prepared corpus folder, opened; see the module docstring."""

    path: Path
    meta: dict
    src_tokenizer: Tokenizer
    tgt_tokenizer: Tokenizer
    """The same object as ``src_tokenizer`` when the vocabulary is joint."""
    pad_id: int = bpe.PAD_ID
    bos_id: int = bpe.BOS_ID
    eos_id: int = bpe.EOS_ID
    unk_id: int = bpe.UNK_ID

    @property
    def corpus(self) -> str:
        return self.meta["corpus"]

    @property
    def src_lang(self) -> str:
        return self.meta["src_lang"]

    @property
    def tgt_lang(self) -> str:
        return self.meta["tgt_lang"]

    @property
    def shared_vocab(self) -> bool:
        return self.meta["vocab"]["joint"]

    @property
    def src_vocab_size(self) -> int:
        return self.meta["vocab"]["src_size"]

    @property
    def tgt_vocab_size(self) -> int:
        return self.meta["vocab"]["tgt_size"]

    @property
    def vocab_size(self) -> int:
        """The target vocabulary size: the output layer's width (d_vocab in the paper)."""
        return self.tgt_vocab_size

    @property
    def split_names(self) -> list[str]:
        return list(self.meta["splits"])

    def _check(self, name: str) -> None:
        if name not in self.meta["splits"]:
            raise UserError(f"{self.path} has no split {name!r}; it has {', '.join(self.split_names)}")

    def split(self, name: str) -> EncodedSplit:
        """The encoded split, memory-mapped."""
        self._check(name)
        arrays = [np.load(self.path / f"{name}.{side}.{kind}.npy", mmap_mode="r")
                  for side in ("src", "tgt") for kind in ("ids", "offsets")]
        return EncodedSplit(*arrays)

    def sources(self, name: str) -> list[str]:
        """Cleaned raw source sentences of a split."""
        self._check(name)
        return _read_text(self.path / f"{name}.{self.src_lang}")

    def references(self, name: str) -> list[str]:
        """Cleaned raw target sentences of a split: the detokenized BLEU references."""
        self._check(name)
        return _read_text(self.path / f"{name}.{self.tgt_lang}")


def _read_text(path: Path) -> list[str]:
    text = path.read_text(encoding="utf-8")
    return text.split("\n")[:-1] if text else []


def read_meta(path: Path) -> dict | None:
    """The ``meta.json`` of a prepared folder, or ``None`` when there is no readable one."""
    try:
        meta = json.loads((Path(path) / META).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return meta if isinstance(meta, dict) and "corpus" in meta else None


def load_prepared(path: str | Path) -> Prepared:
    """Open a folder written by ``arelu prepare``."""
    path = Path(path)
    meta = read_meta(path)
    if meta is None:
        raise UserError(f"{path} is not a prepared corpus folder (no meta.json); "
                        f"make one with `arelu prepare CORPUS --out {path}`")
    if meta.get("format") != FORMAT:
        raise UserError(f"{path} was prepared in format {meta.get('format')}, this version reads "
                        f"format {FORMAT}; run `arelu prepare {meta['corpus']} --out {path} --force`")
    if meta["vocab"]["joint"]:
        src_tok = tgt_tok = bpe.load(path / "tokenizer.json")
    else:
        src_tok, tgt_tok = bpe.load(path / "tokenizer.src.json"), bpe.load(path / "tokenizer.tgt.json")
    return Prepared(path, meta, src_tok, tgt_tok)


def write_text(path: Path, lines: list[str]) -> None:
    """One line per sentence, UTF-8, ``\\n`` endings."""
    with open(path, "w", encoding="utf-8", newline="\n") as handle:
        handle.writelines(line + "\n" for line in lines)


def write_ids(folder: Path, stem: str, ids: list[list[int]], dtype: np.dtype) -> int:
    """Write ``stem.ids.npy`` and ``stem.offsets.npy``; returns the token count."""
    offsets = np.zeros(len(ids) + 1, dtype=np.int64)
    np.cumsum([len(seq) for seq in ids], out=offsets[1:])
    flat = np.fromiter((t for seq in ids for t in seq), dtype=dtype, count=int(offsets[-1]))
    np.save(folder / f"{stem}.ids.npy", flat)
    np.save(folder / f"{stem}.offsets.npy", offsets)
    return int(offsets[-1])


def write_meta(folder: Path, meta: dict) -> None:
    (folder / META).write_text(json.dumps(meta, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


@contextlib.contextmanager
def atomic_dir(out: Path):
    """Yield an empty temporary folder next to ``out``; on success it replaces ``out``."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}.tmp-"))
    tmp.chmod(0o755)  # mkdtemp makes it owner-only; the result is an ordinary folder
    try:
        yield tmp
        old = out.parent / f"{tmp.name}.old"
        if out.exists():
            os.replace(out, old)
        os.replace(tmp, out)
        shutil.rmtree(old, ignore_errors=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
