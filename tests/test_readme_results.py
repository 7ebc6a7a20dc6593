"""Every number of the README's results table traces to a committed CSV: each entry below names
the text as the README prints it, the file, the row and the column it comes from, and how it
is rounded; the test reads the CSV, formats the value and finds the text in the table."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "results"


def _table() -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    return text.split("## Results", 1)[1].split("\n## ", 1)[0]


def _signed(value: float, digits: int) -> str:
    return f"{value:+.{digits}f}".replace("-", "−")


# (the README's text with {} where the values go, csv, row filter, [(column, digits, signed)])
CLAIMS = [
    ("softmax {} ± {}, **1.5-ReLU {} ± {}**", "multi30k-study/test_bleu_summary.csv", None,
     [("equal_steps/softmax", "mean", 2, False), ("equal_steps/softmax", "std", 2, False),
      ("equal_steps/1.5-relu", "mean", 2, False), ("equal_steps/1.5-relu", "std", 2, False)]),
    ("1.5-entmax-k100 {} ± {}; at equal time softmax {} ± {}",
     "multi30k-study/test_bleu_summary.csv", None,
     [("equal_steps/1.5-entmax-k100", "mean", 2, False),
      ("equal_steps/1.5-entmax-k100", "std", 2, False),
      ("equal_time/softmax", "mean", 2, False), ("equal_time/softmax", "std", 2, False)]),
    ("(Δ {} [{}, {}]), 1.5-entmax-k100", "multi30k-study/significance.csv",
     dict(comparison="equal_steps", transform="1.5-relu", baseline="softmax", seeds="joined"),
     [(None, "delta", 2, True), (None, "delta_low", 2, True), (None, "delta_high", 2, True)]),
    ("(Δ {} [{}, {}]) |", "multi30k-study/significance.csv",
     dict(comparison="equal_time", transform="1.5-relu", baseline="softmax", seeds="joined"),
     [(None, "delta", 2, True), (None, "delta_low", 2, True), (None, "delta_high", 2, True)]),
    ("softmax attention {}, renormalized 1.5-ReLU {} (Δ {} [{}, {}])",
     "multi30k-attention/significance.csv", dict(index=0),
     [(None, "baseline_bleu", 2, False), (None, "bleu", 2, False), (None, "delta", 2, True),
      (None, "delta_low", 2, True), (None, "delta_high", 2, True)]),
    ("(distinct-2 {} vs {}, Δ {} [{}, {}])", "ptb-lm/significance.csv",
     dict(transform="1.5-relu", decoding="sample", statistic="distinct_2"),
     [(None, "value", 3, False), (None, "baseline_value", 3, False), (None, "delta", 3, True),
      (None, "delta_low", 3, True), (None, "delta_high", 3, True)]),
    ("ε-perplexity {} ± {} vs {} ± {}; softmax test perplexity {} ± {}", "ptb-lm/summary.csv",
     None, [("1.5-relu/sample", "eps_ppl_mean", 1, False), ("1.5-relu/sample", "eps_ppl_std", 1, False),
            ("softmax/sample-top_p0.9", "eps_ppl_mean", 1, False),
            ("softmax/sample-top_p0.9", "eps_ppl_std", 1, False),
            ("softmax/sample", "ppl_mean", 1, False), ("softmax/sample", "ppl_std", 1, False)]),
    ("distinct-2 (Δ {} [{}, {}])", "tinyshakespeare-lm/significance.csv",
     dict(transform="1.5-relu", decoding="sample", statistic="distinct_2"),
     [(None, "delta", 3, True), (None, "delta_low", 3, True), (None, "delta_high", 3, True)]),
    ("Zipf gap (Δ {} [{}, {}])", "tinyshakespeare-lm/significance.csv",
     dict(transform="1.5-relu", decoding="sample", statistic="zipf_gap"),
     [(None, "delta", 3, True), (None, "delta_low", 3, True), (None, "delta_high", 3, True)]),
    ("ε-perplexity {} ± {} vs {} ± {}; pure softmax sampling is closest to human text "
     "(ε-perplexity {} ± {})", "tinyshakespeare-lm/summary.csv", None,
     [("1.5-relu/sample", "eps_ppl_mean", 1, False), ("1.5-relu/sample", "eps_ppl_std", 1, False),
      ("softmax/sample-top_p0.9", "eps_ppl_mean", 1, False),
      ("softmax/sample-top_p0.9", "eps_ppl_std", 1, False),
      ("softmax/sample", "eps_ppl_mean", 1, False), ("softmax/sample", "eps_ppl_std", 1, False)]),
    ("softmax {}, 1.5-entmax-k100 {}, 1.5-ReLU {}", "toy/table1_bleu.csv", None,
     [("softmax", "bleu", 2, False), ("1.5-entmax-k100", "bleu", 2, False),
      ("1.5-relu", "bleu", 2, False)]),
    ("{}× `F.cross_entropy`'s time on a 2-core CPU (8192 × 40000", "bench/loss_cpu.csv",
     dict(transform="1.5-relu", variant="default", mode="fwd+bwd", n=8192),
     [(None, "ratio", 2, False)]),
    ("{}× / {}× the unfused layer's time at {}× / {}× its memory",
     "bench/gpu-h200-vocab/fused_linear-nvidia-h200.csv", None,
     [("fused/16384", "ratio", 3, False), ("fused/65536", "ratio", 3, False),
      ("fused/16384", "memory_ratio", 2, False), ("fused/65536", "memory_ratio", 2, False)]),
]

KEYS = {"test_bleu_summary.csv": ("comparison", "transform"), "summary.csv": ("transform", "decoding"),
        "table1_bleu.csv": ("transform",), "fused_linear-nvidia-h200.csv": ("method", "n")}


def _row(frame: pd.DataFrame, csv: str, where: dict | None, key: str | None) -> pd.Series:
    if where and "index" in where:
        return frame.iloc[where["index"]]
    if key is not None:
        columns = KEYS[Path(csv).name]
        where = {c: type(frame[c].iloc[0])(v) if c == "n" else v
                 for c, v in zip(columns, key.split("/"))}
    chosen = frame
    for column, value in where.items():
        chosen = chosen[chosen[column] == value]
    assert len(chosen) == 1, (csv, where)
    return chosen.iloc[0]


@pytest.mark.parametrize("text, csv, where, values", CLAIMS, ids=[c[0][:40] for c in CLAIMS])
def test_the_readme_results_table_says_what_its_csv_says(text, csv, where, values):
    frame = pd.read_csv(RESULTS / csv)
    shown = []
    for key, column, digits, signed in values:
        value = float(_row(frame, csv, where, key)[column])
        shown.append(_signed(value, digits) if signed else f"{value:.{digits}f}")
    expected = text.format(*shown)
    assert expected in _table(), f"README's results table should say: {expected}"
