"""Signatures and atomic CSV writing."""

import pandas as pd

from arelu_cli.results import atomic_write_text, signature, write_rows


def test_signature_orders_known_fields_and_appends_versions():
    sig = signature(seed=1, transform="1.5-relu", tau=0.33, alpha=1.5, data="toy", extra="x")
    assert sig.startswith("transform:1.5-relu|alpha:1.5|tau:0.33|data:toy|seed:1|extra:x|")
    assert "|torch:" in sig and "|python:" in sig


def test_none_fields_are_left_out():
    assert "tau:" not in signature(transform="softmax", tau=None)


def test_write_rows_round_trips_and_leaves_no_temporary(tmp_path):
    path = tmp_path / "sub" / "rows.csv"
    write_rows([{"a": 1, "b": "x"}, {"a": 2, "b": "y"}], path)
    assert pd.read_csv(path).to_dict("list") == {"a": [1, 2], "b": ["x", "y"]}
    assert [p.name for p in path.parent.iterdir()] == ["rows.csv"]


def test_atomic_write_replaces_whole_file(tmp_path):
    path = tmp_path / "f.txt"
    atomic_write_text(path, "old")
    atomic_write_text(path, "new")
    assert path.read_text() == "new"
