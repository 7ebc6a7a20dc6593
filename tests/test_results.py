"""Signatures and atomic CSV writing: file modes kept, a user's file never replaced."""

import os

import pandas as pd
import pytest

from arelu_cli.errors import UserError
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


@pytest.fixture
def umask_027():
    old = os.umask(0o027)
    yield
    os.umask(old)


def test_new_files_follow_the_umask_and_replaced_files_keep_their_mode(tmp_path, umask_027):
    new = atomic_write_text(tmp_path / "new.txt", "a")
    assert new.stat().st_mode & 0o777 == 0o640
    for mode in (0o644, 0o600, 0o664):
        new.chmod(mode)
        atomic_write_text(new, "b")
        assert new.stat().st_mode & 0o777 == mode and new.read_text() == "b"


@pytest.mark.parametrize("existing", ["x,y\n1,2\n", "x\n", "notes without commas\n"])
def test_write_rows_never_replaces_a_file_it_did_not_write(tmp_path, existing):
    path = tmp_path / "mine.csv"
    path.write_text(existing)
    with pytest.raises(UserError, match="exists and is not a CSV this command writes"):
        write_rows([{"a": 1.5, "b": "x"}], path)
    assert path.read_text() == existing


@pytest.mark.parametrize("existing", ["a,b\n1,2\n", "other,signature\n1,s\n", ""])
def test_write_rows_replaces_its_own_csvs(tmp_path, existing):
    path = tmp_path / "rows.csv"
    path.write_text(existing)
    write_rows([{"a": 1.5, "b": "x"}], path)
    assert path.read_text() == "a,b\n1.5,x\n"


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


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_a_read_only_folder_is_a_one_line_error(tmp_path):
    (tmp_path / "ro").mkdir(mode=0o555)
    with pytest.raises(UserError, match="Permission denied"):
        atomic_write_text(tmp_path / "ro" / "f.txt", "x")
