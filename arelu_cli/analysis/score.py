"""``arelu score``: detokenized, case-sensitive corpus BLEU and chrF with sacrebleu.

BLEU is the paper's (:func:`arelu_cli.decode.bleu.paper_bleu`, the one the training's validation
uses): one reference, mixed case, the 13a tokenizer, exponential smoothing; its signature
(``nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:...``) is printed and stored with
the score, as is chrF's. The references are a plain text file, or, for an output of
``arelu translate --split NAME --out OUT``, found through ``OUT.json``: the raw target
side of that split of the prepared corpus -- only while that split is still the text that
was translated (``OUT.json`` records its checksum), never the split of a corpus prepared
again since. Rows are appended to a CSV of this command's columns only, leaving its earlier
rows byte for byte as they were.

``arelu significance`` (:func:`compare_files`) reads translations the same way and tests one
system against a baseline with the paired bootstrap of
:mod:`arelu_cli.analysis.significance`, several runs (seeds) a side joined.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from arelu_cli.data.prepared import META, Prepared, load_prepared
from arelu_cli.util.errors import UserError
from arelu_cli.decode.bleu import bleu_chrf
from arelu_cli.util.atomic import atomic_write_text
from arelu_cli.util.ownership import csv_header
from arelu_cli.util.signatures import signature
from arelu_cli.data.textio import read_text_lines
from arelu_cli.decode.output import meta_path


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
        lines = read_text_lines(ref)
        _check_ref_agrees(hyp, ref, lines, meta)
        return lines, str(ref)
    if meta.get("split") is None:
        raise UserError(f"give --ref: {hyp} has no {meta_path(hyp).name} naming the prepared "
                        "split it translates (written by arelu translate --split NAME --out FILE)")
    data = load_prepared(meta["data"])
    _check_same_split(hyp, meta, data)
    return data.references(meta["split"]), f"{meta['data']}:{meta['split']}"


def _check_ref_agrees(hyp: Path, ref: Path, lines: list[str], meta: dict) -> None:
    """Refuse a ``--ref`` that contradicts what ``hyp``'s ``.json`` says it translates (dev
    hypotheses scored against test references), where that prepared split is at hand."""
    split, data = meta.get("split"), meta.get("data")
    if not (split and data and Path(data).is_dir()):
        return
    try:
        expected = load_prepared(data).references(split)
    except UserError:  # the folder changed beyond reading: --ref alone decides
        return
    if lines != expected:
        raise UserError(f"--ref {ref} is not the references of {hyp}: its "
                        f"{meta_path(hyp).name} says it translates the {split} split of {data}; "
                        "drop --ref to score against that split's references, or give them")


def score_files(hyp: str | Path, ref: str | Path | None = None) -> Score:
    """Score a hypothesis file against ``ref`` or the split named in ``hyp``'s ``.json``."""
    hyp = Path(hyp)
    hypotheses, references, ref_name, meta = _hypotheses_and_references(
        hyp, None if ref is None else Path(ref))
    bleu, chrf, bleu_sig, chrf_sig = bleu_chrf(hypotheses, references)
    ref_sha256 = hashlib.sha256("\n".join(references).encode()).hexdigest()
    return Score(bleu, chrf, bleu_sig, chrf_sig, len(references), str(hyp), ref_name, meta,
                 ref_sha256)


def _hypotheses_and_references(hyp: Path, ref: Path | None
                               ) -> tuple[list[str], list[str], str, dict]:
    """A translation's lines, its references and their name, and its ``.json`` metadata."""
    meta = _translate_meta(hyp)
    if meta.get("n_best", 1) > 1:
        raise UserError(f"{hyp} is an n-best list (--n-best {meta['n_best']}); score the output "
                        "of arelu translate without --n-best")
    hypotheses = read_text_lines(hyp)
    references, ref_name = _references(hyp, ref, meta)
    if len(hypotheses) != len(references):
        raise UserError(f"{hyp} has {len(hypotheses)} lines but the references ({ref_name}) have "
                        f"{len(references)}; they must be line-aligned")
    if not references:
        raise UserError(f"nothing to score: {hyp} and {ref_name} are empty")
    return hypotheses, references, ref_name, meta


SIGNIFICANCE_COLUMNS = ("system", "baseline", "runs", "sentences", "bleu", "baseline_bleu",
                        "delta", "delta_low", "delta_high", "p_value", "bleu_low", "bleu_high",
                        "run_bleu", "baseline_run_bleu", "ref", "bootstrap_signature",
                        "signature")
"""The columns of a significance CSV (``arelu significance``), in order."""


def compare_files(systems: list[str | Path], baselines: list[str | Path],
                  ref: str | Path | None = None, samples: int = 1000, seed: int = 12345
                  ) -> dict:
    """The paired bootstrap of a system's translations against a baseline's
    (:mod:`arelu_cli.analysis.significance`), as a row of :data:`SIGNIFICANCE_COLUMNS`.

    ``systems[i]`` and ``baselines[i]`` are the i-th run (training seed) of each side, all
    translations of the same test sentences; with several runs the test is on the runs
    joined, resampling test sentences with all their runs' translations. References: ``ref``,
    else each file's split (``FILE.json``), which must be the same text for all of them."""
    from arelu_cli.analysis.significance import bootstrap_signature, compare_to_baseline
    from arelu_cli.decode.bleu import corpus_bleu, paper_bleu

    if not systems or len(systems) != len(baselines):
        raise UserError(f"give one --baseline per --hyp (the same runs, e.g. seeds, in the same "
                        f"order); got {len(systems)} --hyp and {len(baselines)} --baseline")
    if samples < 1:
        raise UserError(f"--samples must be >= 1, got {samples}")
    sides = {}
    for name, files in (("system", systems), ("baseline", baselines)):
        sides[name] = [_hypotheses_and_references(Path(f), None if ref is None else Path(ref))
                       for f in files]
    references, ref_name = sides["system"][0][1], sides["system"][0][2]
    for name, files in (("system", systems), ("baseline", baselines)):
        for f, (_, refs, other, _) in zip(files, sides[name]):
            if refs != references:
                raise UserError(f"{f} translates other sentences ({other}) than {systems[0]} "
                                f"({ref_name}); a paired test needs the same test set")
    runs = len(systems)
    joined = {name: [line for hyps, *_ in side for line in hyps] for name, side in sides.items()}
    metric = paper_bleu()
    (result,) = compare_to_baseline(joined["baseline"], {"system": joined["system"]},
                                    references * runs, samples, seed, metric, runs).values()
    row = {"system": ";".join(map(str, systems)), "baseline": ";".join(map(str, baselines)),
           "runs": runs, "ref": ref_name,
           "run_bleu": ";".join(f"{corpus_bleu(h, r):.2f}" for h, r, *_ in sides["system"]),
           "baseline_run_bleu": ";".join(f"{corpus_bleu(h, r):.2f}"
                                         for h, r, *_ in sides["baseline"]),
           "bootstrap_signature": bootstrap_signature(metric, samples, seed),
           "signature": signature(refs=hashlib.sha256("\n".join(references).encode())
                                  .hexdigest()[:12]),
           **dataclasses.asdict(result)}
    return {key: row[key] for key in SIGNIFICANCE_COLUMNS}


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


def append_row(row: dict, path: str | Path, columns: tuple[str, ...] = COLUMNS,
               kind: str = "score") -> pd.DataFrame:
    """Add a row to a scores CSV (created if missing or empty) and return all its rows.

    The file is rewritten atomically as its old bytes plus the new line, and only when its
    header is exactly ``columns`` (:data:`COLUMNS`, or :data:`SIGNIFICANCE_COLUMNS` for an
    ``arelu significance`` CSV): any other file is refused, never reformatted.
    """
    path = Path(path)
    header = csv_header(path)
    if header is not None and header != list(columns):
        raise UserError(f"{path} exists and is not an arelu {kind} CSV (its header is "
                        f"{','.join(header)[:60]!r}); choose another --out")
    line = pd.DataFrame([row], columns=list(columns)).to_csv(index=False, header=header is None)
    try:
        old = path.read_bytes().decode("utf-8") if header is not None else ""  # \r\n kept
    except UnicodeDecodeError:
        raise UserError(f"{path} is not UTF-8 text; choose another --out") from None
    atomic_write_text(path, old + ("\n" if old and not old.endswith("\n") else "") + line)
    return pd.read_csv(path)
