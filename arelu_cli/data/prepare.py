"""``arelu prepare``: raw parallel text -> cleaned splits -> BPE -> a prepared folder.

Steps: pick the corpus spec, clear what killed runs left beside the output folder, check
the output folder, find the inputs (toy generator, ``--source`` files, per-split
``--split-file`` overrides, or a download), fingerprint them (options + SHA-256 of every
input file), and stop if the folder already holds exactly that fingerprint. Otherwise read,
clean (training pairs only are filtered), derive IWSLT'14's dev split, learn BPE on the
training text, encode, check the round trip, and write it all through
:func:`arelu_cli.data.prepared.atomic_dir`.

Nothing but a prepared folder is ever replaced, and never one that holds an input or a file
``prepare`` did not write, whatever ``--force`` says: ``--force`` only allows replacing a
prepared folder of another corpus or of other inputs (whose translations and checkpoints
would no longer match), or rebuilding an up-to-date one.
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from rich.console import Group
from rich.table import Table
from rich.text import Text

from arelu_cli.data import bpe, download, iwslt, toy
from arelu_cli.data.clean import CleanRules, clean_train, normalize_all
from arelu_cli.data.corpora import (SPLITS, CorpusSpec, Resolved, direction, get_spec, read_split,
                                    resolve_files)
from arelu_cli.data.lm_corpora import LM_CORPORA, is_lm
from arelu_cli.data.lm_prepare import lm_summary_table, prepare_lm
from arelu_cli.data.prepare_request import (Log, PrepareRequest, PrepareResult, check_merges,
                                            check_out, check_same_options, identical_splits)
from arelu_cli.data.prepared import (FORMAT, atomic_dir, clean_leftovers, read_meta, write_ids,
                                     write_meta, write_text)
from arelu_cli.data.textio import sha256_file
from arelu_cli.util.errors import UserError
from arelu_cli.util.signatures import versions

Texts = dict[str, tuple[list[str], list[str]]]


@dataclass(frozen=True)
class Inputs:
    """Where the text comes from, and what it is fingerprinted by."""

    toy: toy.ToyConfig | None = None
    source: Path | None = None
    """The folder the files come from (``--source`` or the downloaded archive)."""
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
    check_merges(req.merges)
    for option, value in (("--train-size", req.train_size), ("--eval-size", req.eval_size),
                          ("--toy-vocab", req.toy_vocab), ("--max-words", req.max_words)):
        if value is not None and value < 1:
            raise UserError(f"{option} must be at least 1, got {value}; leave it out for the "
                            "corpus's default")
    if req.max_ratio is not None and not req.max_ratio >= 1:  # NaN too
        raise UserError(f"--max-ratio must be at least 1, got {req.max_ratio}")
    if req.source is not None and not req.source.is_dir():
        raise UserError(f"--source {req.source} is not a folder; give the folder holding the "
                        f"corpus files in the publisher's layout")


def _check_inputs_kept(out: Path, inputs: Inputs) -> None:
    """Refuse an ``out`` that is an input or holds one: writing it would delete the corpus."""
    target = out.resolve()
    places = [inputs.source] if inputs.source is not None else []
    places += [path for parts in inputs.files.values() for a, b, _ in parts for path in (a, b)]
    for place in places:
        where = place.resolve()
        if where == target or target in where.parents:
            raise UserError(f"--out {out} {'is' if where == target else 'holds'} the input "
                            f"{place}; writing it would delete the corpus: choose an --out "
                            f"outside the input files")


def _source_paths(inputs: Inputs) -> dict[str, list[str]]:
    return {split: [str(path.resolve()) for a, b, _ in parts for path in (a, b)]
            for split, parts in inputs.files.items()}


def _check_same_source(out: Path, meta: dict, inputs: Inputs) -> None:
    """Refuse (unless forced) to replace a folder prepared from other inputs: other bytes
    from other places. Changed files in the same place, or the same bytes moved, are fine."""
    if meta.get("sources") == inputs.checksums or meta.get("source_paths") == _source_paths(inputs):
        return
    paths = [p for ps in (meta.get("source_paths") or {}).values() for p in ps]
    was = f"files in {Path(paths[0]).parent}" if paths else "other inputs"
    raise UserError(f"{out} holds a {meta['corpus']} corpus prepared from {was}, not these "
                    f"inputs; pass --force to replace it (translations and checkpoints made from "
                    f"it will no longer match) or choose another --out")


def _inputs(spec: CorpusSpec, req: PrepareRequest, src: str, tgt: str, log: Log) -> Inputs:
    if spec.name == "toy":
        given = {"vocab": req.toy_vocab, "train": req.train_size, "dev": req.eval_size,
                 "test": req.eval_size}  # None: the generator's default (0 is refused above)
        return Inputs(toy=toy.ToyConfig(seed=req.seed,
                                        **{k: v for k, v in given.items() if v is not None}))
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
    return Inputs(source=source, files=files, checksums=_checksums(files))


def _checksums(files: Resolved) -> dict[str, str]:
    """SHA-256 per ``split/file name``: moving the files elsewhere does not force a rebuild."""
    sums = {}
    for split, parts in files.items():
        for path in (path for a, b, _ in parts for path in (a, b)):
            try:
                sums[f"{split}/{path.name}"] = sha256_file(path)
            except OSError as err:
                raise UserError(f"cannot read {path}: {err.strerror or err}") from None
    return sums


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
    return toy.record(inputs.toy) if inputs.toy else None


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
    if is_lm(req.corpus):  # a language-modelling corpus: its own, smaller pipeline
        return prepare_lm(req, log)
    start = time.perf_counter()
    spec = get_spec(req.corpus, LM_CORPORA)
    _check_request(spec, req)
    src, tgt = direction(spec, req.src_lang, req.tgt_lang)
    clean_leftovers(req.out)
    old_meta = check_out(req.out, spec.name, req.force)
    rules = replace(spec.clean, **{k: v for k, v in (("max_words", req.max_words),
                                                     ("max_ratio", req.max_ratio)) if v is not None})
    merges = req.merges or spec.merges
    options = {"corpus": spec.name, "src_lang": src, "tgt_lang": tgt, "merges": merges,
               "joint": req.joint, "seed": req.seed, "train_size": req.train_size,
               "clean": asdict(rules)}
    inputs = _inputs(spec, req, src, tgt, log)
    _check_inputs_kept(req.out, inputs)
    fingerprint = _fingerprint(options, inputs)
    if old_meta is not None and not req.force:
        if old_meta.get("fingerprint") == fingerprint:
            return PrepareResult(req.out, old_meta, False, time.perf_counter() - start)
        _check_same_source(req.out, old_meta, inputs)
        check_same_options(req.out, old_meta, options)
    with atomic_dir(req.out) as folder:  # made first: an unwritable --out fails before the work
        log(f"reading {spec.name}")
        raw = _read(spec, inputs, src, tgt)
        same = identical_splits(raw)
        texts, dropped = _clean(raw, rules, req.train_size)
        del raw
        vocab, splits = _encode_all(folder, texts, (src, tgt), merges, req.joint, log)
        splits["train"]["dropped"] = dropped
        meta = {"format": FORMAT, "corpus": spec.name, "src_lang": src, "tgt_lang": tgt,
                "splits": splits, "vocab": vocab, "options": options,
                "toy": _toy_record(inputs), "identical_splits": same,
                "sources": inputs.checksums, "fingerprint": fingerprint, "versions": versions(),
                "source_paths": _source_paths(inputs)}
        write_meta(folder, meta)
    return PrepareResult(req.out, read_meta(req.out), True, time.perf_counter() - start)


def warnings(meta: dict, merges_given: bool = True) -> list[str]:
    """What a prepared folder's ``meta.json`` shows to be probably not what was meant: a
    split read from one file as both sides, splits of the same text (one file as train, dev
    and test), fewer BPE merges learned than ``--merges`` asked for (``merges_given``; a
    corpus's default count is a ceiling, not a request)."""
    found = []
    for group in meta.get("identical_splits") or []:
        why = ("scores on it measure memorization, not generalization" if "train" in group
               else "test scores are on the text that dev chose the settings on")
        found.append(f"the {' and '.join(group)} splits hold the same text, so {why}; give "
                     "each split its own text")
    pairs = meta.get("source_paths") if meta.get("task", "translation") == "translation" else None
    for split, paths in (pairs or {}).items():
        for src, tgt in zip(paths[::2], paths[1::2]):
            if src == tgt:
                found.append(f"the {split} split reads {src} as both source and target, so a "
                             "model learns to copy; give each side its own file")
    vocab = meta.get("vocab") or {}
    learned, asked = vocab.get("learned_merges") or [], vocab.get("merges") or 0
    if merges_given and learned and min(learned) < asked:
        found.append(f"learned {min(learned):,} of the {asked:,} BPE merges asked for: the "
                     "training text has no more pairs seen twice; --merges "
                     f"{min(learned)} or fewer says what the vocabulary is")
    return found


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
    if meta.get("task") == "lm":
        return lm_summary_table(result)
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
