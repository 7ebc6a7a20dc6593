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

``meta.json`` also records the SHA-256 of every other file (``checksums``); a translation of
a split records :meth:`Prepared.split_checksum`, so that a later ``arelu score`` notices
when the folder was prepared again from other text.

The folder is written by :func:`atomic_dir`: into a temporary sibling that replaces the
old folder only once complete, so an interrupted or failed run leaves no half-written output;
:func:`clean_leftovers` removes the temporary folders of runs that were killed.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import secrets
import shutil
import socket
import stat
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from tokenizers import Tokenizer

from arelu_cli.data import bpe
from arelu_cli.data.textio import sha256_file
from arelu_cli.util.errors import UserError
from arelu_cli.util.atomic import cannot_write

FORMAT = 1
META = "meta.json"
TOKENIZERS = ("tokenizer.json", "tokenizer.src.json", "tokenizer.tgt.json")
TMP, OLD = "tmp", "old"
"""Tags of the hidden folders beside OUT while it is written (``.OUT.tmp-PID-RANDOM@HOST``)
and of the old folder moved aside for an instant when it is replaced (``.OUT.old-...``)."""


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
    def task(self) -> str:
        """``translation`` or ``lm`` (a language-modelling folder, :mod:`arelu_cli.data.lm_prepare`)."""
        return self.meta.get("task", "translation")

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
        """The encoded split, memory-mapped (a translation folder's)."""
        self._check(name)
        if self.task == "lm":
            raise UserError(f"{self.path} is a language-modelling corpus; it has no sentence pairs")
        arrays = [np.load(self.path / f"{name}.{side}.{kind}.npy", mmap_mode="r")
                  for side in ("src", "tgt") for kind in ("ids", "offsets")]
        return EncodedSplit(*arrays)

    def text_ids(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        """A language-modelling split's ids and offsets: line i is ids[offsets[i]:offsets[i+1]]."""
        self._check(name)
        return tuple(np.load(self.path / f"{name}.tgt.{kind}.npy", mmap_mode="r")
                     for kind in ("ids", "offsets"))

    def sources(self, name: str) -> list[str]:
        """Cleaned raw source sentences of a split."""
        self._check(name)
        return _read_text(self.path / f"{name}.{self.src_lang}")

    def references(self, name: str) -> list[str]:
        """Cleaned raw target sentences of a split: the detokenized BLEU references."""
        self._check(name)
        return _read_text(self.path / f"{name}.{self.tgt_lang}")

    def split_checksum(self, name: str) -> str:
        """SHA-256 of the split's source and target text as they are now on disk: what a
        translation of the split is made from and scored against."""
        self._check(name)
        digest = hashlib.sha256()
        for lang in (self.src_lang, self.tgt_lang):
            digest.update(bytes.fromhex(sha256_file(self.path / f"{name}.{lang}")))
        return digest.hexdigest()


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
    """``meta.json``, with the checksums of every other file of ``folder``; written last, so
    that a folder with a meta.json is complete."""
    checksums = {p.name: sha256_file(p) for p in sorted(folder.iterdir()) if p.name != META}
    (folder / META).write_text(json.dumps({**meta, "checksums": checksums}, indent=2,
                                          ensure_ascii=False) + "\n", encoding="utf-8")


def data_fingerprint(meta: dict) -> str | None:
    """SHA-256 over the recorded checksums of every file of a prepared folder: it changes
    with any byte of its text, ids or tokenizer, unlike ``meta["fingerprint"]`` (the inputs
    and options only). ``train`` records it in a run's config.json so that a report can
    tell which version of the folder a run was trained on; None without checksums."""
    checksums = meta.get("checksums")
    if not isinstance(checksums, dict) or not checksums:
        return None
    return hashlib.sha256(json.dumps(checksums, sort_keys=True).encode()).hexdigest()


def foreign_files(path: Path, meta: dict) -> list[str]:
    """Names in the prepared folder ``path`` that ``prepare`` does not write there (a
    user's files, which replacing the folder would delete)."""
    splits, langs = meta.get("splits") or {}, (meta.get("src_lang"), meta.get("tgt_lang"))
    ours = {META, *TOKENIZERS, *(f"{s}.{lang}" for s in splits for lang in langs)}
    ours |= {f"{s}.{side}.{kind}.npy" for s in splits for side in ("src", "tgt")
             for kind in ("ids", "offsets")}
    return sorted(p.name for p in Path(path).iterdir()
                  if p.name not in ours or p.is_symlink() or not p.is_file())


def _hidden(out: Path, tag: str) -> Path:
    """A new hidden name beside ``out`` that says which process on which machine made it."""
    return out.with_name(f".{out.name}.{tag}-{os.getpid()}-{secrets.token_hex(4)}"
                         f"@{socket.gethostname()}")


def _alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)  # signal 0: only asks whether the process exists
    except (ProcessLookupError, OverflowError):
        return False
    except PermissionError:
        return True  # it exists, under another user
    return True


def _leftover_tag(out: Path, entry: Path) -> str | None:
    """TMP or OLD for a hidden folder of ``out`` whose ``prepare`` was killed; None for
    anything else, such as the folder of a ``prepare`` still running."""
    if entry.is_symlink() or not entry.is_dir():
        return None
    name = re.escape(out.name)
    found = re.fullmatch(rf"\.{name}\.({TMP}|{OLD})-(\d+)-[0-9a-f]{{8}}@(.+)", entry.name)
    if found:
        mine = found[3] == socket.gethostname()
        return found[1] if mine and not _alive(int(found[2])) else None
    return None


def clean_leftovers(out: str | Path) -> list[Path]:
    """Remove the hidden folders that killed runs of ``prepare`` left beside ``out``; if a
    kill came between moving the old ``out`` aside and putting the new one in its place,
    put the old one back. Returns the folders dealt with."""
    out = Path(os.path.abspath(out))  # "." has no name to put beside
    if not out.parent.is_dir():
        return []
    done = []
    for entry in sorted(out.parent.iterdir()):
        tag = _leftover_tag(out, entry)
        if tag is None:
            continue
        if tag == OLD and not os.path.lexists(out) and read_meta(entry) is not None:
            os.replace(entry, out)
        else:
            shutil.rmtree(entry)
        done.append(entry)
    return done


def _remove(path: Path) -> None:
    if path.is_symlink():
        path.unlink()
    else:
        shutil.rmtree(path, ignore_errors=True)


def _swap(tmp: Path, out: Path) -> None:
    """Put the complete folder ``tmp`` in place of ``out`` (whose mode it takes over)."""
    if not os.path.lexists(out):
        os.replace(tmp, out)
        return
    with contextlib.suppress(OSError):
        tmp.chmod(stat.S_IMODE(out.stat().st_mode))
    old = _hidden(out, OLD)
    os.replace(out, old)
    os.replace(tmp, out)
    _remove(old)


@contextlib.contextmanager
def atomic_dir(out: Path):
    """Yield an empty temporary folder beside ``out``; on success it replaces ``out``.

    The folder is made with mode 0777 less the umask (``tempfile.mkdtemp`` would make it
    0700) and takes the mode of the ``out`` it replaces. A place where no folder can be
    made is a one-line UserError.
    """
    out = Path(os.path.abspath(out))  # "." has no name to put beside
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = _hidden(out, TMP)
        tmp.mkdir(0o777)
    except OSError as err:
        raise cannot_write(out, err) from None
    try:
        yield tmp
        _swap(tmp, out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
