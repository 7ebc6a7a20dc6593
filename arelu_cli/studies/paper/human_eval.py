"""Blind human evaluation (the paper's Sec. "Human Evaluation", Table tab:human, Appendix
"Instructions for Human Annotators").

:func:`export_sheets` draws random test sentences, a ``shared_fraction`` of them given to
every annotator (the paper: two samples of 135 with 45 shared), and writes one CSV sheet per
annotator: item, source, the candidates -- the reference and each system -- in columns
A, B, C, ... shuffled per item, and empty ``score_A``, ``score_B``, ... columns. Item ids say
nothing about the systems; the private ``key.csv`` maps every (item, column) to its system.

:func:`score_sheets` reads the filled sheets back with the key: mean and sample std per
system over all judgements (shared items count once per annotator, as the paper's "270
examples with repetitions"), and Cohen's kappa between each pair of annotators over the
(shared item, candidate) pairs both scored. Scores are on the paper's 4-point meaning scale
(4 = everything ... 1 = none), refined by ``+``/``-``: in means ``3+`` counts 3.25 and ``4-``
3.75; kappa uses the integer part (4 categories), both unweighted and linearly weighted
(weights ``|i - j| / 3``). The paper's "Cohen's kappa = 0.56" does not say which; the report
compares it with the unweighted one. Blank cells are "don't know" and are left out.
"""

from __future__ import annotations

import hashlib
import random
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import combinations
from pathlib import Path

import numpy as np
import pandas as pd

from arelu_cli.util.errors import UserError
from arelu_cli.util.atomic import atomic_write_text
from arelu_cli.util.results import write_rows

REFERENCE = "reference"
SCALE = (1, 2, 3, 4)
REFINE = 0.25
"""What a ``+`` adds to (a ``-`` takes from) a score in means."""
KEY_COLUMNS = ("item", "annotator", "index", "column", "system", "sha256")
"""A key's columns; ``sha256`` is the hash of the item's source and the column's candidate
text as exported (:func:`text_hash`), so that an edited sheet is caught."""
INSTRUCTIONS = """\
You are shown a source sentence and several candidate translations. Please indicate, for
each, on a 4-point scale, how much of the meaning is represented in the translation,
ignoring the language quality. Imagine you are a forgiving reader, ignoring any error that
does not prevent you from getting the meaning of the text.

The scale of meaning preservation is: 4 = Everything / 3 = Most / 2 = Little / 1 = None

You can refine your judgement using + or -, e.g. 3+. When you do not know, leave the cell
empty. Write the score of candidate A in score_A, of B in score_B, and so on.
"""
_SCORE = re.compile(r"^([1-4])(?:\.0*)?\s*([+\-\u2212]?)$")


@dataclass(frozen=True)
class ExportedSheets:
    sheets: dict[str, Path]
    """Annotator -> their sheet (give them this file and INSTRUCTIONS.txt)."""
    key: Path
    """The private key: keep it from the annotators."""
    n_shared: int


def _letters(n: int) -> list[str]:
    return [chr(ord("A") + i) for i in range(n)]


def _plan(n_sentences: int, n_items: int, annotators: Sequence[str], shared_fraction: float,
          rng: random.Random) -> tuple[dict[str, list[int]], int]:
    """Sentence indices per annotator: the shared ones plus their own, in random order."""
    if n_items < 1 or not 0.0 <= shared_fraction <= 1.0:
        raise UserError(f"need items >= 1 and a shared fraction in [0, 1], got {n_items} and "
                        f"{shared_fraction:g}")
    if len(set(annotators)) != len(annotators) or not annotators:
        raise UserError(f"annotator names must be distinct and non-empty, got {list(annotators)}")
    n_shared = round(n_items * shared_fraction) if len(annotators) > 1 else 0
    own = n_items - n_shared
    total = n_shared + own * len(annotators)
    if total > n_sentences:
        raise UserError(f"{len(annotators)} annotators x {n_items} items with {n_shared} shared "
                        f"need {total} sentences; the test set has {n_sentences}")
    pool = rng.sample(range(n_sentences), total)
    plan = {}
    for j, name in enumerate(annotators):
        items = pool[:n_shared] + pool[n_shared + j * own:n_shared + (j + 1) * own]
        rng.shuffle(items)
        plan[name] = items
    return plan, n_shared


def key_path(out_dir: str | Path) -> Path:
    """Where :func:`export_sheets` writes the key: a sibling folder ``<out_dir>-key/``, so
    that ``out_dir`` (sheets and instructions) can go to the annotators as it is."""
    out_dir = Path(out_dir)
    return out_dir.parent / f"{out_dir.name}-key" / "key.csv"


def export_sheets(sources: Sequence[str], references: Sequence[str],
                  systems: Mapping[str, Sequence[str]], out_dir: str | Path, n_items: int = 135,
                  annotators: Sequence[str] = ("a1", "a2"), seed: int = 0,
                  shared_fraction: float = 1 / 3) -> ExportedSheets:
    """Write ``sheet_<annotator>.csv`` per annotator and ``INSTRUCTIONS.txt`` in ``out_dir``,
    and the key that unblinds them in :func:`key_path` (outside ``out_dir``)."""
    if REFERENCE in systems or not systems:
        raise UserError(f"give at least one system, none named {REFERENCE!r} (the reference is "
                        "always added as a candidate)")
    lengths = {len(sources), len(references), *(len(h) for h in systems.values())}
    if len(lengths) != 1:
        raise UserError("sources, references and every system need one line per sentence")
    rng = random.Random(seed)
    plan, n_shared = _plan(len(sources), n_items, annotators, shared_fraction, rng)
    texts = {REFERENCE: references, **systems}
    letters = _letters(len(texts))
    out_dir, sheets, key = Path(out_dir), {}, []
    for name, indices in plan.items():
        rows = []
        for k, index in enumerate(indices, start=1):
            item, order = f"{name}-{k:03d}", list(texts)
            rng.shuffle(order)
            rows.append({"item": item, "source": sources[index],
                         **{c: texts[s][index] for c, s in zip(letters, order)},
                         **{f"score_{c}": "" for c in letters}})
            key += [{"item": item, "annotator": name, "index": index, "column": c, "system": s,
                     "sha256": text_hash(sources[index], texts[s][index])}
                    for c, s in zip(letters, order)]
        sheets[name] = out_dir / f"sheet_{name}.csv"
        write_rows(rows, sheets[name])
    key_file = key_path(out_dir)
    write_rows(key, key_file, KEY_COLUMNS)
    atomic_write_text(out_dir / "INSTRUCTIONS.txt", INSTRUCTIONS)
    return ExportedSheets(sheets, key_file, n_shared)


def text_hash(source: str, candidate: str) -> str:
    """What the key records of a sheet's cell: the SHA-256 of its source and candidate."""
    return hashlib.sha256(f"{source}\n{candidate}".encode()).hexdigest()


def parse_score(text: str) -> tuple[float, int] | None:
    """``"3+"`` -> ``(3.25, 3)``, ``"4-"`` -> ``(3.75, 4)``, blank -> None: (value, category)."""
    text = str(text).strip()
    if not text:
        return None
    match = _SCORE.match(text)
    if match is None:
        raise ValueError(f"{text!r} is not a score: use 1, 2, 3 or 4, optionally with + or -")
    base, sign = int(match.group(1)), match.group(2)
    return base + (REFINE if sign == "+" else -REFINE if sign else 0.0), base


def cohen_kappa(a: Sequence[int], b: Sequence[int], categories: Sequence[int] = SCALE,
                weights: str = "none") -> float:
    """Cohen's kappa of two raters' paired labels; ``weights`` none or linear (|i-j|/(K-1)).

    ``kappa = 1 - sum(W * O) / sum(W * E)`` with O the observed joint proportions, E the
    product of the marginals; NaN when chance agreement is already perfect.
    """
    if len(a) != len(b) or not a:
        raise ValueError("kappa needs two equally long non-empty label lists, got "
                         f"{len(a)} and {len(b)}")
    if weights not in ("none", "linear"):
        raise ValueError(f"weights must be none or linear, got {weights!r}")
    pos = {c: i for i, c in enumerate(categories)}
    k = len(categories)
    observed = np.zeros((k, k))
    for x, y in zip(a, b):
        observed[pos[x], pos[y]] += 1.0
    observed /= observed.sum()
    expected = np.outer(observed.sum(axis=1), observed.sum(axis=0))
    i, j = np.indices((k, k))
    w = (i != j).astype(float) if weights == "none" else np.abs(i - j) / (k - 1)
    chance = float((w * expected).sum())
    return float("nan") if chance == 0.0 else 1.0 - float((w * observed).sum()) / chance


def _read(path: Path, what: str) -> pd.DataFrame:
    if not Path(path).is_file():
        raise UserError(f"{what} not found: {path}")
    return pd.read_csv(path, dtype=str, keep_default_na=False)


def _check_sheet(path: Path, sheet: pd.DataFrame, key: pd.DataFrame) -> None:
    """A filled sheet is the one exported: every row an item of the key, all of one
    annotator's items (none deleted, none of another's sheet), every score column of its
    candidates, and the exported texts."""
    owner = dict(zip(key["item"], key["annotator"]))
    records = sheet.to_dict("records")
    for r in records:
        if r.get("item") not in owner:
            raise UserError(f"{path}: item {r.get('item')!r} is not in the key; is this "
                            "the key exported with these sheets?")
    if not records:
        raise UserError(f"{path} holds no items; give the sheet as exported, filled")
    name = Counter(owner[r["item"]] for r in records).most_common(1)[0][0]
    for r in records:
        if owner[r["item"]] != name:
            raise UserError(f"{path}: item {r['item']} was exported to {owner[r['item']]}, "
                            f"not to {name} whose sheet this is; move its row back to "
                            f"{owner[r['item']]}'s sheet")
    mine = key[key["annotator"] == name]
    missing = sorted(set(mine["item"]) - {r["item"] for r in records})
    if missing:
        raise UserError(f"{path} holds {len(records)} of the {mine['item'].nunique()} items "
                        f"exported to {name} (missing {', '.join(missing[:3])}"
                        f"{', ...' if len(missing) > 3 else ''}); restore the deleted rows "
                        "(leave a score blank for don't know)")
    for c in sorted(set(mine["column"])):
        if f"score_{c}" not in sheet.columns:
            raise UserError(f"{path} has no score_{c} column (deleted?); restore it as exported "
                            "(leave a score blank for don't know)")
    texts = {r["item"]: r for r in records}
    for k in mine.to_dict("records"):
        r = texts[k["item"]]
        if text_hash(r.get("source", ""), r.get(k["column"], "")) != k["sha256"]:
            raise UserError(f"{path}, item {k['item']}: the source or candidate "
                            f"{k['column']} was edited since the export; restore the "
                            "exported text (a score judges what was shown)")


def _judgements(sheet_paths: Sequence[str | Path], key: pd.DataFrame) -> pd.DataFrame:
    """One row per scored candidate: annotator, index, system, value, category."""
    lookup = {(r["item"], r["column"]): r for r in key.to_dict("records")}
    columns = sorted(set(key["column"]))
    rows, seen = [], set()
    for path in sheet_paths:
        sheet = _read(path, "sheet")
        _check_sheet(Path(path), sheet, key)
        for r in sheet.to_dict("records"):
            if r["item"] in seen:
                raise UserError(f"{path}: item {r['item']} appears twice (a sheet given twice?)")
            seen.add(r["item"])
            for c in columns:
                if (r["item"], c) not in lookup:
                    continue
                try:
                    parsed = parse_score(r.get(f"score_{c}", ""))
                except ValueError as err:
                    raise UserError(f"{path}, item {r['item']}, score_{c}: {err}") from None
                if parsed is not None:
                    k = lookup[(r["item"], c)]
                    rows.append({"annotator": k["annotator"], "index": int(k["index"]),
                                 "system": k["system"], "value": parsed[0], "category": parsed[1]})
    if not rows:
        raise UserError("the sheets hold no scores yet: fill the score_* columns")
    return pd.DataFrame(rows)


def _agreement(judged: pd.DataFrame) -> list[dict]:
    rows = []
    for x, y in combinations(sorted(judged["annotator"].unique()), 2):
        both = judged[judged["annotator"] == x].merge(
            judged[judged["annotator"] == y], on=("index", "system"), suffixes=("_a", "_b"))
        if both.empty:
            continue
        a, b = both["category_a"].tolist(), both["category_b"].tolist()
        rows.append({"annotator_a": x, "annotator_b": y, "n_items": both["index"].nunique(),
                     "n_judgements": len(both), "kappa": cohen_kappa(a, b),
                     "kappa_linear": cohen_kappa(a, b, weights="linear")})
    return rows


def score_sheets(sheet_paths: Sequence[str | Path],
                 key_path: str | Path) -> tuple[list[dict], list[dict]]:
    """Rows of ``table_human_eval.csv`` (mean, std per system) and ``human_eval_kappa.csv``
    (kappa per annotator pair with shared items) from filled sheets and their key."""
    key = _read(key_path, "key file")
    if tuple(key.columns) != KEY_COLUMNS:
        raise UserError(f"{key_path} is not a key file (columns {list(key.columns)}, expected "
                        f"{list(KEY_COLUMNS)})")
    judged = _judgements(sheet_paths, key)
    order = [REFERENCE] + sorted(s for s in judged["system"].unique() if s != REFERENCE)
    systems = []
    for name in order:
        values = judged.loc[judged["system"] == name, "value"]
        if len(values):
            systems.append({"system": name, "n": len(values), "mean": float(values.mean()),
                            "std": float(values.std(ddof=1)) if len(values) > 1 else None})
    return systems, _agreement(judged)
