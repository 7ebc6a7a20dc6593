"""Markdown pieces of every REPORT.md: number formatting, tables, sections and claim lines."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional


@dataclass(frozen=True)
class Section:
    """One table or figure of the report: our numbers beside the paper's, and verdicts."""

    title: str
    source: str
    """The CSV the section is computed from."""
    table: str = ""
    verdicts: list[str] = field(default_factory=list)
    figure: Optional[str] = None
    """PNG file name (relative to the results folder) to embed, when it exists."""


def render_section(section: Section, folder: Path) -> str:
    """A section as Markdown: its title, source, table, figure (when drawn in ``folder``)
    and verdicts, one per line."""
    parts = [f"## {section.title}", f"Source: `{section.source}`.", section.table]
    if section.figure:
        if (Path(folder) / section.figure).is_file():
            parts.append(f"![{section.title}]({section.figure})")
        else:
            parts.append(f"`{section.figure}` is not drawn yet (`arelu report {folder}` draws it).")
    parts.append("\n".join(f"- {line}" for line in section.verdicts))
    return "\n\n".join(p for p in parts if p)


def page(title: str, intro: str, sections: Sequence[Section], folder: Path,
             closing: Sequence[str] = ()) -> str:
    """A REPORT.md: the title, an introduction, every section and closing paragraphs."""
    return "\n\n".join([f"# {title}", intro, *(render_section(s, folder) for s in sections),
                         *closing]) + "\n"


def missing(value: object) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def fmt(value: object, digits: int = 2) -> str:
    """A number to ``digits`` decimals, ``-`` for missing; other values as text."""
    if missing(value):
        return "-"
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return f"{value:,.{digits}f}"
    return str(value)


def signed(value: Optional[float], digits: int = 2) -> str:
    return "-" if missing(value) else f"{value:+.{digits}f}"


def delta_text(row: Mapping) -> str:
    """A paired bootstrap row (:class:`~arelu_cli.analysis.significance.PairedBootstrap`'s
    fields) as ``Δ [95% CI], p``: ``+1.20 [+0.40, +2.00], p = 0.004``."""
    return (f"{row['delta']:+.2f} [{row['delta_low']:+.2f}, {row['delta_high']:+.2f}], "
            f"p = {row['p_value']:.3f}")


def md_table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """A GitHub Markdown table; cells are already formatted strings or plain values."""
    def cell(v: object) -> str:
        return str(v).replace("|", "\\|").replace("\n", " ")
    lines = ["| " + " | ".join(map(cell, headers)) + " |",
             "|" + "|".join("---" for _ in headers) + "|"]
    lines += ["| " + " | ".join(map(cell, row)) + " |" for row in rows]
    return "\n".join(lines)


def match_line(matches: Sequence[str], differs: Sequence[str], tolerance: str) -> str:
    """``Matches the paper (|Δ| ≤ tol): ...; differs: ...`` from labelled comparisons."""
    if not matches and not differs:
        return "No number here has a paper counterpart to compare with."
    ok = ", ".join(matches) or "none"
    bad = ", ".join(differs) or "none"
    return f"**Matches the paper** ({tolerance}): {ok}. **Differs**: {bad}."


def compare_numbers(label: str, ours: object, theirs: object, tolerance: float, digits: int = 2,
                    matches: Optional[list] = None, differs: Optional[list] = None) -> None:
    """Append ``label (ours vs paper, Δ)`` to ``matches`` or ``differs``; skip missing numbers."""
    if missing(ours) or missing(theirs):
        return
    delta = float(ours) - float(theirs)
    text = f"{label} ({fmt(ours, digits)} vs {fmt(theirs, digits)}, Δ {signed(delta, digits)})"
    (matches if abs(delta) <= tolerance + 1e-12 else differs).append(text)


def claim(text: str, holds: Optional[bool], evidence: str) -> str:
    """A claim of the paper checked on our numbers: ✓ holds, ✗ does not, ? cannot be checked."""
    mark = "?" if holds is None else ("✓" if holds else "✗")
    word = "cannot be checked" if holds is None else ("holds" if holds else "does not hold")
    return f"{mark} Paper's claim — {text}: {word} here ({evidence})."
