"""REPORT.md of a results folder: every table beside the paper's numbers, every figure
embedded, a computed "matches / differs" line per table, the exact commands, and the CSVs
that are missing -- listed as missing, never filled in; those the recipe's grid leaves out
by design are listed apart, with the command that would measure them.

The paper's numbers come from :mod:`arelu_cli.studies.paper.paper`; the verdicts from
:mod:`arelu_cli.studies.paper.compare_tables` and :mod:`~.compare_figures`; the CSV columns are
documented in :mod:`arelu_cli.studies.paper.columns` (appended to the report too, and below: the
section is generated from the catalog).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import pandas as pd

from arelu_cli.config import Config, ReproduceConfig
from arelu_cli.studies.paper import compare_figures as figs
from arelu_cli.studies.paper import compare_tables as tables
from arelu_cli.studies.paper.columns import CATALOG, catalog_markdown, read_csv
from arelu_cli.studies.markdown import Section, page, fmt, md_table
from arelu_cli.studies.paper.quality import QUALITY_FLOOR, apply_floor, below_floor, floor_paragraph

SECTIONS: dict[str, Callable[..., Section]] = {
    "table1_bleu.csv": tables.table1_section,
    "table2_empty.csv": tables.table2_section,
    "table3_tau.csv": tables.table3_section,
    "training_time.csv": tables.training_time_section,
    "fig_alpha_relu_curves.csv": figs.curves_section,
    "fig_training_dynamics.csv": figs.dynamics_section,
    "fig_inference_time.csv": figs.inference_section,
    "fig_sparsity.csv": figs.sparsity_section,
    "fig_tau_norm_evolution.csv": figs.tau_norm_section,
    "fig_tau_sweep.csv": figs.tau_sweep_section,
    "fig_self_norm.csv": figs.self_norm_section,
}
"""CSV -> the section it makes, in the report's order (human evaluation and examples last)."""
COMPANIONS = {"table1_bleu.csv": "table1_significance.csv"}
"""CSV -> a second CSV its section shows too (as a second argument, None when absent)."""


def _examples_section(frame: pd.DataFrame) -> Section:
    rows = [[r["index"], r["source"], r["reference"], f"{r['system_a']}: {r['hypothesis_a']}",
             fmt(r["bleu_a"], 1), f"{r['system_b']}: {r['hypothesis_b']}", fmt(r["bleu_b"], 1)]
            for r in frame.to_dict("records")]
    table = md_table(["line", "source", "reference", "a", "BLEU a", "b", "BLEU b"], rows)
    return Section("Translation examples where two transforms disagree (appendix)",
                   "translation_examples.csv", table,
                   ["Chosen by the largest sentence-BLEU gap each way; the paper's examples "
                    "were chosen by hand, so only the kind of table is comparable."])


def _rows_or_none(folder: Path, name: str) -> pd.DataFrame | None:
    frame = read_csv(folder, name)
    return frame if frame is not None and len(frame) else None


def sections(folder: Path, floor: float = QUALITY_FLOOR) -> list[Section]:
    """The sections of every CSV present in ``folder``, in report order; the verdicts that
    rest on trained models withheld when a model is below the quality ``floor``
    (:mod:`arelu_cli.studies.paper.quality`)."""
    unlearned = below_floor(_rows_or_none(folder, "table1_bleu.csv"), floor)
    return [apply_floor(s, unlearned, floor) for s in _all_sections(folder)]


def _all_sections(folder: Path) -> list[Section]:
    out = []
    for name, build in SECTIONS.items():
        frame = _rows_or_none(folder, name)
        if frame is not None:
            extra = [_rows_or_none(folder, COMPANIONS[name])] if name in COMPANIONS else []
            out.append(build(frame, *extra))
    human, examples = (_rows_or_none(folder, name)
                       for name in ("table_human_eval.csv", "translation_examples.csv"))
    if human is not None:
        out.append(tables.human_eval_section(human, read_csv(folder, "human_eval_kappa.csv")))
    return out + ([] if examples is None else [_examples_section(examples)])


def missing_csvs(folder: str | Path) -> list[str]:
    """The catalog's CSVs that ``folder`` does not hold (or holds with no rows)."""
    folder = Path(folder)
    out = []
    for name in CATALOG:
        path = folder / name
        if not path.is_file() or pd.read_csv(path).empty:
            out.append(name)
    return out


SWEEP_RECIPE = "recipes/iwslt14.toml"
"""A recipe that ships with arelu whose grid runs the paper's tau sweep
(tests/studies/paper/test_reproduction_report.py checks that it does)."""


def outside_the_grid(config: Config, commands: Sequence[str]) -> dict[str, str]:
    """The catalog's CSVs that the grid of ``config`` leaves out by design, each with how to
    measure it: the tau sweep when ``[reproduce] tau_sweep`` is empty, one 1.5-ReLU run per
    tau of the paper at the grid's training steps, added to the recorded ``arelu reproduce``
    command (``commands``' first line)."""
    r = config.reproduce
    if r.tau_sweep:
        return {}
    command = next((c for c in commands[:1] if c.startswith("arelu reproduce ")),
                   "arelu reproduce RECIPE")
    taus = ",".join(str(float(t)) for t in ReproduceConfig().tau_sweep)
    steps = r.train_steps or config.train.max_steps
    return {"fig_tau_sweep.csv": (
        f"The recipe's `[reproduce] tau_sweep` is empty. To measure it here, one 1.5-ReLU run "
        f"per τ of the paper at the grid's {steps} steps: `{command} --set "
        f"reproduce.tau_sweep=[{taus}] --set reproduce.sweep_steps={steps}`. "
        f"`{SWEEP_RECIPE}` has the paper's sweep.")}


def _missing_section(folder: Path, left_out: Mapping[str, str]) -> str:
    """``## Missing``: the CSVs the grid leaves out (and how to measure them), then those it
    meant to measure that the folder lacks."""
    gone = missing_csvs(folder)
    outside = [name for name in gone if name in left_out]
    absent = [name for name in gone if name not in left_out]
    parts = []
    if outside:
        parts.append("Left out of this recipe's grid, so not measured by design:\n\n" + "\n".join(
            f"- `{name}`: {CATALOG[name].paper}. {left_out[name]}" for name in outside))
    if absent:
        parts.append("Not measured in this folder (no CSV, so nothing is reported):\n\n"
                     + "\n".join(f"- `{name}`: {CATALOG[name].paper}" for name in absent))
    return "## Missing\n\n" + ("\n\n".join(parts) if parts else
                               "Nothing: every CSV of the catalog is present.")


def render_report(folder: str | Path, commands: Sequence[str],
                  claims: Sequence[Section] | None = None, floor: float = QUALITY_FLOOR,
                  notes: Sequence[str] = (), left_out: Mapping[str, str] = {}) -> str:
    """The text of REPORT.md for ``folder``: ``claims`` (default :func:`sections`), then what
    is missing (``left_out``: the CSVs the grid leaves out by design, with how to measure
    them: :func:`outside_the_grid`), ``commands`` (the exact commands that made it) and the
    columns; below the quality ``floor`` (test BLEU) a model's quality verdicts are withheld;
    ``notes`` (runs left out or unverified: :mod:`.provenance`) follow the introduction."""
    folder = Path(folder)
    head = ["Every number below is read from the CSVs of this folder; the paper's numbers are "
            "those of *Speeding Up Entmax* (Tables 1-3, appendix), and every verdict is "
            "computed from the two."]
    head += ["\n".join(f"- {line}" for line in notes)] if notes else []
    warning = floor_paragraph(below_floor(_rows_or_none(folder, "table1_bleu.csv"), floor), floor)
    head += [warning] if warning else []
    shown = "\n".join(commands) if commands else "(no commands were recorded)"
    cmds = ("## Commands\n\nThe exact commands that produced this folder, in order:\n\n"
            f"```\n{shown}\n```")
    cols = "## CSV columns\n\n" + catalog_markdown().replace("### ", "#### ")
    found = sections(folder, floor) if claims is None else claims
    return page(f"Reproduction report: {folder.name}", "\n\n".join(head), found, folder,
                [_missing_section(folder, left_out), cmds, cols])


__doc__ = f"{__doc__}\n## CSV columns\n\n{catalog_markdown()}"
