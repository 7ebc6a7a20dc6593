"""``REPORT.md`` of the conversion study: its tables (:mod:`~arelu_cli.studies.lm.convert.tables`)
written into the study folder, then the verdicts of :mod:`~arelu_cli.studies.lm.convert.claims`
and the tables as Markdown, all from the folder's files alone (``python -m
arelu_cli.studies.lm.convert.report OUT`` rewrites them).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pandas as pd

from arelu_cli.studies.markdown import Section, fmt, md_table, page, signed
from arelu_cli.studies.lm.convert import claims as C
from arelu_cli.studies.lm.convert.tables import write_tables
from arelu_cli.util.atomic import atomic_write_text

TABLE = (("ε-ppl", "eps_ppl", 1), ("sp", "sp", 3), ("JSD", "jsd", 3),
         ("support", "support_mean", 0), ("p = 0 share", "zero_share", 3),
         ("distinct-2", "distinct_2", 3), ("Zipf gap", "zipf_gap", 3))


def _cell(row: dict, metric: str, digits: int) -> str:
    std = row.get(f"{metric}_std")
    return fmt(row[metric], digits) + ("" if std is None or std != std
                                       else f" ± {fmt(std, digits)}")


def summary_table(summary: list[dict]) -> str:
    rows = [[r["arm"], r["step"], r["decoding"], r["seeds"], fmt(r["tau"], 3),
             *(_cell(r, m, d) for _, m, d in TABLE)]
            for r in summary if r["arm"] != "pretrained"]
    return md_table(["arm", "step", "decoding", "seeds", "τ", *(h for h, _, _ in TABLE)], rows)


def significance_table(sig: list[dict], step: int | None) -> str:
    rows = [[r["transform"], r["decoding"], r["statistic"], fmt(r["value"], 3),
             fmt(r["baseline_value"], 3),
             f"{signed(r['delta'], 3)} [{signed(r['delta_low'], 3)}, {signed(r['delta_high'], 3)}]",
             fmt(r["p_value"], 3)]
            for r in sig if step is not None and int(r["step"]) == step
            and not r["statistic"].endswith("loop_gap")]
    return md_table(["arm", "decoding", "statistic", "value", "control top-p 0.9",
                     "Δ [95% CI]", "p"], rows)


def _read(path: Path) -> list[dict]:
    return pd.read_csv(path).to_dict("records") if path.is_file() else []


def ptb_reference(path: Path | None) -> tuple[float, float, str] | None:
    """The PTB study's softmax test perplexity (mean, std) from its ``summary.csv``."""
    rows = [r for r in _read(path) if r.get("transform") == "softmax"
            and r.get("decoding") == "sample"] if path else []
    return (float(rows[0]["ppl_mean"]), float(rows[0]["ppl_std"]), str(path)) if rows else None


def setup_text(out: Path) -> str:
    recipe = json.loads((out / "recipe.json").read_text())
    m, p, f, e = recipe["model"], recipe["pretrain"], recipe["finetune"], recipe["eval"]
    taus = json.loads((out / "taus.json").read_text()) if (out / "taus.json").is_file() else {}
    tau_text = ", ".join(f"{k} {v:.4g}" for k, v in taus.items() if isinstance(v, float))
    return (f"A transformers LlamaForCausalLM (hidden {m['hidden_size']}, {m['layers']} layers, "
            f"{m['heads']} heads, SwiGLU {m['intermediate_size']}, attention dropout "
            f"{m['attention_dropout']}, tied embeddings: {m['tie_embeddings']}) pretrained with "
            f"softmax for {p['steps']} steps of {recipe['data']['max_tokens']} tokens (AdamW, "
            f"peak lr {p['lr']:g}, cosine); every arm fine-tuned from it for {f['steps']} steps "
            f"(lr {f['lr']:g}, LoRA {f['lora_lr']:g} at rank {f['lora_rank']}), seeds "
            f"{', '.join(map(str, f['seeds']))}, evaluated at steps "
            f"{', '.join(map(str, f['eval_steps']))} with lm-eval's metrics on the test split "
            f"(windows of stride {e['stride']}; ε tuned on dev) and {e['max_new_tokens']}-token "
            f"continuations of "
            f"its first {e['prompts']} prompts. τ (taus.json): {tau_text}.")


def write_report(out: Path, samples: int = 1000, reference: Path | None = None) -> Path:
    tables = write_tables(out, samples)
    summary, sig, evals = tables["summary"], tables["significance"], tables["lm_eval"]
    selection = json.loads((out / "selection.json").read_text()) \
        if (out / "selection.json").is_file() else {}
    rule = selection.get("lora", {}).get("rule")
    rule_arm = {"tau_for": "relu-tau_for", "tau_dev": "relu-tau_dev"}.get(rule)
    last = C.last_step(summary)
    answer = [C.pretrained_line(summary, ptb_reference(reference)),
              *(C.convergence_verdict(summary, evals, arm) for arm in C.SPARSE
                if any(r["arm"] == arm for r in summary)),
              *C.tau_rule_verdicts(summary), *C.degeneracy_verdicts(summary, sig),
              C.lora_verdict(summary, rule_arm)]
    grid = _read(out / "grid.csv")
    sections = [
        Section("Answer", "summary.csv, significance.csv, lm_eval.csv", verdicts=answer),
        Section("Per arm and step (mean ± sample std over seeds)", "summary.csv",
                summary_table(summary)),
        Section(f"Paired bootstrap over test prompts at step {last} against the control's "
                "nucleus sampling", "significance.csv", significance_table(sig, last)),
        Section("The τ grid on dev", "grid.csv", md_table(
            ["× tau_for", "τ", "steps", "dev ε-ppl", "support"],
            [[fmt(g["factor"], 2), fmt(g["tau"], 3), g["steps"], fmt(g["dev_eps_ppl"], 1),
              fmt(g["support_mean"], 0)] for g in grid]) if grid else "",
                verdicts=[f"Selected: {json.dumps(selection)}"] if selection else [])]
    text = page("Conversion study report", setup_text(out), sections, out)
    path = out / "REPORT.md"
    atomic_write_text(path, text)
    return path


if __name__ == "__main__":
    folder = Path(sys.argv[1])
    ref = Path(sys.argv[2]) if len(sys.argv) > 2 else None
    print(write_report(folder, reference=ref))
