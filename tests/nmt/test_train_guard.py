"""Guards of a training run: run folders, divergence records, stop signals."""

import json
import os
import re
import signal
from pathlib import Path

import pytest
import torch

from arelu_cli.nmt import checkpoint
from arelu_cli.errors import UserError
from arelu_cli.nmt.train_guard import (DIVERGED, Diverged, StopSignals, check_new_run_folder,
                                       check_run_folder, check_tau_given, clean_temporaries,
                                       diverged, grad_norm, read_last)


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


@pytest.mark.parametrize("tau, transform, refused", [
    (0.3, "softmax", True), (0.0, "1.5-entmax", True), (0.3, "1.5-relu", False),
    ("auto", "softmax", False), (None, "sparsemax", False)])
def test_a_number_for_tau_needs_a_transform_with_one(tau, transform, refused):
    if refused:
        with pytest.raises(UserError, match=rf"--tau {tau:g} applies only to alpha-ReLU"):
            check_tau_given(tau, transform)
    else:
        check_tau_given(tau, transform)


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


def test_divergence_is_recorded_and_raised(tmp_path):
    what = {"loss": torch.tensor(float("nan")), "grad_norm": torch.tensor(float("inf"))}
    with pytest.raises(Diverged) as raised:
        diverged(tmp_path, 7, what, saved_step=6, record=True)
    message = str(raised.value)
    assert "\n" not in message and isinstance(raised.value, UserError)
    assert message.startswith("training diverged at step 7 (loss nan, grad_norm inf)")
    assert f"{tmp_path / 'last.pt'} keeps step 6; resume with: arelu train --resume" in message
    record = json.loads((tmp_path / DIVERGED).read_text())
    assert record["step"] == 7 and record["last_saved_step"] == 6
    assert record["message"] == message
    assert (record["loss"], record["grad_norm"]) == ("nan", "inf")  # strict JSON
    with pytest.raises(Diverged, match=r"no last.pt was saved yet; start again with --out"):
        diverged(tmp_path / "other", 1, {"loss": float("nan")}, saved_step=None, record=False)
    assert not (tmp_path / "other").exists()


def test_grad_norm_is_the_global_norm_and_clips():
    a, b = torch.zeros(3, requires_grad=True), torch.zeros(2, requires_grad=True)
    a.grad, b.grad = torch.tensor([3.0, 0.0, 0.0]), torch.tensor([0.0, 4.0])
    assert float(grad_norm([a, b], 0.0)) == pytest.approx(5.0)
    assert float(grad_norm([a, b], 1.0)) == pytest.approx(5.0)  # the norm before clipping
    assert float(torch.cat([a.grad, b.grad]).norm()) == pytest.approx(1.0, rel=1e-5)
    b.grad[0] = float("nan")
    assert grad_norm([a, b], 0.0).isnan()


@pytest.fixture
def terminal_signals():
    """SIGINT and SIGTERM as in a terminal, even where the tests run with them ignored."""
    before = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    yield signal.default_int_handler, signal.SIG_DFL
    signal.signal(signal.SIGINT, before[0])
    signal.signal(signal.SIGTERM, before[1])


def test_first_signal_asks_to_stop_and_a_second_ctrl_c_aborts(terminal_signals):
    before = terminal_signals
    with StopSignals(announce=False) as signals:
        assert signals.received is None
        os.kill(os.getpid(), signal.SIGTERM)
        assert signals.received == signal.SIGTERM and signals.code == 143
        os.kill(os.getpid(), signal.SIGTERM)  # a second SIGTERM changes nothing
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGINT)
    assert (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)) == before
    with StopSignals(announce=False) as signals:
        os.kill(os.getpid(), signal.SIGINT)
        assert signals.code == 130
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # as under nohup: it stays ignored
    with StopSignals(announce=False) as signals:
        os.kill(os.getpid(), signal.SIGTERM)
        assert signals.received is None
        assert signal.getsignal(signal.SIGTERM) is signal.SIG_IGN
    with StopSignals(announce=False) as signals:
        signals.received = signal.SIGINT
        stopped = signals.interrupted(5, Path("runs/x"), 5, rank=0)
    assert stopped.code == 130 and str(stopped) == (
        "stopped by SIGINT after step 5: runs/x/last.pt keeps step 5; resume with: "
        "arelu train --resume runs/x")
