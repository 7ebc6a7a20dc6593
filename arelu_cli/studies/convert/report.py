"""The conversion study's claims and ``REPORT.md``, from its tables
(:mod:`~arelu_cli.studies.convert.tables`) and the folder's records alone: the setup (the
recorded recipe and ``taus.json``), what is not measured yet, the verdicts of
:mod:`~arelu_cli.studies.convert.claims`, the figure, then every table.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path

from arelu_cli.studies.contract import Tables
from arelu_cli.studies.convert.claims import answer, ratio_text
from arelu_cli.studies.convert.layout import GRID, SELECTION, TAUS, selection
from arelu_cli.studies.convert.recipe import Recipe
from arelu_cli.studies.convert.tables import NUCLEUS, PURE, drawn
from arelu_cli.studies.markdown import Section, fmt, md_table, missing, page, signed
from arelu_cli.studies.verdict import verdict
from arelu_cli.util.results import read_json, read_table

TABLE = (("ε-ppl", "eps_ppl", 1), ("sp", "sp", 3), ("JSD", "jsd", 3),
         ("support", "support_mean", 0), ("p = 0 share", "zero_share", 3),
         ("distinct-2", "distinct_2", 3), ("Zipf gap", "zipf_gap", 3))
FIGURE = ("Each converted arm's ε-perplexity over the control's at each evaluated step (pure "
          "sampling, mean over seeds of each seed's ratio), with its 95% interval where there "
          "is one; the dashed line is the margin of 'within 2%'.")


def reference_ppl(recipe: Recipe) -> tuple[float, float | None, str] | None:
    """The softmax model's test perplexity in ``[reference] lm_study``'s ``summary.csv``
    (mean, std over seeds, the file), None where none is set or found."""
    if not recipe.reference.lm_study:
        return None
    path = Path(recipe.reference.lm_study) / "summary.csv"
    if not path.is_file():
        return None
    frame = read_table(path, "restore it, or set [reference] lm_study to \"\"")
    if not {"transform", "decoding", "ppl_mean"} <= set(frame.columns):
        return None
    rows = frame[(frame["transform"] == "softmax") & (frame["decoding"] == PURE)]
    if rows.empty:
        return None
    std = rows["ppl_std"].iloc[0] if "ppl_std" in rows else None
    return (float(rows["ppl_mean"].iloc[0]), None if missing(std) else float(std), str(path))


def claims(recipe: Recipe, out: Path, tables: Tables) -> list[Section]:
    reference = reference_ppl(recipe)
    lines = answer(tables.rows("summary.csv"), tables.rows("ratios.csv"),
                   tables.rows("significance.csv"), recipe.finetune.arms, recipe.finetune.steps,
                   reference)
    if recipe.reference.lm_study and reference is None:
        lines.insert(1, f"No softmax test perplexity found in {recipe.reference.lm_study}/"
                        "summary.csv ([reference] lm_study) to compare the pretrained model "
                        "with.")
    return [Section("Answer", "summary.csv, ratios.csv, significance.csv", verdicts=lines)]


def _cell(row: Mapping, metric: str, digits: int) -> str:
    mean, std = row[f"{metric}_mean"], row[f"{metric}_std"]
    return fmt(mean, digits) + ("" if missing(std) else f" ± {fmt(std, digits)}")


def summary_table(summary: Sequence[Mapping]) -> str:
    return md_table(["arm", "step", "decoding", "seeds", "τ", *(h for h, _, _ in TABLE)],
                    [[r["arm"], r["step"], r["decoding"], r["seeds"], fmt(r["tau"], 3),
                      *(_cell(r, m, d) for _, m, d in TABLE)]
                     for r in summary if r["arm"] != "pretrained"])


def ratio_table(ratios: Sequence[Mapping]) -> str:
    return md_table(["arm", "over", "step", "seeds", "ε-ppl ratio [95% CI]", "margin",
                     "verdict (lower is better)"],
                    [[r["arm"], f"{r['baseline']} (step {r['baseline_step']})", r["step"],
                      r["seeds"], ratio_text(r), f"{r['margin']:g}",
                      verdict(r, higher_is_better=False)] for r in ratios])


def significance_table(sig: Sequence[Mapping], step: int) -> str:
    return md_table(["arm", "step", "decoding", "statistic", "value", f"control {NUCLEUS}",
                     "Δ [95% CI]", "p"],
                    [[r["arm"], r["step"], r["decoding"], r["statistic"], fmt(r["value"], 3),
                      fmt(r["baseline_value"], 3),
                      f"{signed(r['delta'], 3)} [{signed(r['delta_low'], 3)}, "
                      f"{signed(r['delta_high'], 3)}]", fmt(r["p_value"], 3)]
                     for r in sig if r["step"] == step or r["arm"] == "scratch"])


def grid_table(grid: Sequence[Mapping]) -> str:
    return md_table(["× tau_for", "τ", "steps", "dev ε-ppl", "support"],
                    [[fmt(g["factor"], 2), fmt(g["tau"], 3), g["steps"],
                      fmt(g["dev_eps_ppl"], 1), fmt(g["support_mean"], 0)] for g in grid])


def setup_text(recipe: Recipe, out: Path) -> str:
    m, p, f, e = recipe.model, recipe.pretrain, recipe.finetune, recipe.eval
    taus = read_json(out / TAUS, "delete it to compute it again") \
        if (out / TAUS).is_file() else {}
    found = ", ".join(f"{k} {v:.4g}" for k, v in taus.items() if isinstance(v, float))
    return (f"A transformers LlamaForCausalLM (hidden {m.hidden_size}, {m.layers} layers, "
            f"{m.heads} heads, SwiGLU {m.intermediate_size}, attention dropout "
            f"{m.attention_dropout:g}, tied embeddings: {m.tie_embeddings}) pretrained with "
            f"softmax for {p.steps} steps of {recipe.data.max_tokens} tokens (AdamW, peak lr "
            f"{p.lr:g}, cosine); every arm ({', '.join(f.arms)}) fine-tuned from it for "
            f"{f.steps} steps (lr {f.lr:g}, LoRA {f.lora_lr:g} at rank {f.lora_rank}), seeds "
            f"{', '.join(map(str, f.seeds))}, evaluated at steps "
            f"{', '.join(map(str, f.eval_steps))} with lm-eval's metrics on the test split "
            f"(windows of stride {e.stride}; ε tuned on dev) and {e.max_new_tokens}-token "
            f"continuations of its first {e.prompts} prompts; the control is softmax "
            f"continued, sampled purely and with nucleus p 0.9. τ ({TAUS}): "
            f"{found or 'not computed yet'}.")


def document(recipe: Recipe, out: Path, tables: Tables, claims: list[Section]) -> str:
    """``REPORT.md``: setup, what is not measured yet, the answer, then every table."""
    summary, ratios = tables.rows("summary.csv"), tables.rows("ratios.csv")
    sig, grid = tables.rows("significance.csv"), tables.rows(GRID)
    last = max((r["step"] for r in sig if r["arm"] != "scratch"), default=None)
    chosen = selection(out)
    lacking = ("Not measured yet:\n\n" + "\n".join(f"- {n}." for n in tables.notes)
               if tables.notes else "Every run and evaluation of the recipe is measured.")
    sections = [
        *claims,
        Section("Figure: ε-perplexity over the control's, by step", "ratios.csv",
                figure="ratios.png" if drawn(ratios) else None, verdicts=[FIGURE]),
        Section("Per arm and step (mean ± sample std over seeds)", "summary.csv",
                summary_table(summary) if summary else "No evaluation yet."),
        Section("ε-perplexity ratios", "ratios.csv",
                ratio_table(ratios) if ratios else "Not measured yet."),
        Section(f"Paired bootstrap over test prompts at step {last} against the control's "
                "nucleus sampling" if last is not None else
                "Paired bootstrap over test prompts", "significance.csv",
                significance_table(sig, last) if last is not None else "Not measured yet."),
        Section("The τ grid on dev", GRID, grid_table(grid) if grid else "Not run yet.",
                verdicts=[f"Selected ({SELECTION}): {json.dumps(chosen)}"] if chosen else [])]
    return page("Conversion study report", "\n\n".join([setup_text(recipe, out), lacking]),
                sections, out, [
                    "## Files", "lm_eval.csv (every evaluation, with its arm, step and seed), "
                    "summary.csv, ratios.csv (and ratios.png), significance.csv, grid.csv; "
                    f"recipe.json, {TAUS}, {SELECTION}, human.tokens.json; pretrain/ and "
                    "runs/NAME/seed-S/ (config.json, log.csv, summary.json, eval/step-N/: "
                    "DECODING.csv and generations/DECODING.*), runs/NAME/step-0/eval/."])
