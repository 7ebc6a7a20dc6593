"""Blind annotation sheets, score parsing, Cohen's kappa and scoring filled sheets."""

import math

import pandas as pd
import pytest

from arelu_cli.util.errors import UserError
from arelu_cli.studies.paper import human_eval as he
from arelu_cli.studies.paper.columns import COLUMNS

N = 12
SOURCES = [f"source {i}" for i in range(N)]
REFS = [f"reference {i}" for i in range(N)]
SYSTEMS = {"softmax": [f"softmax {i}" for i in range(N)],
           "1.5-relu": [f"relu {i}" for i in range(N)]}


@pytest.fixture
def exported(tmp_path):
    return he.export_sheets(SOURCES, REFS, SYSTEMS, tmp_path / "sheets", n_items=3, seed=7)


def test_the_key_is_kept_out_of_the_annotators_folder(exported, tmp_path):
    assert exported.key == tmp_path / "sheets-key" / "key.csv" and exported.key.is_file()
    assert not (tmp_path / "sheets" / "key.csv").exists()


def test_sheets_are_blind_and_the_key_maps_back(exported):
    key = pd.read_csv(exported.key)
    for name, path in exported.sheets.items():
        sheet = pd.read_csv(path, keep_default_na=False)
        assert list(sheet.columns) == ["item", "source", "A", "B", "C",
                                       "score_A", "score_B", "score_C"]
        assert len(sheet) == 3 and (sheet[["score_A", "score_B", "score_C"]] == "").all().all()
        assert list(sheet["item"]) == [f"{name}-001", f"{name}-002", f"{name}-003"]
        for r in key[key["annotator"] == name].to_dict("records"):
            row = sheet[sheet["item"] == r["item"]].iloc[0]
            texts = {"reference": REFS, **SYSTEMS}[r["system"]]
            assert row[r["column"]] == texts[r["index"]]
            assert row["source"] == SOURCES[r["index"]]
    assert (exported.sheets["a1"].parent / "INSTRUCTIONS.txt").is_file()


def test_shared_items_and_sample_sizes(exported):
    key = pd.read_csv(exported.key)
    per = {a: set(key.loc[key["annotator"] == a, "index"]) for a in ("a1", "a2")}
    assert exported.n_shared == 1  # round(3 * 1/3)
    assert len(per["a1"]) == len(per["a2"]) == 3 and len(per["a1"] & per["a2"]) == 1


def test_export_is_deterministic_and_shuffles_candidates(tmp_path):
    one = he.export_sheets(SOURCES, REFS, SYSTEMS, tmp_path / "1", n_items=5, seed=3)
    two = he.export_sheets(SOURCES, REFS, SYSTEMS, tmp_path / "2", n_items=5, seed=3)
    assert one.key.read_text() == two.key.read_text()
    key = pd.read_csv(one.key)
    assert key.loc[key["column"] == "A", "system"].nunique() > 1  # the reference is not always A


@pytest.mark.parametrize("kwargs,match", [
    ({"n_items": 9}, "need 15 sentences; the test set has 12"),  # 3 shared + 2 x 6 own
    ({"annotators": ("a", "a")}, "distinct"),
    ({"shared_fraction": 1.5}, "shared fraction"),
])
def test_export_errors(tmp_path, kwargs, match):
    with pytest.raises(UserError, match=match):
        he.export_sheets(SOURCES, REFS, SYSTEMS, tmp_path, **kwargs)


def test_export_refuses_a_system_named_reference(tmp_path):
    with pytest.raises(UserError, match="reference"):
        he.export_sheets(SOURCES, REFS, {"reference": REFS}, tmp_path)


@pytest.mark.parametrize("text,expected", [
    ("4", (4.0, 4)), ("3+", (3.25, 3)), ("4-", (3.75, 4)), ("2 +", (2.25, 2)),
    ("1\u2212", (0.75, 1)), ("3.0", (3.0, 3)), ("", None), ("  ", None),
])
def test_parse_score(text, expected):
    assert he.parse_score(text) == expected


@pytest.mark.parametrize("text", ["5", "0", "3++", "good", "2.5"])
def test_parse_score_rejects(text):
    with pytest.raises(ValueError, match="not a score"):
        he.parse_score(text)


def test_kappa_against_hand_computation():
    a = [4, 4, 3, 2, 4, 3, 1, 4, 3, 2]
    b = [4, 3, 3, 2, 4, 4, 1, 4, 2, 2]
    # Agreement on 7 of 10 pairs: p_o = 0.7.
    # Marginals: a = (.1, .2, .3, .4), b = (.1, .3, .2, .4) for scores 1..4;
    # p_e = .1*.1 + .2*.3 + .3*.2 + .4*.4 = .01 + .06 + .06 + .16 = .29;
    # kappa = (.7 - .29) / (1 - .29) = .41 / .71.
    assert he.cohen_kappa(a, b) == pytest.approx(0.41 / 0.71)
    # Linear weights |i - j| / 3: observed disagreement = three pairs at distance 1 -> .3 / 3;
    # expected = sum_ij |i - j| a_i b_j / 3, by row of a:
    #   .1 * (0 + 1*.3 + 2*.2 + 3*.4) = .19;  .2 * (1*.1 + 0 + 1*.2 + 2*.4) = .22;
    #   .3 * (2*.1 + 1*.3 + 0 + 1*.4) = .27;  .4 * (3*.1 + 2*.3 + 1*.2 + 0) = .44;  total 1.12 / 3
    # kappa_linear = 1 - .3 / 1.12.
    assert he.cohen_kappa(a, b, weights="linear") == pytest.approx(1 - 0.3 / 1.12)


def test_kappa_edge_cases():
    assert he.cohen_kappa([1, 2, 3], [1, 2, 3]) == 1.0
    assert math.isnan(he.cohen_kappa([4, 4], [4, 4]))  # chance agreement is already perfect
    with pytest.raises(ValueError):
        he.cohen_kappa([1, 2], [1])


def _fill(exported, scores):
    """Fill every sheet from ``scores[(annotator, system, is_shared)]``."""
    key = pd.read_csv(exported.key)
    shared = set(key.loc[key["annotator"] == "a1", "index"]) & set(
        key.loc[key["annotator"] == "a2", "index"])
    for r in key.to_dict("records"):
        path = exported.sheets[r["annotator"]]
        sheet = pd.read_csv(path, keep_default_na=False, dtype=str)
        value = scores[(r["annotator"], r["system"], r["index"] in shared)]
        sheet.loc[sheet["item"] == r["item"], f"score_{r['column']}"] = value
        sheet.to_csv(path, index=False)


def test_score_sheets_means_std_and_kappa(exported):
    scores = {(a, s, sh): v for a in ("a1", "a2") for sh in (True, False)
              for s, v in (("reference", "4"), ("softmax", "3+"), ("1.5-relu", "2-"))}
    scores[("a2", "softmax", True)] = "2"
    _fill(exported, scores)
    systems, agreement = he.score_sheets(list(exported.sheets.values()), exported.key)
    by = {r["system"]: r for r in systems}
    assert [r["system"] for r in systems] == ["reference", "1.5-relu", "softmax"]
    assert (by["reference"]["n"], by["reference"]["mean"], by["reference"]["std"]) == (6, 4.0, 0.0)
    assert by["softmax"]["mean"] == pytest.approx((5 * 3.25 + 2.0) / 6)
    assert by["1.5-relu"]["mean"] == pytest.approx(1.75)
    # Shared item, categories a1 = (4, 3, 2), a2 = (4, 2, 2): p_o = 2/3;
    # p_e = P(2) 1/3 * 2/3 + P(3) 1/3 * 0 + P(4) 1/3 * 1/3 = 1/3; kappa = (2/3 - 1/3) / (2/3).
    (pair,) = agreement
    assert (pair["n_items"], pair["n_judgements"]) == (1, 3)
    assert pair["kappa"] == pytest.approx(0.5)
    assert set(systems[0]) == set(COLUMNS["table_human_eval.csv"])
    assert set(pair) == set(COLUMNS["human_eval_kappa.csv"])


def test_score_sheets_errors(exported, tmp_path):
    with pytest.raises(UserError, match="no scores yet"):
        he.score_sheets(list(exported.sheets.values()), exported.key)
    with pytest.raises(UserError, match="twice"):
        he.score_sheets([exported.sheets["a1"]] * 2, exported.key)
    sheet = pd.read_csv(exported.sheets["a1"], keep_default_na=False, dtype=str)
    sheet.loc[0, "score_B"] = "excellent"
    sheet.to_csv(exported.sheets["a1"], index=False)
    with pytest.raises(UserError, match="score_B: 'excellent' is not a score"):
        he.score_sheets([exported.sheets["a1"]], exported.key)
    with pytest.raises(UserError, match="not a key file"):
        he.score_sheets([exported.sheets["a1"]], exported.sheets["a2"])
    other = he.export_sheets(SOURCES, REFS, SYSTEMS, tmp_path / "other", n_items=3,
                             annotators=("x", "y"))
    with pytest.raises(UserError, match="not in the key"):
        he.score_sheets([other.sheets["x"]], exported.key)


def _edit(path, edit):
    sheet = pd.read_csv(path, keep_default_na=False, dtype=str)
    sheet = edit(sheet)
    sheet.to_csv(path, index=False)


def test_a_sheet_that_is_not_the_exported_one_is_named(exported):
    """Another annotator's item, a deleted score column, an edited text and a sheet cut to a
    few rows are each named in one line."""
    a1, a2 = exported.sheets["a1"], exported.sheets["a2"]
    keep = {p: p.read_text() for p in (a1, a2)}

    def refused(match, *sheets):
        with pytest.raises(UserError, match=match) as err:
            he.score_sheets(list(sheets or (a1, a2)), exported.key)
        assert "\n" not in str(err.value)
        for path, text in keep.items():
            path.write_text(text)

    foreign = pd.read_csv(a2, keep_default_na=False, dtype=str).iloc[[0]]
    _edit(a1, lambda s: pd.concat([s, foreign]))
    refused(rf"{a1}: item a2-001 was exported to a2, not to a1 whose sheet this is; move its "
            "row back to a2's sheet")
    _edit(a1, lambda s: s.iloc[:1])
    refused(rf"{a1} holds 1 of the 3 items exported to a1 \(missing a1-002, a1-003\); "
            "restore the deleted rows")
    _edit(a1, lambda s: s.drop(columns=["score_C"]))
    refused(rf"{a1} has no score_C column \(deleted\?\); restore it as exported")
    _edit(a1, lambda s: s.assign(B=s["B"].where(s.index != 1, "a better translation")))
    refused(rf"{a1}, item a1-002: the source or candidate B was edited since the export")
    _edit(a1, lambda s: s.assign(source=s["source"].where(s.index != 0, "edited")))
    refused(rf"{a1}, item a1-001: the source or candidate A was edited", a1)
