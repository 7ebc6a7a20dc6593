"""The quality floor: no quality verdict from a model that did not learn."""

import pandas as pd

from arelu_cli.studies.paper import quality, reproduction_report, tables
from arelu_cli.studies.paper.columns import COLUMNS
from arelu_cli.util.results import write_rows
from arelu_cli.studies.markdown import Section, claim


def _table1(folder, scores, corpus="toy"):
    write_rows([tables.table1_row(corpus, t, b) for t, b in scores.items()],
               folder / "table1_bleu.csv", COLUMNS["table1_bleu.csv"])


def _frame(rows):
    return pd.DataFrame(rows, columns=["corpus", "transform", "seed", "bleu"])


def test_below_floor_uses_the_mean_over_seeds():
    frame = _frame([("toy", "softmax", 1, 19.0), ("toy", "softmax", 2, 23.0),
                    ("toy", "1.5-relu", 1, 18.0), ("toy", "1.5-relu", 2, 21.0)])
    found = quality.below_floor(frame, 20.0)
    assert [(u.transform, round(u.bleu, 2)) for u in found] == [("1.5-relu", 19.5)]
    assert quality.below_floor(frame, 19.0) == []
    assert quality.below_floor(None) == [] and quality.below_floor(frame.iloc[:0]) == []


def test_withhold_turns_claims_into_not_judged_and_keeps_other_lines():
    line = claim("1.5-ReLU performs on par with 1.5-entmax or better on toy", True, "+0.8 BLEU")
    out = quality.withhold_line(line, "softmax on toy (0.3 BLEU) is below the floor")
    assert out.startswith("? Paper's claim — 1.5-ReLU performs on par")
    assert "holds here" not in out and ": not judged" in out and out.endswith("floor.")
    bad = quality.withhold_line(claim("x", False, "e"), "r")
    assert bad.startswith("? ") and "does not hold" not in bad
    assert quality.withhold_line("**Matches the paper**: none.", "r") == "**Matches the paper**: none."


def test_apply_floor_spares_speed_and_untrained_sections():
    unlearned = [quality.Unlearned("toy", "softmax", 0.3)]
    speed = Section("Training time", "training_time.csv", "", [claim("fast", True, "e")])
    bleu = Section("Table 1", "table1_bleu.csv", "", [claim("good", True, "e")])
    assert quality.apply_floor(speed, unlearned) is speed
    assert quality.apply_floor(bleu, unlearned).verdicts[0].startswith("? ")
    assert quality.apply_floor(bleu, []) is bleu


def test_report_withholds_quality_verdicts_of_untrained_models(tmp_path):
    _table1(tmp_path, {"softmax": 0.3, "1.5-entmax": 0.0, "1.5-relu": 0.8})
    text = reproduction_report.render_report(tmp_path, [])
    assert "**Quality floor.**" in text and "softmax on toy (0.3 BLEU)" in text
    assert "✓ Paper's claim" not in text and "✗ Paper's claim" not in text
    assert "? Paper's claim — 1.5-ReLU performs on par with 1.5-entmax" in text
    assert "not judged" in text


def test_report_judges_models_above_the_floor(tmp_path):
    _table1(tmp_path, {"softmax": 45.0, "1.5-entmax": 44.0, "1.5-relu": 44.5})
    text = reproduction_report.render_report(tmp_path, [])
    assert "Quality floor" not in text
    assert "✓ Paper's claim — 1.5-ReLU performs on par with 1.5-entmax" in text
    lowered = reproduction_report.render_report(tmp_path, [], floor=50.0)
    assert "**Quality floor.**" in lowered and "✓ Paper's claim — 1.5-ReLU" not in lowered


def test_entmax_k100_stands_for_entmax_in_quality_claims(tmp_path):
    from arelu_cli.studies.paper import paper
    assert paper.entmax15_run(["softmax", "1.5-entmax-k100", "1.5-entmax"]) == "1.5-entmax"
    assert paper.entmax15_run(["softmax", "1.5-entmax-k100"]) == "1.5-entmax-k100"
    assert paper.entmax15_run(["softmax"]) is None
    _table1(tmp_path, {"softmax": 45.0, "1.5-entmax-k100": 50.0, "1.5-relu": 44.0})
    text = reproduction_report.render_report(tmp_path, [])
    assert "✗ Paper's claim — 1.5-ReLU performs on par with 1.5-entmax" in text
    assert "1.5-ReLU − 1.5-entmax-k100 = -6.0 BLEU" in text
