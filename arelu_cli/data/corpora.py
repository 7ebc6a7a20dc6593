"""The corpora ``arelu prepare`` knows, each as its publisher lays out its files.

A :class:`CorpusSpec` names, for each split (``train``, ``dev``, ``test``), the aligned file
pairs that make it inside a ``--source`` folder (``{lang}`` stands for a language code),
the paper's BPE merges, the cleaning rules, and where to download it when no folder is
given. :func:`resolve_files` turns a spec plus the user's folder and per-split overrides
into concrete paths (one error naming every missing file), and :func:`read_split` reads
them. The toy corpus has no files: :mod:`arelu_cli.data.toy` generates it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from arelu_cli.data import iwslt
from arelu_cli.data.clean import CleanRules
from arelu_cli.data.textio import check_aligned, read_lines
from arelu_cli.util.errors import UserError

SPLITS = ("train", "dev", "test")
Format = Literal["text", "xml", "tags"]


@dataclass(frozen=True)
class Part:
    """One pair of aligned files; ``pattern`` has a ``{lang}`` placeholder."""

    pattern: str
    fmt: Format = "text"


@dataclass(frozen=True)
class HubSource:
    """A Hugging Face ``datasets`` hub copy: rows ``{"translation": {lang: text}}`` or ``{lang: text}``."""

    path: str
    config: str | None
    splits: dict[str, str]
    """Our split name -> the hub's split name."""


@dataclass(frozen=True)
class CorpusSpec:
    """Everything ``prepare`` needs to know about one corpus."""

    name: str
    langs: tuple[str, str]
    """Default direction (source, target); ``--src-lang/--tgt-lang`` may swap it."""
    merges: int
    """BPE merges of the paper's recipe (smaller for the small corpora)."""
    about: str
    splits: dict[str, tuple[Part, ...]] = field(default_factory=dict)
    dev_from_train: bool = False
    """IWSLT'14: dev is every 23rd cleaned training pair, as in fairseq's recipe."""
    clean: CleanRules = CleanRules()
    hub: HubSource | None = None
    url: str | None = None
    """An archive in the publisher's layout, extracted and read like a ``--source`` folder."""
    url_subdir: str = ""


def _files(*patterns: str, fmt: Format = "text") -> tuple[Part, ...]:
    return tuple(Part(p, fmt) for p in patterns)


CORPORA: dict[str, CorpusSpec] = {spec.name: spec for spec in (
    CorpusSpec("toy", ("src", "tgt"), merges=4000, clean=CleanRules(max_ratio=3.0),
               about="generated: two made-up languages, no download"),
    CorpusSpec("multi30k", ("de", "en"), merges=8000, clean=CleanRules(max_ratio=3.0),
               about="Multi30k task 1 De-En (train, val, test_2016_flickr)",
               splits={"train": _files("train.{lang}"), "dev": _files("val.{lang}"),
                       "test": _files("test_2016_flickr.{lang}")},
               hub=HubSource("bentrevett/multi30k", None,
                             {"train": "train", "dev": "validation", "test": "test"})),
    CorpusSpec("iwslt14", ("de", "en"), merges=10_000,
               about="IWSLT'14 De-En, fairseq split (train.tags + TED XML)",
               splits={"train": _files("train.tags.de-en.{lang}", fmt="tags"),
                       "test": _files(*(f"IWSLT14.{s}.de-en.{{lang}}.xml" for s in iwslt.TEST_SETS),
                                      fmt="xml")},
               dev_from_train=True, clean=CleanRules(max_words=175, max_ratio=1.5),
               url="http://dl.fbaipublicfiles.com/fairseq/data/iwslt14/de-en.tgz",
               url_subdir="de-en"),
    CorpusSpec("wmt14-en-de", ("en", "de"), merges=40_000,
               about="WMT'14 En-De (Europarl v7, CommonCrawl, News Commentary v9; "
                     "dev newstest2013, test newstest2014)",
               splits={"train": _files("europarl-v7.de-en.{lang}", "commoncrawl.de-en.{lang}",
                                       "news-commentary-v9.de-en.{lang}"),
                       "dev": _files("newstest2013.{lang}"), "test": _files("newstest2014.{lang}")},
               clean=CleanRules(max_words=250, max_ratio=1.5),
               hub=HubSource("wmt/wmt14", "de-en",
                             {"train": "train", "dev": "validation", "test": "test"})),
    CorpusSpec("wmt13-en-ru", ("en", "ru"), merges=60_000,
               about="WMT'13 En-Ru (CommonCrawl, News Commentary v8, Yandex 1M; "
                     "dev newstest2012, test newstest2013)",
               splits={"train": _files("commoncrawl.ru-en.{lang}", "news-commentary-v8.ru-en.{lang}",
                                       "corpus.en_ru.1m.{lang}"),
                       "dev": _files("newstest2012.{lang}"), "test": _files("newstest2013.{lang}")},
               clean=CleanRules(max_words=250, max_ratio=1.5),
               hub=HubSource("wmt/wmt13", "ru-en",
                             {"train": "train", "dev": "validation", "test": "test"})),
    CorpusSpec("custom", ("src", "tgt"), merges=8000, clean=CleanRules(max_ratio=3.0),
               about="any aligned files: {train,dev,test}.{lang} in --source, or --split-file",
               splits={s: _files(f"{s}.{{lang}}") for s in SPLITS}),
)}


def get_spec(name: str, lm_names: Iterable[str] = ()) -> CorpusSpec:
    """The spec of a translation corpus by name; a one-line error listing the known names
    (and ``lm_names``, the language-modelling corpora, which build on this module)."""
    if name not in CORPORA:
        lm = ", ".join(lm_names)
        raise UserError(f"unknown corpus {name!r}; choose one of {', '.join(CORPORA)} "
                        f"(translation)" + (f" or {lm} (language modelling)" if lm else ""))
    return CORPORA[name]


def direction(spec: CorpusSpec, src_lang: str | None, tgt_lang: str | None) -> tuple[str, str]:
    """(source, target) language codes: the spec's default, or the user's within its pair."""
    src, tgt = src_lang or spec.langs[0], tgt_lang or spec.langs[1]
    if src_lang and not tgt_lang and src in spec.langs:
        tgt = spec.langs[1 - spec.langs.index(src)]
    if tgt_lang and not src_lang and tgt in spec.langs:
        src = spec.langs[1 - spec.langs.index(tgt)]
    if src == tgt:
        raise UserError(f"source and target language are both {src!r}; give two different codes")
    if spec.name != "custom" and {src, tgt} != set(spec.langs):
        raise UserError(f"{spec.name} has languages {spec.langs[0]} and {spec.langs[1]}, "
                        f"not {src}-{tgt}; pass --src-lang/--tgt-lang from that pair")
    return src, tgt


Resolved = dict[str, list[tuple[Path, Path, Format]]]


def resolve_files(spec: CorpusSpec, source: Path | None, overrides: dict[str, tuple[Path, Path]],
                  src: str, tgt: str, only: tuple[str, ...] = SPLITS) -> Resolved:
    """Concrete (src, tgt, format) files for the splits ``only``; overrides are plain aligned text."""
    resolved: Resolved = {}
    missing: list[str] = []
    for split in only:
        if split in overrides:
            pairs = [(*overrides[split], "text")]
        elif split == "dev" and spec.dev_from_train:
            continue
        elif source is None:
            missing.append(f"{split} (no --source folder given)")
            continue
        else:
            pairs = [(source / p.pattern.format(lang=src), source / p.pattern.format(lang=tgt),
                      p.fmt) for p in spec.splits[split]]
        absent = [str(path) for a, b, _ in pairs for path in (a, b) if not path.is_file()]
        if absent:
            missing.append(f"{split} ({', '.join(absent)})")
        resolved[split] = pairs
    if missing:
        raise UserError(f"{spec.name}: missing files for split {'; '.join(missing)}; point a split "
                        f"elsewhere with --split-file SPLIT=SRC,TGT")
    return resolved


def _read_part(path: Path, fmt: Format) -> list[str]:
    if fmt == "xml":
        return iwslt.xml_segments(path)
    if fmt == "tags":
        return iwslt.train_tags_lines(path)
    return read_lines(path)


def read_split(parts: list[tuple[Path, Path, Format]]) -> tuple[list[str], list[str]]:
    """Both sides of a split: its parts read in their formats, checked aligned, concatenated."""
    src: list[str] = []
    tgt: list[str] = []
    for src_path, tgt_path, fmt in parts:
        a, b = _read_part(src_path, fmt), _read_part(tgt_path, fmt)
        check_aligned(src_path, a, tgt_path, b)
        src += a
        tgt += b
    return src, tgt
