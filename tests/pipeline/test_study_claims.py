"""The study report's computed verdicts: the pairs compared, better / worse / no difference,
the convergence trend, and which earlier claims stand, shrink, grow or fall."""

from __future__ import annotations

import pandas as pd
import pytest

from arelu_cli.config import load_config
from arelu_cli.pipeline.study_claims import (answer, bleu_verdict, earlier_rows, outcome, pairs,
                                             speed_verdict)


def _config(**study):
    overrides = {("sweep", "transforms"): ["softmax", "1.5-relu"], ("train", "max_steps"): 1200,
                 ("study", "borrow"): ["1.5-entmax-k100=1.5-relu"]}
    overrides |= {("study", k): v for k, v in study.items()}
    return load_config(None, overrides)


def _row(delta, low, high, p, comparison="equal_time", transform="1.5-relu",
         baseline="softmax", seeds="joined"):
    return {"comparison": comparison, "transform": transform, "baseline": baseline,
            "seeds": seeds, "delta": delta, "delta_low": low, "delta_high": high, "p_value": p}


def test_every_transform_against_the_baseline_and_a_borrower_against_its_lender():
    names = ["softmax", "1.5-relu", "1.5-entmax-k100"]
    assert pairs(_config(), names) == [("1.5-relu", "softmax"), ("1.5-entmax-k100", "softmax"),
                                       ("1.5-entmax-k100", "1.5-relu")]
    # a borrower of the baseline is compared once; an absent lender not at all
    assert pairs(_config(borrow=["1.5-entmax-k100=softmax"]), names) == [
        ("1.5-relu", "softmax"), ("1.5-entmax-k100", "softmax")]
    assert pairs(_config(), ["softmax", "1.5-entmax-k100"]) == [("1.5-entmax-k100", "softmax")]


@pytest.mark.parametrize("delta, p, expected", [(2.0, 0.001, "better"), (-2.0, 0.01, "worse"),
                                                (2.0, 0.05, "no significant difference"),
                                                (-0.1, 0.6, "no significant difference")])
def test_outcome_is_decided_by_the_p_value_and_the_sign(delta, p, expected):
    assert outcome(_row(delta, delta - 1, delta + 1, p)) == expected


@pytest.mark.parametrize("earlier, row, verdict", [
    (7.0, _row(6.5, 5.0, 8.0, 0.001), "stands"),
    (7.0, _row(2.1, 1.2, 3.0, 0.001), "shrinks"),
    (1.0, _row(2.1, 1.2, 3.0, 0.001), "grows"),
    (7.0, _row(0.4, -0.5, 1.3, 0.2), "falls (no significant difference)"),
    (7.0, _row(-2.0, -3.0, -1.0, 0.001), "falls (reversed)"),
    (-3.0, _row(-1.0, -1.8, -0.2, 0.01), "shrinks"),
])
def test_an_earlier_bleu_difference_against_the_study_interval(earlier, row, verdict):
    assert bleu_verdict(earlier, row) == verdict


@pytest.mark.parametrize("earlier, now, verdict", [
    (1.26, 1.20, "stands"), (1.26, 1.14 * 0.95, "shrinks"), (1.26, 1.60, "grows"),
    (1.26, 0.90, "falls (reversed)"), (0.63, 0.67, "stands"), (0.63, 0.80, "shrinks")])
def test_an_earlier_speed_ratio_against_the_quiet_one(earlier, now, verdict):
    assert speed_verdict(earlier, now) == verdict


def _summary(comparison, name, mean, std, steps):
    return {"comparison": comparison, "transform": name, "n": 2, "mean": mean, "std": std,
            "per_seed": "", "seeds": "1 / 2", "steps": steps}


def test_the_answer_names_the_outcome_the_seeds_and_whether_convergence_closes_the_gap():
    config = _config(borrow=[], convergence_steps=3000)
    summary = [_summary("equal_steps", "softmax", 37.0, 0.5, "1200 / 1200"),
               _summary("equal_steps", "1.5-relu", 39.0, 0.4, "1200 / 1200"),
               _summary("convergence", "softmax", 40.0, None, "3000"),
               _summary("convergence", "1.5-relu", 40.3, None, "3000")]
    sig = [_row(2.0, 1.1, 2.9, 0.001, "equal_steps", seeds="joined"),
           _row(2.3, 1.0, 3.5, 0.001, "equal_steps", seeds="1"),
           _row(1.7, 0.1, 3.1, 0.08, "equal_steps", seeds="2"),
           _row(2.3, 1.0, 3.5, 0.001, "convergence_start", seeds="1"),
           _row(0.3, -0.8, 1.4, 0.3, "convergence", seeds="1")]
    (text,) = answer(config, summary, sig)
    assert text.startswith("**1.5-relu against softmax.** Equal steps (1.5-relu step 1,200, "
                           "softmax step 1,200): test BLEU 39.00 ± 0.40 against 37.00 ± 0.50")
    assert "Δ +2.00 [+1.10, +2.90], p = 0.001 on the 2 seeds' translations joined: **better**" \
        in text
    assert "per seed +2.30 / +1.70 (seeds 1 / 2), significant at 1 of 2" in text
    assert "Convergence (1.5-relu step 3,000, softmax step 3,000): test BLEU 40.30 against " \
           "40.00; Δ +0.30 [-0.80, +1.40], p = 0.300 (seed 1 only): **no significant " \
           "difference**" in text
    assert text.endswith("At seed 1 (in the convergence runs), Δ +2.30 "
                         "(p = 0.001) after 1,200 steps and +0.30 (p = 0.300) after 3,000: "
                         "**the gap closes**.")
    assert answer(config, summary, []) == []


def test_the_convergence_trend_is_read_off_the_convergence_runs_themselves():
    # the seed-1 runs had a gap at 1,200; the convergence runs (trained again from step 0)
    # had none there: their own start decides, so the gap opens, not holds
    config = _config(borrow=[], convergence_steps=3000)
    summary = [_summary(c, n, 38.0, None, s) for c, s in
               (("equal_steps", "1200"), ("convergence_start", "1200"),
                ("convergence", "3000")) for n in ("softmax", "1.5-relu")]
    sig = [_row(2.3, 1.0, 3.5, 0.001, "equal_steps", seeds="1"),
           _row(0.4, -0.6, 1.4, 0.4, "convergence_start", seeds="1"),
           _row(1.9, 0.9, 2.9, 0.001, "convergence", seeds="1")]
    (text,) = answer(config, summary, sig)
    assert text.endswith("At seed 1 (in the convergence runs), Δ +0.40 (p = 0.400) after "
                         "1,200 steps and +1.90 (p = 0.001) after 3,000: **a gap opens**.")
    assert "Convergence run" not in text  # the start is the trend's, not a comparison of its own


def test_earlier_claims_are_read_from_a_reproduce_folder(tmp_path):
    earlier = tmp_path / "old"
    earlier.mkdir()
    pd.DataFrame({"transform": ["softmax", "1.5-relu", "sparsemax"], "split": ["test"] * 3,
                  "bleu": [34.0, 41.1, 22.4]}).to_csv(earlier / "table1_bleu.csv", index=False)
    pd.DataFrame({"transform": ["softmax", "1.5-relu"], "tokens_per_s": [7535.0, 9506.0]}
                 ).to_csv(earlier / "training_time.csv", index=False)
    config = _config(borrow=[], earlier=str(earlier))
    sig = [_row(2.1, 1.2, 3.0, 0.001)]
    rows, note = earlier_rows(config, sig, {"softmax": 2483.0, "1.5-relu": 2200.0})
    assert note is None
    assert rows == [
        {"claim": "test BLEU 1.5-relu − softmax", "earlier": "+7.10",
         "study": "+2.10 [+1.20, +3.00], p = 0.001", "verdict": "shrinks"},
        {"claim": "training tokens/s 1.5-relu / softmax", "earlier": "1.26×",
         "study": "1.13× (quiet step times)", "verdict": "shrinks"}]
    (earlier / "training_time.csv").unlink()
    rows, note = earlier_rows(config, sig, {"softmax": 2483.0, "1.5-relu": 2200.0})
    assert len(rows) == 1 and note == (f"{earlier}/training_time.csv not found: those claims "
                                       "are not checked")


def test_an_unreadable_earlier_table_is_a_note_not_a_failure(tmp_path):
    (tmp_path / "table1_bleu.csv").write_text("transform,score\nsoftmax,34\n", encoding="utf-8")
    (tmp_path / "training_time.csv").write_bytes(b"\xff\xfe\x00bad")
    rows, note = earlier_rows(_config(borrow=[], earlier=str(tmp_path)),
                              [_row(2.1, 1.2, 3.0, 0.001)], {"softmax": 2.0, "1.5-relu": 1.0})
    assert rows == []
    assert note.startswith(f"{tmp_path / 'table1_bleu.csv'} has no bleu column; "
                           f"{tmp_path / 'training_time.csv'} could not be read (")
    assert note.endswith("): those claims are not checked")
