"""Tables 1-3, inference time, sparsity/self-norm histograms and translation examples."""

import pytest

from arelu_cli.util.errors import UserError
from arelu_cli.studies.paper import distributions, examples, tables
from arelu_cli.studies.paper.columns import COLUMNS
from arelu_cli.util.results import write_rows


def test_table1_rows_keep_order_and_signatures(tmp_path):
    rows = [tables.table1_row("iwslt14", "softmax", 35.0, 58.1, "BLEU|nrefs:1|case:mixed",
                              signature="sig-a"), tables.table1_row("iwslt14", "1.5-relu", 37.0)]
    assert [(r["transform"], r["bleu"], r["chrf"]) for r in rows] == [
        ("softmax", 35.0, 58.1), ("1.5-relu", 37.0, None)]
    assert rows[0]["signature"] == "sig-a" and "transform:1.5-relu|data:iwslt14" in rows[1]["signature"]
    frame = write_rows(rows, tmp_path / "table1_bleu.csv", COLUMNS["table1_bleu.csv"])
    assert tuple(frame.columns) == COLUMNS["table1_bleu.csv"]


def test_table2_percent_and_impossible_counts():
    row = tables.table2_row("toy", "softmax", 3, 40)
    assert row["percent_empty"] == pytest.approx(7.5)
    assert set(row) == set(COLUMNS["table2_empty.csv"])
    with pytest.raises(UserError, match="impossible"):
        tables.table2_row("toy", "softmax", 41, 40)


def test_table3_analytic_rows_at_the_paper_vocabularies_plus_extra():
    extra = {c: None for c in COLUMNS["table3_tau.csv"]} | {"corpus": "toy", "d_vocab": 500}
    rows = tables.table3_rows([extra])
    assert [r["d_vocab"] for r in rows] == [10_000, 40_000, 60_000, 500]
    assert [round(r["tau_analytic"], 2) for r in rows[:3]] == [0.33, 0.17, 0.14]
    assert [round(r["p_star"], 4) for r in rows[:3]] == [0.0184, 0.0171, 0.0170]
    assert all(set(r) == set(COLUMNS["table3_tau.csv"]) for r in rows)


def test_inference_time_normalized_by_the_fastest():
    rows = tables.inference_time_rows("wmt13-en-ru", {
        ("softmax", 1): 10.0, ("1.5-entmax", 1): 19.0, ("softmax", 5): 20.0})
    assert [(r["transform"], r["beam"], r["normalized"]) for r in rows] == [
        ("1.5-entmax", 1, 1.9), ("softmax", 1, 1.0), ("softmax", 5, 2.0)]
    assert set(rows[0]) == set(COLUMNS["fig_inference_time.csv"])
    with pytest.raises(UserError):
        tables.inference_time_rows("x", {})


def test_sparsity_histograms_share_bins_and_sum_to_one():
    rows = distributions.sparsity_rows("toy", "test", {
        "1.5-relu": [0.90, 0.92, 0.95, 0.97], "1.5-entmax": [0.99, 0.995]}, bins=5)
    by = {}
    for r in rows:
        by.setdefault(r["transform"], []).append(r)
    assert [r["bin_left"] for r in by["1.5-relu"]] == [r["bin_left"] for r in by["1.5-entmax"]]
    assert by["1.5-relu"][0]["bin_left"] == 0.90 and by["1.5-relu"][-1]["bin_right"] == 0.995
    for part in by.values():
        assert sum(r["fraction"] for r in part) == pytest.approx(1.0)
    assert [r["count"] for r in by["1.5-relu"]] == [1, 1, 1, 1, 0]
    assert set(rows[0]) == set(COLUMNS["fig_sparsity.csv"])
    with pytest.raises(UserError, match=r"\[0, 1\]"):
        distributions.sparsity_rows("toy", "test", {"x": [1.5]})


def test_self_norm_rows_repeat_mean_and_std():
    rows = distributions.self_norm_rows("iwslt14", "test", {"1.5-relu": [1.0, 1.2, 1.4]}, bins=2)
    assert [r["mean"] for r in rows] == pytest.approx([1.2, 1.2])
    assert [r["std"] for r in rows] == pytest.approx([0.2, 0.2])  # sample std of 1.0, 1.2, 1.4
    assert [r["count"] for r in rows] == [1, 2]
    assert set(rows[0]) == set(COLUMNS["fig_self_norm.csv"])
    with pytest.raises(UserError, match="no self-normalization values"):
        distributions.self_norm_rows("x", "test", {"1.5-relu": []})


def test_translation_examples_pick_disagreements_both_ways():
    refs = ["the cat sat on the mat", "a red car drove by", "hello world", "good morning to you"]
    a = ["the cat sat on the mat", "a blue bus", "hello world", "good morning to you all"]
    b = ["a dog stood", "a red car drove by", "hello world", "good morning to you"]
    rows = examples.translation_examples_rows(refs, refs, "1.5-relu", a, "1.5-entmax", b, n=2)
    assert [r["index"] for r in rows] == [0, 1]  # a wins most on 0, b wins most on 1
    assert rows[0]["bleu_diff"] > 0 > rows[1]["bleu_diff"]
    assert tuple(rows[0]) == COLUMNS["translation_examples.csv"]
    three = examples.translation_examples_rows(refs, refs, "a", a, "b", b, n=3)
    assert [r["index"] for r in three] == [0, 1, 3]  # identical line 2 never shows
    with pytest.raises(UserError, match="one line per sentence"):
        examples.translation_examples_rows(refs, refs[:2], "a", a, "b", b)


def test_rows_of_one_seed_carry_it():
    row = tables.table1_row("toy", "softmax", 30.0, seed=2)
    assert row["seed"] == 2 and tuple(row) == COLUMNS["table1_bleu.csv"]
    assert tables.table2_row("toy", "softmax", 1, 4, seed=2)["seed"] == 2
    assert tables.inference_time_rows("toy", {("softmax", 1): 1.0}, seed=2)[0]["seed"] == 2
    assert {r["seed"] for r in distributions.sparsity_rows("toy", "test", {"a": [0.5]},
                                                          bins=2, seed=2)} == {2}


def test_significance_rows_leave_the_baselines_test_empty():
    from arelu_cli.studies.translation import bootstrap_rows

    refs = ["a b c d", "e f g h"]
    hyps = {("softmax", 1): ["a b c", "e f"], ("1.5-relu", 1): refs,
            ("softmax", 2): ["a b c", "e f"], ("1.5-relu", 2): refs}
    tests = bootstrap_rows([("softmax", "softmax"), ("1.5-relu", "softmax")], hyps, refs,
                           [("1+2", (1, 2))], samples=50)
    rows = tables.significance_rows("toy", tests, {})
    assert [r["transform"] for r in rows] == ["softmax", "1.5-relu"]
    assert rows[0]["p_value"] is None and rows[0]["delta"] is None
    assert rows[1]["p_value"] is not None and rows[1]["seeds"] == "1+2"
    assert all(tuple(r) == COLUMNS["table1_significance.csv"] for r in rows)
