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


def test_a_summary_is_read_by_name_and_a_score_is_higher_is_better(tmp_path):
    from arelu_cli.train import run_dir

    assert not run_dir.finished(tmp_path) and not run_dir.trained(tmp_path)
    run_dir.write_summary(tmp_path, {"best_bleu": 12.5, "steps": 6})
    assert run_dir.finished(tmp_path) and run_dir.read_summary(tmp_path)["steps"] == 6
    assert run_dir.best_score({"best_bleu": 12.5}) == 12.5
    lm = {"best_bleu": -4.7, "best_dev_loss": 4.7}
    assert run_dir.best_score(lm) == -4.7 and run_dir.best_dev_loss(lm) == 4.7
    assert run_dir.best_dev_loss({"best_bleu": -4.7}) == 4.7  # a language model's, by its score
    assert run_dir.best_score({"best_dev_loss": 3.0}) == -3.0


def test_a_run_trained_again_keeps_its_first_record_once(tmp_path):
    from arelu_cli.train import run_dir

    run_dir.write_config(tmp_path, {"train": {"lr": 1.0}})
    run_dir.write_summary(tmp_path, {"best_bleu": 1.0})
    first = run_dir.keep_first(tmp_path)
    run_dir.write_summary(tmp_path, {"best_bleu": 2.0})
    assert run_dir.keep_first(tmp_path) == first  # kept once
    assert run_dir.first_summary(tmp_path) == {"best_bleu": 1.0}
    (tmp_path / run_dir.SUMMARY).unlink()
    assert run_dir.trained(tmp_path) and not run_dir.finished(tmp_path)
    assert run_dir.read_config(first) == {"train": {"lr": 1.0}}
