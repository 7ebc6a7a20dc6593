"""The tables, claims and ``REPORT.md`` of the attention study
(:mod:`arelu_cli.studies.attention.study`), read from its folder's files alone (the test
references come from the recipe's prepared corpus).

CSVs (one row per measurement, each with its signature):

* ``results.csv``: per attention variant, what became of it (``learns``, ``does not learn``,
  ``diverged``), dev BLEU at the last validation and at its best, test BLEU and chrF at the
  last step, the paired bootstrap against the baseline, the training loss (first, lowest,
  last logged value), the share of exactly-zero attention weights and of queries with an
  empty support per kind, training tokens/s and decoding time with their ratios to the
  baseline;
* ``curves.csv``: the training loss and dev BLEU of every logged step of every run (a
  diverged run up to its last good step);
* ``sparsity.csv``: the per-layer attention counts of every variant (``arelu sparsity
  --attention``'s rows) together; ``heatmaps.csv``: the cross-attention of a few sentences.

Figures: ``curves.png`` (dev BLEU and training loss against steps, a cross where a run
diverged), ``sparsity.png`` (zero weights per layer and kind), ``heatmaps.png``.

A variant **learns** when its last dev BLEU is above 0 and reaches ``[attention_study]
learned_fraction`` of the baseline's; it **diverged** when its training stopped on a
non-finite loss, gradient or weights; its loss is flagged **unstable** when the last logged
training loss is more than :data:`LOSS_RISE` above the lowest. Its test BLEU against the
baseline's is better, worse or inconclusive by the one verdict rule
(:mod:`arelu_cli.studies.verdict`).
"""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from arelu_cli.config import Config
from arelu_cli.decode.bleu import bleu_chrf
from arelu_cli.studies.attention.plots import plot_attention_curves, plot_attention_sparsity
from arelu_cli.studies.attention.variants import variants
from arelu_cli.studies.contract import Table, Tables
from arelu_cli.studies.core import Run
from arelu_cli.studies.markdown import Section, page, delta_text, fmt, md_table
from arelu_cli.studies.plots import plot_attention_heatmaps
from arelu_cli.studies.translation import (bootstrap_rows, dev_log, references,
                                           translation_lines, translation_path)
from arelu_cli.studies.verdict import verdict
from arelu_cli.train import run_dir
from arelu_cli.train.run_dir import diverged, finished
from arelu_cli.util.errors import UserError
from arelu_cli.util.results import read_table

BENCH = "bench_train.csv"
DECODE = "bench_decode.csv"
SPARSITY = "attention_sparsity.csv"
HEATMAPS = "attention_heatmaps.csv"
LOSS_RISE = 0.5
"""Training-loss rise (nats of the output loss) above its lowest value that flags a run as
unstable."""
KINDS = ("encoder", "decoder", "cross")


def _log(variant: Run) -> pd.DataFrame:
    """The run's log: checked against its summary when it finished (a log cut short would
    drop the end of its curve), as it is when it diverged, empty when there is none."""
    if finished(variant.folder):
        return dev_log(variant.folder)
    return run_dir.read_log(variant.folder) if run_dir.has_log(variant.folder) \
        else pd.DataFrame(columns=["step"])


def curve_rows(runs: list[Run]) -> list[dict]:
    rows = []
    for v in runs:
        log = _log(v)
        for record in log.to_dict("records"):
            rows.append({"variant": v.name, "step": int(record["step"]),
                         "train_loss": record.get("train_loss"), "dev_bleu": record.get("val_bleu"),
                         "dev_loss": record.get("val_loss"), "diverged": diverged(v.folder),
                         "signature": record.get("signature", "")})
    return rows


def _diverged_step(variant: Run) -> int | None:
    if not diverged(variant.folder):
        return None
    found = run_dir.read_diverged(variant.folder).get("step")
    if not isinstance(found, int):
        raise UserError(f"{run_dir.diverged_path(variant.folder)} names no step; "
                        f"{run_dir.again(variant.folder)}")
    return found


def _sparsity(frame: pd.DataFrame | None, variant: str) -> dict:
    """Zero weights and empty queries per kind, pooled over the layers."""
    out = {f"{what}_{k}": None for what in ("zeros", "empty") for k in KINDS}
    if frame is None or frame.empty:
        return out
    for kind, part in frame[frame["variant"] == variant].groupby("kind"):
        out[f"zeros_{kind}"] = part["zeros"].sum() / max(part["weights"].sum(), 1)
        out[f"empty_{kind}"] = part["empty_queries"].sum() / max(part["queries"].sum(), 1)
    return out


def _read(path: Path) -> pd.DataFrame | None:
    """A timing CSV of the study; None when it is not there (yet)."""
    return read_table(path, "delete it to measure again") if path.is_file() else None


def _status(dev: float | None, base_dev: float | None, diverged: bool, fraction: float) -> str:
    if diverged:
        return "diverged"
    if dev is None or base_dev is None:
        return "unfinished"
    return "learns" if dev > 0 and dev >= fraction * base_dev else "does not learn"


def _last(frame: pd.DataFrame, column: str) -> float | None:
    values = frame[column].dropna() if column in frame else pd.Series(dtype=float)
    return float(values.iloc[-1]) if len(values) else None


def result_rows(config: Config, runs: list[Run], sparsity: pd.DataFrame | None,
                bench: pd.DataFrame | None, decode: pd.DataFrame | None) -> list[dict]:
    a, step, beam = config.attention_study, config.train.max_steps, config.decode.beam
    refs = references(config.data.path)
    hyps = {v.name: translation_lines(p, len(refs)) for v in runs
            if (p := translation_path(v.folder, step, beam)).is_file() and not diverged(v.folder)}
    logs = {v.name: _log(v) for v in runs}
    base_dev = _last(logs[a.baseline], "val_bleu") if finished(runs[0].folder) else None
    tests = {row["transform"]: row for row in bootstrap_rows(
        [(name, a.baseline) for name in hyps if name != a.baseline],
        {(name, config.train.seed): lines for name, lines in hyps.items()}, refs,
        [(str(config.train.seed), (config.train.seed,))], a.bootstrap_samples)}
    decode_beam = beam if decode is not None and beam in set(decode["beam"]) else (
        None if decode is None else int(decode["beam"].max()))
    rows = []
    for v in runs:
        log, done = logs[v.name], finished(v.folder)
        losses = log["train_loss"].dropna() if "train_loss" in log else pd.Series(dtype=float)
        model = v.config.model
        row = {"variant": v.name, "attention": model.attention,
               "attention_relu": model.attention_relu if model.attention.endswith("relu")
               else None,
               "status": _status(_last(log, "val_bleu") if done else None, base_dev,
                                 diverged(v.folder), a.learned_fraction),
               "steps": int(log["step"].max()) if len(log) else 0,
               "diverged_step": _diverged_step(v),
               "dev_bleu": _last(log, "val_bleu"),
               "dev_bleu_best": run_dir.best_score(run_dir.read_summary(v.folder))
               if done else None,
               "test_bleu": None, "test_chrf": None, "delta": None, "delta_low": None,
               "delta_high": None, "p_value": None,
               "train_loss_first": float(losses.iloc[0]) if len(losses) else None,
               "train_loss_min": float(losses.min()) if len(losses) else None,
               "train_loss_last": float(losses.iloc[-1]) if len(losses) else None,
               "unstable": bool(len(losses) and losses.iloc[-1] > losses.min() + LOSS_RISE),
               **_sparsity(sparsity, v.name)}
        if v.name in hyps:
            row["test_bleu"], row["test_chrf"], _, _ = bleu_chrf(hyps[v.name], refs)
            if v.name in tests:
                row |= {k: tests[v.name][k] for k in ("delta", "delta_low", "delta_high",
                                                      "p_value")}
        row |= _speed(bench, decode, v.name, decode_beam)
        row["signature"] = log["signature"].dropna().iloc[-1] if "signature" in log and \
            log["signature"].notna().any() else ""
        rows.append(row)
    return rows


def _speed(bench: pd.DataFrame | None, decode: pd.DataFrame | None, label: str,
           beam: int | None) -> dict:
    out = {"tokens_per_s": None, "train_speed_ratio": None, "decode_beam": beam,
           "decode_seconds": None, "decode_ratio": None}
    if bench is not None and label in set(bench["variant"]):
        one = bench[bench["variant"] == label].iloc[0]
        out |= {"tokens_per_s": one["tokens_per_s"], "train_speed_ratio": one["speed_ratio"]}
    if decode is not None and beam is not None:
        one = decode[(decode["variant"] == label) & (decode["beam"] == beam)]
        if len(one):  # the median of the paired ratios, as the report says
            out |= {"decode_seconds": one.iloc[0]["seconds"],
                    "decode_ratio": one.iloc[0]["ratio_paired"]}
    return out


def _pct(value: object) -> str:
    return "-" if value is None or (isinstance(value, float) and math.isnan(value)) \
        else f"{100 * float(value):.0f}%"


def _table(rows: list[dict]) -> str:
    def status(r):
        text = r["status"] + (f" at step {r['diverged_step']}" if r["diverged_step"] else "")
        return text + (" (loss rose)" if r["unstable"] else "")

    def ratio(value, x):
        return "-" if value is None else f"{fmt(value, 0)} ({x:.2f}×)" if x else fmt(value, 0)

    return md_table(
        ["attention", "outcome", "dev BLEU (last / best)", "test BLEU", "Δ vs baseline [95% CI], p",
         "train loss first → min → last", "zero weights enc / dec / cross",
         "empty queries enc / dec / cross", "train tokens/s (× baseline)",
         "decoding s (× baseline)"],
        [[r["variant"], status(r), f"{fmt(r['dev_bleu'])} / {fmt(r['dev_bleu_best'])}",
          fmt(r["test_bleu"]), "-" if r["delta"] is None else delta_text(r),
          " → ".join(fmt(r[k]) for k in ("train_loss_first", "train_loss_min", "train_loss_last")),
          " / ".join(_pct(r[f"zeros_{k}"]) for k in KINDS),
          " / ".join(_pct(r[f"empty_{k}"]) for k in KINDS),
          ratio(r["tokens_per_s"], r["train_speed_ratio"]),
          "-" if r["decode_seconds"] is None else
          f"{r['decode_seconds']:.2f} ({r['decode_ratio']:.2f}×)"] for r in rows])


def answer(config: Config, rows: list[dict]) -> str:
    """The paragraph that answers the paper's question from the measurements."""
    a, base = config.attention_study, rows[0]
    groups: dict[str, list[str]] = {}
    for r in rows[1:]:
        if r["status"] == "diverged":
            text = f"{r['variant']} (non-finite training at step {r['diverged_step']})"
        elif r["status"] == "learns":
            text = (f"{r['variant']} (test BLEU {fmt(r['test_bleu'])}"
                    + ("" if r["delta"] is None else
                       f", {r['delta']:+.2f} [{r['delta_low']:+.2f}, {r['delta_high']:+.2f}] vs "
                       f"{a.baseline}: {verdict(r)}")
                    + ("" if r["train_speed_ratio"] is None else
                       f"; trains at {r['train_speed_ratio']:.2f}× its tokens/s")
                    + ("" if r["decode_ratio"] is None else
                       f", decodes in {r['decode_ratio']:.2f}× its time") + ")")
        else:
            text = f"{r['variant']} (last dev BLEU {fmt(r['dev_bleu'])})"
        groups.setdefault(r["status"], []).append(text)
    parts = [f"With the output transform {config.train.transform} and "
             f"{config.train.max_steps} training steps each, {a.baseline} attention reaches "
             f"dev BLEU {fmt(base['dev_bleu'])} and test BLEU {fmt(base['test_bleu'])}."]
    names = {"learns": "Learn (last dev BLEU at least "
                       f"{a.learned_fraction:.0%} of {a.baseline}'s)",
             "does not learn": "Do not learn", "diverged": "Diverge",
             "unfinished": "Not finished"}
    parts += [f"{names[key]}: {'; '.join(items)}." for key, items in groups.items()]
    unstable = [r["variant"] for r in rows if r["unstable"] and r["status"] != "diverged"]
    if unstable:
        parts.append(f"Training loss rose by more than {LOSS_RISE} from its lowest value in: "
                     f"{', '.join(unstable)}.")
    return " ".join(parts)


def document(config: Config, out: Path, tables: Tables, claims: list[Section]) -> str:
    """``REPORT.md``: the setup, the answer, the table, the figures."""
    rows = tables.rows("results.csv")
    a, t = config.attention_study, config.train
    intro = (f"One model per attention transform (every kind: encoder self, decoder self, "
             f"cross), everything else fixed: output transform {t.transform}, lr {t.lr:g}, "
             f"warmup {t.warmup}, label smoothing {t.label_smoothing:g}, seed {t.seed}, "
             f"{t.max_steps} optimizer steps (step-budgeted). Test BLEU with beam "
             f"{config.decode.beam} at the last step's weights (sacrebleu, detokenized, cased); "
             f"paired bootstrap ({a.bootstrap_samples} resamples) against {a.baseline} "
             "attention, better or worse where the 95% interval of Δ excludes 0, else "
             "inconclusive; sparsity counted along the beam output on test. Speeds were measured "
             "on a quiet machine, each variant alternating with the baseline; a ratio (×) is "
             "the median of the paired ratios, so it can differ from the ratio of the two "
             "medians (bench_train.csv, bench_decode.csv).")
    figures = [Section(title, name.replace(".png", ".csv"), figure=name)
               for title, name in (("Training curves", "curves.png"),
                                   ("Attention sparsity per layer", "sparsity.png"),
                                   ("Cross-attention heatmaps", "heatmaps.png"))
               if (out / name).is_file()]
    return page("Attention study report", intro, [
        *claims, Section("Results", "results.csv", _table(rows)), *figures], out, [
        "## Files", "results.csv (the table), curves.csv, sparsity.csv, heatmaps.csv, "
        "bench_train.csv, bench_decode.csv; runs/VARIANT/ (config.json, log.csv, summary.json "
        "or diverged.json, translations/)."])


def _joined(runs: list[Run], name: str) -> list[dict]:
    rows = []
    for v in runs:
        path = v.folder / name
        if path.is_file() and not diverged(v.folder):
            rows += [{"variant": v.name, **r} for r in pd.read_csv(path).to_dict("records")]
    return rows


def tables(config: Config, out: Path) -> Tables:
    """Every table of the study, each input read and checked first."""
    runs = variants(config, out)
    curves, sparsity = curve_rows(runs), _joined(runs, SPARSITY)
    maps = [{k: val for k, val in r.items() if k != "variant"} for r in _joined(runs, HEATMAPS)]
    rows = result_rows(config, runs, pd.DataFrame(sparsity) if sparsity else None,
                       _read(out / BENCH), _read(out / DECODE))
    found = [Table("curves.csv", curves, figure=plot_attention_curves),
             Table("sparsity.csv", sparsity, figure=plot_attention_sparsity),
             Table("heatmaps.csv", maps, figure=plot_attention_heatmaps),
             Table("results.csv", rows)]
    return Tables([t for t in found if t.rows or t.name in ("curves.csv", "results.csv")])


def claims(config: Config, out: Path, tables: Tables) -> list[Section]:
    return [Section("Answer", "results.csv", verdicts=[answer(config, tables.rows("results.csv"))])]
