"""The IWSLT'14 release formats and the standard fairseq De-En split (``prepare-iwslt14.sh``).

- ``train.tags.de-en.{de,en}``: one or more sentences per line, with talk metadata lines.
  As fairseq does, ``<url>``, ``<talkid>`` and ``<keywords>`` lines are dropped and the
  ``<title>``/``<description>`` tags are stripped (their text is kept as a sentence); the
  few other one-tag metadata lines some releases have (``<speaker>``, ``<reviewer>``,
  ``<translator>``) are dropped too. Both sides carry the same metadata lines, so the
  alignment survives.
- ``IWSLT14.TED*.de-en.{de,en}.xml``: the text of each ``<seg>``, XML entities decoded.
- The split: valid = every 23rd (cleaned) training pair, train = the rest, test =
  dev2010 + TEDX.dev2012 + tst2010 + tst2011 + tst2012, in that order.
"""

from __future__ import annotations

import html
import re
from pathlib import Path

from arelu_cli.data.textio import read_lines

VALID_EVERY = 23
TEST_SETS = ("TED.dev2010", "TEDX.dev2012", "TED.tst2010", "TED.tst2011", "TED.tst2012")

_SEG = re.compile(r"<seg[^>]*>(.*?)</seg>", re.DOTALL)
_DROPPED_TAGS = ("<url>", "<talkid>", "<keywords>", "<speaker>", "<reviewer", "<translator")
_STRIPPED_TAGS = re.compile(r"</?(?:title|description)>")


def xml_segments(path: Path) -> list[str]:
    """The text of every ``<seg>`` element of an IWSLT/WMT XML (or SGML) file, in order."""
    text = "\n".join(read_lines(path))
    return [html.unescape(seg).strip() for seg in _SEG.findall(text)]


def train_tags_lines(path: Path) -> list[str]:
    """The sentence lines of a ``train.tags`` file, metadata removed as fairseq does."""
    kept = []
    for line in read_lines(path):
        stripped = line.lstrip()
        if stripped.startswith(_DROPPED_TAGS):
            continue
        kept.append(_STRIPPED_TAGS.sub("", line))
    return kept


def xml_test_files(lang_pair: str, lang: str) -> list[str]:
    """File names of the five XML sets that make the standard test split, in fairseq order."""
    return [f"IWSLT14.{name}.{lang_pair}.{lang}.xml" for name in TEST_SETS]


def split_valid(src: list[str], tgt: list[str]) -> tuple[tuple[list[str], list[str]],
                                                         tuple[list[str], list[str]]]:
    """``(train, valid)``: valid is every 23rd pair (1-based lines 23, 46, ...), as fairseq."""
    valid = [i for i in range(VALID_EVERY - 1, len(src), VALID_EVERY)]
    chosen = set(valid)
    train = [i for i in range(len(src)) if i not in chosen]
    return (([src[i] for i in train], [tgt[i] for i in train]),
            ([src[i] for i in valid], [tgt[i] for i in valid]))
