"""A training run's folder: writable, new or a run folder, ``--resume`` with ``last.pt``."""

import os
import re

import pytest

from arelu_cli.util.errors import UserError
from arelu_cli.model import checkpoint
from arelu_cli.train.run_dir import (check_new_run_folder, check_run_folder, clean_temporaries,
                                      read_last)


def test_a_run_folder_must_be_a_writable_folder(tmp_path):
    (tmp_path / "file").write_text("x")
    with pytest.raises(UserError, match=r"is a file, not a run folder; give --out a folder"):
        check_run_folder(tmp_path / "file", create=True)
    with pytest.raises(UserError, match=r"cannot write the run folder .*file/run"):
        check_run_folder(tmp_path / "file" / "run", create=True)
    check_run_folder(tmp_path / "new" / "run", create=False)
    assert not (tmp_path / "new").exists()  # only the main process creates it
    check_run_folder(tmp_path / "new" / "run", create=True)
    assert (tmp_path / "new" / "run").is_dir() and not any((tmp_path / "new" / "run").iterdir())


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_a_read_only_folder_is_refused(tmp_path):
    tmp_path.chmod(0o555)
    try:
        with pytest.raises(UserError, match=r"cannot write the run folder"):
            check_run_folder(tmp_path, create=True)
    finally:
        tmp_path.chmod(0o755)


def test_a_new_run_goes_only_into_an_empty_folder_or_a_run_folder(tmp_path):
    check_new_run_folder(tmp_path / "absent")
    check_new_run_folder(tmp_path)  # empty
    (tmp_path / ".config.json.0123abcd.tmp").write_text("{")  # another process writing it
    check_new_run_folder(tmp_path)
    (tmp_path / "config.json").write_text('{"x": 1}')  # not arelu train's
    with pytest.raises(UserError, match=r"not a run folder of arelu train \(it holds "
                                        r"config.json\); give --out a new or empty folder"):
        check_new_run_folder(tmp_path)
    (tmp_path / "config.json").write_text('{"model": {}, "train": {}, "resolved": {}}')
    (tmp_path / "notes.txt").write_text("a run's folder may hold the user's notes too")
    check_new_run_folder(tmp_path)
    (tmp_path / checkpoint.LAST).write_text("x")
    with pytest.raises(UserError, match=r"already holds a run; continue it with --resume"):
        check_new_run_folder(tmp_path)


def test_what_killed_writes_left_is_removed_and_nothing_else(tmp_path):
    (tmp_path / "steps").mkdir()
    left = [tmp_path / ".last.pt.0123abcd.tmp", tmp_path / "steps" / ".step-4.pt.89abcdef.tmp"]
    kept = [tmp_path / "last.pt", tmp_path / ".last.pt.mine", tmp_path / "notes.0123abcd.tmp"]
    for path in left + kept:
        path.write_text("x")
    assert sorted(clean_temporaries(tmp_path)) == sorted(left)
    assert all(p.exists() for p in kept) and not any(p.exists() for p in left)


def test_resume_needs_a_folder_with_last_pt(tmp_path):
    (tmp_path / "last.pt").write_text("x")
    with pytest.raises(UserError, match=r"--resume takes a run folder .*, not the file .*; "
                       r"use --resume " + re.escape(str(tmp_path))):
        read_last(tmp_path / "last.pt")
    (tmp_path / "notes.txt").write_text("x")
    with pytest.raises(UserError, match=r"--resume takes a run folder \(the --out of an earlier "
                       r"arelu train\), not the file .*notes.txt$"):
        read_last(tmp_path / "notes.txt")
    (tmp_path / "empty").mkdir()
    with pytest.raises(UserError, match=r"empty holds no last.pt, so there is no run to resume; "
                       r"start one with --out .*empty \(without --resume\)"):
        read_last(tmp_path / "empty")
    with pytest.raises(UserError, match=r"missing does not exist"):
        read_last(tmp_path / "missing")
    with pytest.raises(UserError, match=r"not a readable arelu checkpoint"):
        read_last(tmp_path)
    checkpoint.save({"step": 3}, tmp_path / "last.pt")
    assert read_last(tmp_path)["step"] == 3
