"""Signatures and atomic CSV writing: file modes kept, a user's file never replaced."""

import os

import pandas as pd
import pytest

from arelu_cli.analysis.score import COLUMNS as SCORE_COLUMNS, append_row
from arelu_cli.errors import UserError
from arelu_cli import results
from arelu_cli.results import atomic_write_text, machine, signature, write_rows


def test_signature_orders_known_fields_and_appends_versions():
    sig = signature(seed=1, transform="1.5-relu", tau=0.33, alpha=1.5, data="toy", extra="x")
    assert sig.startswith("transform:1.5-relu|alpha:1.5|tau:0.33|data:toy|seed:1|extra:x|")
    assert "|torch:" in sig and "|python:" in sig
    assert results.signature_field(sig, "seed") == "1"
    assert results.signature_field(sig, "recipe") is None


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


@pytest.mark.parametrize("existing", ["x,y\n1,2\n", "x\n", "notes without commas\n",
                                      "a,b,signature\n1,2,s\n", "a,b,c\n1,2,3\n", "b,a\n1,2\n"])
def test_write_rows_never_replaces_a_file_it_did_not_write(tmp_path, existing):
    path = tmp_path / "mine.csv"
    path.write_text(existing)
    with pytest.raises(UserError, match="exists and is not a CSV this command writes"):
        write_rows([{"a": 1.5, "b": "x"}], path)
    assert path.read_text() == existing


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


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_a_read_only_folder_is_a_one_line_error(tmp_path):
    (tmp_path / "ro").mkdir(mode=0o555)
    with pytest.raises(UserError, match="Permission denied"):
        atomic_write_text(tmp_path / "ro" / "f.txt", "x")


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


def test_machine_names_the_cpu_model_and_the_usable_cpus(monkeypatch):
    results._cpu_model.cache_clear()
    monkeypatch.setattr(results.Path, "read_text", lambda self, **kw: (
        "processor\t: 0\nmodel name\t: Some  CPU @ 2.0GHz\nflags\t: avx2\n"))
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 3, 5}, raising=False)
    try:
        assert machine("cpu") == "Some CPU @ 2.0GHz, 3 CPUs"
    finally:
        results._cpu_model.cache_clear()


def test_machine_without_proc_cpuinfo_falls_back_to_platform(monkeypatch):
    results._cpu_model.cache_clear()

    def missing(self, **kw):
        raise FileNotFoundError(self)
    monkeypatch.setattr(results.Path, "read_text", missing)
    monkeypatch.setattr(results.platform, "processor", lambda: "")
    monkeypatch.setattr(results.platform, "machine", lambda: "x86_64")
    try:
        assert machine().startswith("x86_64, ")
    finally:
        results._cpu_model.cache_clear()
