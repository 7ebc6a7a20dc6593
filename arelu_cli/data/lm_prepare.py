"""``arelu prepare`` for language-modelling corpora: text -> lines -> tokens -> a prepared folder.

The folder is a prepared folder (:mod:`arelu_cli.data.prepared`) whose ``meta.json`` says
``"task": "lm"``: one text per split, ``SPLIT.txt`` (normalized lines, the human text the
generation metrics compare with), its token ids per line in ``SPLIT.tgt.ids.npy`` /
``SPLIT.tgt.offsets.npy`` (no end-of-sentence token stored: the stream adds one per line,
:mod:`arelu_cli.data.blocks`) and ``tokenizer.json`` (words or byte-level BPE,
:mod:`arelu_cli.data.lm_corpora`). As for translation corpora the folder is written
atomically, a rerun with the same inputs and options is a no-op, and nothing but a prepared
folder of the same corpus and inputs is replaced without ``--force``.
"""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path

from rich.console import Group
from rich.table import Table
from rich.text import Text

from arelu_cli.data import bpe, toy
from arelu_cli.data.lm_corpora import LM_CORPORA, LMSpec, read_lm, source_files
from arelu_cli.data.prepare_request import (Log, PrepareRequest, PrepareResult, check_merges,
                                            check_out, check_same_options, identical_splits)
from arelu_cli.data.prepared import (FORMAT, atomic_dir, clean_leftovers, read_meta, write_ids,
                                     write_meta, write_text)
from arelu_cli.data.textio import sha256_file
from arelu_cli.data.words import train_words, unknown_count
from arelu_cli.util.errors import UserError
from arelu_cli.util.signatures import versions

LANG = "txt"
"""The "language" of an LM folder's files: ``SPLIT.txt``."""


def _check_request(spec: LMSpec, req: PrepareRequest) -> None:
    given = [option for option, value in (
        ("--split-file", req.split_files), ("--src-lang", req.src_lang),
        ("--tgt-lang", req.tgt_lang), ("--max-words", req.max_words),
        ("--max-ratio", req.max_ratio), ("--separate", not req.joint)) if value]
    if given:
        raise UserError(f"{given[0]} applies to translation corpora, not the language-modelling "
                        f"corpus {spec.name}; drop it")
    if spec.name != "toy-lm" and (req.eval_size is not None or req.toy_vocab is not None):
        raise UserError("--eval-size and --toy-vocab apply to the toy corpora only")
    if spec.name == "toy-lm" and req.source is not None:
        raise UserError("the toy-lm corpus is generated; it takes no --source")
    if spec.tokens == "words" and req.merges is not None:
        raise UserError(f"{spec.name} is tokenized by words; --merges applies to BPE corpora")
    check_merges(req.merges)
    for option, value in (("--train-size", req.train_size), ("--eval-size", req.eval_size),
                          ("--toy-vocab", req.toy_vocab)):
        if value is not None and value < 1:
            raise UserError(f"{option} must be at least 1, got {value}; leave it out for the "
                            "corpus's default")
    if req.source is not None and not req.source.is_dir():
        raise UserError(f"--source {req.source} is not a folder; give the folder holding the "
                        "corpus files")


def _toy_config(spec: LMSpec, req: PrepareRequest) -> toy.ToyConfig | None:
    if spec.name != "toy-lm":
        return None
    given = {"vocab": req.toy_vocab, "train": req.train_size, "dev": req.eval_size,
             "test": req.eval_size}
    return toy.ToyConfig(seed=req.seed, **{k: v for k, v in given.items() if v is not None})


def _check_inputs_kept(out: Path, files: list[Path]) -> None:
    target = out.resolve()
    for path in files:
        if path.resolve() == target or target in path.resolve().parents:
            raise UserError(f"--out {out} holds the input {path}; writing it would delete the "
                            "corpus: choose an --out outside the input files")


def _tokenizer(spec: LMSpec, train: list[str], merges: int | None):
    if spec.tokens == "words":
        return train_words(train)
    return bpe.train_bpe(train, merges or spec.merges)


def _encode(folder: Path, texts: dict[str, list[str]], tokenizer, words: bool, log: Log) -> dict:
    """Write each split's text and ids; BPE must decode back to the text (words may not:
    unseen words become <unk>)."""
    dtype = bpe.id_dtype(tokenizer.get_vocab_size())
    splits = {}
    for split, lines in texts.items():
        log(f"encoding {split}")
        write_text(folder / f"{split}.{LANG}", lines)
        ids = bpe.encode_lines(tokenizer, lines)
        bad = [] if words else bpe.round_trip_failures(tokenizer, lines[:10_000], ids[:10_000])
        if bad:
            raise RuntimeError(f"BPE round trip failed on {split}.{LANG} line {bad[0] + 1}")
        tokens = write_ids(folder, f"{split}.tgt", ids, dtype)
        splits[split] = {"lines": len(lines), "tokens": tokens, "unk": unknown_count(ids),
                         "stream_tokens": tokens + len(lines)}
    return splits


def prepare_lm(req: PrepareRequest, log: Log) -> PrepareResult:
    """Build (or find up to date) the prepared LM folder ``req.out`` for ``req.corpus``."""
    start = time.perf_counter()
    spec = LM_CORPORA[req.corpus]
    _check_request(spec, req)
    clean_leftovers(req.out)
    old_meta = check_out(req.out, spec.name, req.force)
    config = _toy_config(spec, req)
    files = source_files(spec, req.source)
    _check_inputs_kept(req.out, files)
    checksums = {path.name: sha256_file(path) for path in files}
    options = {"corpus": spec.name, "tokens": spec.tokens, "seed": req.seed,
               "merges": (req.merges or spec.merges) if spec.tokens == "bpe" else None,
               "train_size": req.train_size}
    toy_record = toy.record(config) if config else None
    fingerprint = hashlib.sha256(json.dumps(
        {"format": FORMAT, "task": "lm", "options": options, "inputs": checksums,
         "toy": toy_record}, sort_keys=True).encode()).hexdigest()
    if old_meta is not None and not req.force:
        if old_meta.get("fingerprint") == fingerprint:
            return PrepareResult(req.out, old_meta, False, time.perf_counter() - start)
        if old_meta.get("sources") != checksums and old_meta.get("source_paths") != [
                str(p.resolve()) for p in files]:
            raise UserError(f"{req.out} holds a {spec.name} corpus prepared from other inputs; "
                            "pass --force to replace it (checkpoints made from it will no longer "
                            "match) or choose another --out")
        check_same_options(req.out, old_meta, options)
    with atomic_dir(req.out) as folder:
        log(f"reading {spec.name}")
        texts, split_rule = read_lm(spec, req.source, config)
        same = identical_splits(texts)
        if req.train_size is not None:
            texts["train"] = texts["train"][:req.train_size]
        log(f"learning the vocabulary ({spec.tokens})")
        tokenizer = _tokenizer(spec, texts["train"], req.merges)
        bpe.save(tokenizer, folder / "tokenizer.json")
        splits = _encode(folder, texts, tokenizer, spec.tokens == "words", log)
        size = tokenizer.get_vocab_size()
        meta = {"format": FORMAT, "task": "lm", "corpus": spec.name, "src_lang": LANG,
                "tgt_lang": LANG, "splits": splits, "split": split_rule,
                "vocab": {"joint": True, "tokens": spec.tokens, "merges": options["merges"],
                          "src_size": size, "tgt_size": size, "dtype": bpe.id_dtype(size).name,
                          "specials": dict(zip(bpe.SPECIALS, range(4)))},
                "options": options, "toy": toy_record, "identical_splits": same,
                "sources": checksums,
                "fingerprint": fingerprint, "versions": versions(),
                "source_paths": [str(p.resolve()) for p in files]}
        write_meta(folder, meta)
    return PrepareResult(req.out, read_meta(req.out), True, time.perf_counter() - start)


def lm_summary_table(result: PrepareResult) -> Group:
    """What was written: a headline, then lines, tokens and unknown words per split."""
    meta = result.meta
    size_mb = sum(f.stat().st_size for f in result.path.iterdir()) / 1e6
    headline = (f"{meta['corpus']} (language modelling, {meta['vocab']['tokens']}) in "
                f"{result.path}: vocab {meta['vocab']['tgt_size']:,}, {size_mb:.1f} MB, "
                f"{result.seconds:.1f} s")
    table = Table()
    for column in ("split", "lines", "tokens", "with eos", "<unk>"):
        table.add_column(column, justify="left" if column == "split" else "right")
    for split, info in meta["splits"].items():
        table.add_row(split, f"{info['lines']:,}", f"{info['tokens']:,}",
                      f"{info['stream_tokens']:,}", f"{info['unk']:,}")
    return Group(Text(headline), table)
