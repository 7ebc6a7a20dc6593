"""Result rows to a CSV: fixed columns; a user's or another command's file never replaced."""

import pandas as pd
import pytest

from arelu_cli.analysis.score import COLUMNS as SCORE_COLUMNS, append_row
from arelu_cli.util.errors import UserError
from arelu_cli.util.results import write_rows, write_tables


def test_write_rows_round_trips_and_leaves_no_temporary(tmp_path):
    path = tmp_path / "sub" / "rows.csv"
    write_rows([{"a": 1, "b": "x"}, {"a": 2, "b": "y"}], path)
    assert pd.read_csv(path).to_dict("list") == {"a": [1, 2], "b": ["x", "y"]}
    assert [p.name for p in path.parent.iterdir()] == ["rows.csv"]


@pytest.mark.parametrize("existing", ["x,y\n1,2\n", "x\n", "notes without commas\n",
                                      "a,b,signature\n1,2,s\n", "a,b,c\n1,2,3\n", "b,a\n1,2\n"])
def test_write_rows_never_replaces_a_file_it_did_not_write(tmp_path, existing):
    path = tmp_path / "mine.csv"
    path.write_text(existing)
    with pytest.raises(UserError, match="exists and is not a CSV this command writes"):
        write_rows([{"a": 1.5, "b": "x"}], path)
    assert path.read_text() == existing


def test_refused_rows_are_kept_beside_the_file_they_would_have_replaced(tmp_path):
    """The measurements are not lost with the refusal: each refused write goes to a new file
    that the error names."""
    path = tmp_path / "mine.csv"
    path.write_text("x,y\n1,2\n")
    for expected in ("mine.new.csv", "mine.new-2.csv"):
        with pytest.raises(UserError, match=f"the rows of this run are in .*{expected}$"):
            write_rows([{"a": 1.5, "b": "x"}], path)
        assert pd.read_csv(tmp_path / expected).to_dict("records") == [{"a": 1.5, "b": "x"}]
    assert path.read_text() == "x,y\n1,2\n"


def test_rows_for_a_folder_are_kept_beside_it(tmp_path):
    (tmp_path / "out").mkdir()
    with pytest.raises(UserError, match="it is a folder.*the rows of this run are in .*out.new.csv$"):
        write_rows([{"a": 1}], tmp_path / "out")
    assert pd.read_csv(tmp_path / "out.new.csv").to_dict("records") == [{"a": 1}]


def test_another_commands_results_csv_is_never_replaced(tmp_path):
    """A results CSV has a signature column whichever command wrote it: that is no licence to
    replace it (``arelu empty-check --out scores.csv`` would lose ``arelu score``'s rows)."""
    scores = tmp_path / "scores.csv"
    append_row({c: "1" for c in SCORE_COLUMNS}, scores)
    before = scores.read_bytes()
    empty_check_rows = [{"transform": "softmax", "split": "dev", "n_sentences": 3,
                         "percent_empty": 0.0, "signature": "transform:softmax"}]
    with pytest.raises(UserError, match="choose another --out"):
        write_rows(empty_check_rows, scores)
    assert scores.read_bytes() == before


@pytest.mark.parametrize("existing", ["a,b\n1,2\n", ""])
def test_write_rows_replaces_its_own_csvs(tmp_path, existing):
    path = tmp_path / "rows.csv"
    path.write_text(existing)
    write_rows([{"a": 1.5, "b": "x"}], path)
    assert path.read_text() == "a,b\n1.5,x\n"


def test_given_columns_order_the_csv_and_refuse_other_rows(tmp_path):
    path = tmp_path / "rows.csv"
    assert list(write_rows([{"b": 1, "a": 2}], path, ("a", "b")).columns) == ["a", "b"]
    assert path.read_text() == "a,b\n2,1\n"
    write_rows([], path, ("a", "b"))
    assert path.read_text() == "a,b\n"
    for row in ({"a": 1}, {"a": 1, "b": 2, "c": 3}):
        with pytest.raises(ValueError, match="differ"):
            write_rows([row], path, ("a", "b"))


@pytest.mark.parametrize("where, message", [
    ("dir", "it is a folder; give a file name"),
    ("file/rows.csv", "file is a file, not a folder"),
])
def test_unwritable_paths_are_one_line_errors(tmp_path, where, message):
    (tmp_path / "dir").mkdir()
    (tmp_path / "file").write_text("keep")
    with pytest.raises(UserError, match=message):
        write_rows([{"a": 1}], tmp_path / where)
    assert (tmp_path / "file").read_text() == "keep" and not any((tmp_path / "dir").iterdir())


def test_a_csv_of_fewer_or_reordered_columns_is_not_replaced(tmp_path):
    """Only the writer's exact header is its own: a CSV with some of its columns (signature
    included) or the same ones reordered is refused and left as it was."""
    path = tmp_path / "bench.csv"
    columns = ("transform", "beam", "seconds", "tokens", "ratio", "signature")
    row = {"transform": "softmax", "beam": 1, "seconds": 1.0, "tokens": 9, "ratio": 1.0,
           "signature": "s"}
    for foreign in ("transform,beam,seconds,ratio,signature\n",
                    "beam,transform,seconds,tokens,ratio,signature\n"):
        path.write_text(foreign)
        with pytest.raises(UserError, match="not a CSV this command writes"):
            write_rows([row], path, columns)
        assert path.read_text() == foreign


def test_write_tables_writes_each_csv_and_draws_the_figures_of_those_with_rows(tmp_path):
    drawn = []

    def draw(csv, png):
        drawn.append((csv.name, png.name, len(pd.read_csv(csv))))
    write_tables(tmp_path, [("a.csv", [{"x": 1}, {"x": 2}], None), ("b.csv", [], ("x", "y")),
                            ("c.csv", [{"y": 3, "x": 4}], ("x", "y"))],
                 {"a.csv": draw, "b.csv": draw})
    assert drawn == [("a.csv", "a.png", 2)]  # b has no rows: no figure; c has no figure
    assert (tmp_path / "b.csv").read_text() == "x,y\n"
    assert list(pd.read_csv(tmp_path / "c.csv").columns) == ["x", "y"]
