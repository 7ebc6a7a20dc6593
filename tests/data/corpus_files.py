"""Tiny corpora in each publisher's layout, written by the tests."""

from __future__ import annotations

from pathlib import Path

WORDS_DE = ["das", "haus", "ist", "groß", "ein", "kind", "spielt", "im", "garten", "mit", "dem", "hund"]
WORDS_EN = ["the", "house", "is", "big", "a", "child", "plays", "in", "garden", "with", "dog", "cat"]


def sentences(words: list[str], n: int, offset: int = 0) -> list[str]:
    """``n`` distinct short sentences made of ``words`` (deterministic)."""
    out = []
    for i in range(offset, offset + n):
        length = 3 + i % 5
        out.append(" ".join(words[(i * 7 + j * 3) % len(words)] for j in range(length)) + f" {i}.")
    return out


def write_lines(path: Path, lines: list[str]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def write_pair(folder: Path, stem: str, langs: tuple[str, str], n: int, offset: int = 0) -> None:
    """``stem.{src}`` and ``stem.{tgt}``, line-aligned."""
    write_lines(folder / f"{stem}.{langs[0]}", sentences(WORDS_DE, n, offset))
    write_lines(folder / f"{stem}.{langs[1]}", sentences(WORDS_EN, n, offset))
