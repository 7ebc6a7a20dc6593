"""``arelu score``: detokenized, case-sensitive corpus BLEU and chrF with sacrebleu.

BLEU is the paper's (:func:`arelu_cli.nmt.bleu.paper_bleu`, the one the training's validation
uses): one reference, mixed case, the 13a tokenizer, exponential smoothing; its signature
(``nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:...``) is printed and stored with
the score, as is chrF's. The references are a plain text file, or, for an output of
``arelu translate --split NAME --out OUT``, found through ``OUT.json``: the raw target
side of that split of the prepared corpus -- only while that split is still the text that
was translated (``OUT.json`` records its checksum), never the split of a corpus prepared
again since. Rows are appended to a CSV of this command's columns only, leaving its earlier
rows byte for byte as they were.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from arelu_cli.data.prepared import META, Prepared, load_prepared
from arelu_cli.errors import UserError
from arelu_cli.nmt.bleu import bleu_chrf
from arelu_cli.results import atomic_write_text, csv_header, signature
from arelu_cli.data.textio import read_text_lines
from arelu_cli.nmt.inference import meta_path


@dataclass(frozen=True)
class Score:
    bleu: float
    chrf: float
    bleu_signature: str
    chrf_signature: str
    sentences: int
    hyp: str
    ref: str
    meta: dict
    """What ``arelu translate`` recorded about the hypotheses (empty when unknown)."""
    ref_sha256: str = ""
    """SHA-256 of the reference lines scored against (joined by newlines)."""


COLUMNS = ("hyp", "ref", "sentences", "bleu", "chrf", "transform", "alpha", "tau", "beam",
           "length_penalty", "renormalize", "checkpoint", "split", "bleu_signature",
           "chrf_signature", "signature")
"""The columns of a scores CSV, in order; rows are appended only to a CSV with exactly these."""


def _translate_meta(hyp: Path) -> dict:
    path = meta_path(hyp)
    if not path.is_file():
        return {}
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except ValueError:
        raise UserError(f"{path} is not valid JSON; delete it or give --ref") from None


def _check_same_split(hyp: Path, meta: dict, data: Prepared) -> None:
    """Refuse a translation of a split that has changed since (the folder prepared again)."""
    split, recorded = meta["split"], meta.get("split_sha256")
    if recorded is not None:
        stale = recorded != data.split_checksum(split)
    else:  # written before translations recorded the checksum: the folder must be older
        stale = (data.path / META).stat().st_mtime > meta_path(hyp).stat().st_mtime
    if stale:
        raise UserError(f"{hyp} was translated from another version of {data.path} (its {split} "
                        f"split was prepared again since); translate it again, or pass --ref "
                        f"FILE to score it against a file of references")


def _references(hyp: Path, ref: Path | None, meta: dict) -> tuple[list[str], str]:
    if ref is not None:
        return read_text_lines(ref), str(ref)
    if meta.get("split") is None:
        raise UserError(f"give --ref: {hyp} has no {meta_path(hyp).name} naming the prepared "
                        "split it translates (written by arelu translate --split NAME --out FILE)")
    data = load_prepared(meta["data"])
    _check_same_split(hyp, meta, data)
    return data.references(meta["split"]), f"{meta['data']}:{meta['split']}"


def score_files(hyp: str | Path, ref: str | Path | None = None) -> Score:
    """Score a hypothesis file against ``ref`` or the split named in ``hyp``'s ``.json``."""
    hyp = Path(hyp)
    meta = _translate_meta(hyp)
    if meta.get("n_best", 1) > 1:
        raise UserError(f"{hyp} is an n-best list (--n-best {meta['n_best']}); score the output "
                        "of arelu translate without --n-best")
    hypotheses = read_text_lines(hyp)
    references, ref_name = _references(hyp, None if ref is None else Path(ref), meta)
    if len(hypotheses) != len(references):
        raise UserError(f"{hyp} has {len(hypotheses)} lines but the references ({ref_name}) have "
                        f"{len(references)}; they must be line-aligned")
    if not references:
        raise UserError(f"nothing to score: {hyp} and {ref_name} are empty")
    bleu, chrf, bleu_sig, chrf_sig = bleu_chrf(hypotheses, references)
    ref_sha256 = hashlib.sha256("\n".join(references).encode()).hexdigest()
    return Score(bleu, chrf, bleu_sig, chrf_sig, len(references), str(hyp), ref_name, meta,
                 ref_sha256)


def score_row(score: Score) -> dict:
    """The CSV row of a score; the run's fields come from the translation's metadata."""
    m = score.meta
    run = {key: m.get(key) for key in ("transform", "alpha", "tau", "beam", "length_penalty",
                                       "renormalize", "checkpoint", "split")}
    row = {"hyp": score.hyp, "ref": score.ref, "sentences": score.sentences,
           "bleu": score.bleu, "chrf": score.chrf, **run,
           "bleu_signature": score.bleu_signature, "chrf_signature": score.chrf_signature,
           "signature": signature(transform=m.get("transform"), alpha=m.get("alpha"),
                                  tau=m.get("tau"), checkpoint=m.get("checkpoint"),
                                  beam=m.get("beam"), refs=score.ref_sha256[:12] or None)}
    return {key: row[key] for key in COLUMNS}


def append_row(row: dict, path: str | Path) -> pd.DataFrame:
    """Add a row to a scores CSV (created if missing or empty) and return all its rows.

    The file is rewritten atomically as its old bytes plus the new line, and only when its
    header is exactly :data:`COLUMNS`: any other file is refused, never reformatted.
    """
    path = Path(path)
    header = csv_header(path)
    if header is not None and header != list(COLUMNS):
        raise UserError(f"{path} exists and is not an arelu score CSV (its header is "
                        f"{','.join(header)[:60]!r}); choose another --out")
    line = pd.DataFrame([row], columns=list(COLUMNS)).to_csv(index=False, header=header is None)
    try:
        old = path.read_bytes().decode("utf-8") if header is not None else ""  # \r\n kept
    except UnicodeDecodeError:
        raise UserError(f"{path} is not UTF-8 text; choose another --out") from None
    atomic_write_text(path, old + ("\n" if old and not old.endswith("\n") else "") + line)
    return pd.read_csv(path)
