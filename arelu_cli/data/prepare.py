"""``arelu prepare``: raw parallel text -> cleaned splits -> BPE -> a prepared folder.

Steps: pick the corpus spec, check the output folder, find the inputs (toy generator,
``--source`` files, per-split ``--split-file`` overrides, or a download), fingerprint them
(options + SHA-256 of every input file), and stop if the folder already holds exactly that
fingerprint. Otherwise read, clean (training pairs only are filtered), derive IWSLT'14's
dev split, learn BPE on the training text, encode, check the round trip, and write it all
through :func:`arelu_cli.data.prepared.atomic_dir`.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from rich.console import Group
from rich.table import Table
from rich.text import Text

from arelu_cli.data import bpe, download, iwslt, toy
from arelu_cli.data.clean import CleanRules, clean_train, normalize_all
from arelu_cli.data.corpora import (SPLITS, CorpusSpec, Resolved, direction, get_spec, read_split,
                                    resolve_files)
from arelu_cli.data.prepared import FORMAT, atomic_dir, read_meta, write_ids, write_meta, write_text
from arelu_cli.data.textio import sha256_file
from arelu_cli.errors import UserError
from arelu_cli.results import versions

Texts = dict[str, tuple[list[str], list[str]]]
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


@dataclass(frozen=True)
class Inputs:
    """Where the text comes from, and what it is fingerprinted by."""

    toy: toy.ToyConfig | None = None
    files: Resolved = field(default_factory=dict)
    hub_splits: list[str] = field(default_factory=list)
    checksums: dict[str, str] = field(default_factory=dict)


def _quiet(_: str) -> None:
    return None


def _check_request(spec: CorpusSpec, req: PrepareRequest) -> None:
    unknown = sorted(set(req.split_files) - set(SPLITS))
    if unknown:
        raise UserError(f"unknown split {unknown[0]!r} in --split-file; use train, dev or test")
    if spec.name != "toy" and (req.eval_size is not None or req.toy_vocab is not None):
        raise UserError("--eval-size and --toy-vocab apply to the toy corpus only")
    if spec.name == "toy" and (req.source or req.split_files):
        raise UserError("the toy corpus is generated; it takes no --source or --split-file")
    if req.merges is not None and req.merges < 1:
        raise UserError(f"--merges must be at least 1, got {req.merges}")
    if req.train_size is not None and req.train_size < 1:
        raise UserError(f"--train-size must be at least 1, got {req.train_size}")
    if req.source is not None and not req.source.is_dir():
        raise UserError(f"--source {req.source} is not a folder; give the folder holding the "
                        f"corpus files in the publisher's layout")


def _check_out(out: Path, corpus: str, force: bool) -> dict | None:
    """The existing meta of ``out`` (if any); refuses to overwrite something else unless forced."""
    if out.exists() and not out.is_dir():
        raise UserError(f"--out {out} is a file; give a folder")
    meta = read_meta(out)
    if force or not out.exists():
        return meta
    if meta is None and any(out.iterdir()):
        raise UserError(f"{out} exists and is not a prepared corpus folder; choose another --out "
                        f"or pass --force to replace it")
    if meta is not None and meta["corpus"] != corpus:
        raise UserError(f"{out} holds the prepared corpus {meta['corpus']!r}, not {corpus!r}; "
                        f"choose another --out or pass --force to replace it")
    return meta


def _inputs(spec: CorpusSpec, req: PrepareRequest, src: str, tgt: str, log: Log) -> Inputs:
    if spec.name == "toy":
        sizes = {"train": req.train_size or 50_000, "dev": req.eval_size or 1000,
                 "test": req.eval_size or 1000}
        return Inputs(toy=toy.ToyConfig(vocab=req.toy_vocab or 6000, seed=req.seed, **sizes))
    overrides = {k: (Path(a), Path(b)) for k, (a, b) in req.split_files.items()}
    needed = [s for s in SPLITS if s not in overrides and not (s == "dev" and spec.dev_from_train)]
    source = req.source
    if source is None and needed and spec.hub is not None:
        files = resolve_files(spec, None, overrides, src, tgt, only=tuple(overrides))
        return Inputs(files=files, hub_splits=needed,
                      checksums={"hub": f"{spec.hub.path}:{spec.hub.config}"} | _checksums(files))
    if source is None and needed and spec.url is not None:
        log(f"downloading {spec.url}")
        source = download.fetch_archive(spec, spec.url, spec.url_subdir)
    files = resolve_files(spec, source, overrides, src, tgt)
    log("checksumming inputs")
    return Inputs(files=files, checksums=_checksums(files))


def _checksums(files: Resolved) -> dict[str, str]:
    """SHA-256 per ``split/file name``: moving the files elsewhere does not force a rebuild."""
    return {f"{split}/{path.name}": sha256_file(path)
            for split, parts in files.items() for a, b, _ in parts for path in (a, b)}


def _read(spec: CorpusSpec, inputs: Inputs, src: str, tgt: str) -> Texts:
    if inputs.toy is not None:
        generated = toy.generate(inputs.toy)
        return generated if src == "src" else {k: (b, a) for k, (a, b) in generated.items()}
    texts = {split: read_split(parts) for split, parts in inputs.files.items()}
    if inputs.hub_splits:
        texts |= download.fetch_hub(spec, spec.hub, inputs.hub_splits, src, tgt)
    return texts


def _clean(texts: Texts, rules: CleanRules, train_size: int | None) -> tuple[Texts, dict[str, int]]:
    """Filter and normalize train, derive dev when the corpus has none, normalize dev/test."""
    src, tgt, dropped = clean_train(*texts["train"], rules)
    out = {"train": (src, tgt)}
    if "dev" not in texts:
        out["train"], out["dev"] = iwslt.split_valid(src, tgt)
    if train_size is not None:
        out["train"] = (out["train"][0][:train_size], out["train"][1][:train_size])
    if not out["train"][0]:
        raise UserError(f"all {len(texts['train'][0])} training pairs were dropped by cleaning "
                        f"({dropped}); check the files or loosen --max-words/--max-ratio")
    for split in ("dev", "test"):
        if split in texts:
            out[split] = (normalize_all(texts[split][0]), normalize_all(texts[split][1]))
    return {s: out[s] for s in SPLITS}, dropped


def _toy_record(inputs: Inputs) -> dict | None:
    """The toy config and the generator's version: a changed generator rebuilds the folder."""
    return {**asdict(inputs.toy), "generator": toy.GENERATOR} if inputs.toy else None


def _fingerprint(options: dict, inputs: Inputs) -> str:
    blob = json.dumps({"format": FORMAT, "options": options, "inputs": inputs.checksums,
                       "toy": _toy_record(inputs)}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()


def _encode_all(folder: Path, texts: Texts, langs: tuple[str, str], merges: int, joint: bool,
                log: Log) -> tuple[dict, dict]:
    """Learn BPE, write tokenizer(s), raw text and id arrays; returns (vocab meta, split meta)."""
    log(f"learning BPE ({merges} merges, {'joint' if joint else 'separate'})")
    train_src, train_tgt = texts["train"]
    if joint:
        tokenizers = [bpe.train_bpe(train_src + train_tgt, merges)] * 2
        bpe.save(tokenizers[0], folder / "tokenizer.json")
    else:
        tokenizers = [bpe.train_bpe(train_src, merges), bpe.train_bpe(train_tgt, merges)]
        bpe.save(tokenizers[0], folder / "tokenizer.src.json")
        bpe.save(tokenizers[1], folder / "tokenizer.tgt.json")
    sizes = [t.get_vocab_size() for t in tokenizers]
    dtype = bpe.id_dtype(max(sizes))
    splits = {}
    for split, sides in texts.items():
        log(f"encoding {split}")
        info = {"pairs": len(sides[0])}
        for side, lang, lines, tokenizer in zip(("src", "tgt"), langs, sides, tokenizers):
            write_text(folder / f"{split}.{lang}", lines)
            ids = bpe.encode_lines(tokenizer, lines)
            probe = slice(None) if split != "train" else slice(0, 10_000)
            bad = bpe.round_trip_failures(tokenizer, lines[probe], ids[probe])
            if bad:
                raise RuntimeError(f"BPE round trip failed on {split}.{lang} line {bad[0] + 1}")
            info[f"{side}_tokens"] = write_ids(folder, f"{split}.{side}", ids, dtype)
        splits[split] = info
    vocab = {"joint": joint, "merges": merges, "learned_merges": [bpe.merge_count(t) for t in tokenizers],
             "src_size": sizes[0], "tgt_size": sizes[1], "dtype": dtype.name,
             "specials": dict(zip(bpe.SPECIALS, range(4)))}
    return vocab, splits


def prepare(req: PrepareRequest, log: Log = _quiet) -> PrepareResult:
    """Build (or find up to date) the prepared folder ``req.out`` for ``req.corpus``."""
    start = time.perf_counter()
    spec = get_spec(req.corpus)
    _check_request(spec, req)
    src, tgt = direction(spec, req.src_lang, req.tgt_lang)
    old_meta = _check_out(req.out, spec.name, req.force)
    rules = replace(spec.clean, **{k: v for k, v in (("max_words", req.max_words),
                                                     ("max_ratio", req.max_ratio)) if v is not None})
    merges = req.merges or spec.merges
    options = {"corpus": spec.name, "src_lang": src, "tgt_lang": tgt, "merges": merges,
               "joint": req.joint, "seed": req.seed, "train_size": req.train_size,
               "clean": asdict(rules)}
    inputs = _inputs(spec, req, src, tgt, log)
    fingerprint = _fingerprint(options, inputs)
    if old_meta is not None and old_meta.get("fingerprint") == fingerprint and not req.force:
        return PrepareResult(req.out, old_meta, False, time.perf_counter() - start)
    log(f"reading {spec.name}")
    texts, dropped = _clean(_read(spec, inputs, src, tgt), rules, req.train_size)
    with atomic_dir(req.out) as folder:
        vocab, splits = _encode_all(folder, texts, (src, tgt), merges, req.joint, log)
        splits["train"]["dropped"] = dropped
        meta = {"format": FORMAT, "corpus": spec.name, "src_lang": src, "tgt_lang": tgt,
                "splits": splits, "vocab": vocab, "options": options,
                "toy": _toy_record(inputs),
                "sources": inputs.checksums, "fingerprint": fingerprint, "versions": versions(),
                "source_paths": {split: [str(path.resolve()) for a, b, _ in parts for path in (a, b)]
                                 for split, parts in inputs.files.items()}}
        write_meta(folder, meta)
    return PrepareResult(req.out, meta, True, time.perf_counter() - start)


def parse_split_file(text: str) -> tuple[str, tuple[Path, Path]]:
    """``"train=a.de,a.en"`` -> ``("train", (Path("a.de"), Path("a.en")))``."""
    name, _, files = text.partition("=")
    parts = files.split(",")
    if not name or len(parts) != 2 or not all(parts):
        raise UserError(f"--split-file {text!r}: write SPLIT=SRC_FILE,TGT_FILE, "
                        f"e.g. train=corpus/train.de,corpus/train.en")
    return name.strip(), (Path(parts[0].strip()), Path(parts[1].strip()))


def summary_table(result: PrepareResult) -> Group:
    """What was written: a headline (vocabulary, size, time), then pairs and tokens per split."""
    meta = result.meta
    size_mb = sum(f.stat().st_size for f in result.path.iterdir()) / 1e6
    vocab = meta["vocab"]
    headline = (f"{meta['corpus']} {meta['src_lang']}->{meta['tgt_lang']} in {result.path}: "
                f"vocab {vocab['src_size']:,}/{vocab['tgt_size']:,} "
                f"({'joint' if vocab['joint'] else 'separate'}), {size_mb:.1f} MB, "
                f"{result.seconds:.1f} s")
    table = Table()
    for column in ("split", "pairs", "src tokens", "tgt tokens", "dropped"):
        table.add_column(column, justify="left" if column in ("split", "dropped") else "right")
    for split, info in meta["splits"].items():
        dropped = ", ".join(f"{k} {v}" for k, v in info.get("dropped", {}).items()) or "-"
        table.add_row(split, f"{info['pairs']:,}", f"{info['src_tokens']:,}",
                      f"{info['tgt_tokens']:,}", dropped)
    return Group(Text(headline), table)
