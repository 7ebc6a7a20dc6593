"""``arelu prepare`` never deletes or overwrites an input or a user's file, says what a folder
was made from, and cleans up after a killed run without ever leaving a half-written folder."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import textwrap

import pytest

from arelu_cli.data.prepare import PrepareRequest, prepare
from arelu_cli.data.prepared import load_prepared
from arelu_cli.util.errors import UserError

from .corpus_files import write_pair

SMALL = ("--merges", "30")
TOY = ("toy", "--train-size", "200", "--eval-size", "10", "--toy-vocab", "100", "--merges", "40")


def _custom(root, offset=0):
    for split, n, start in (("train", 30, 0), ("dev", 4, 40), ("test", 4, 50)):
        write_pair(root, split, ("src", "tgt"), n, offset + start)
    return root


def _snapshot(root):
    """Every file under ``root`` with its bytes and mode."""
    return {p.relative_to(root): (p.read_bytes(), p.stat().st_mode)
            for p in sorted(root.rglob("*")) if p.is_file()}


def _refused(ran, match):
    assert ran.code == 2, ran.out
    assert match in ran.err, ran.err
    assert ran.err.count("\n") == 1 and "Traceback" not in ran.err


@pytest.mark.parametrize("out, match", [
    ("X", "exists and is not a prepared corpus folder"),        # above the source
    ("X/raw", "exists and is not a prepared corpus folder"),    # the source itself
    ("X/raw/train.src", "is a file; give a folder"),            # an input file
])
def test_force_never_deletes_the_source(cli, tmp_path, out, match):
    raw = _custom(tmp_path / "X" / "raw")
    (tmp_path / "X" / "notes.txt").write_text("mine\n")
    before = _snapshot(tmp_path / "X")
    _refused(cli("prepare", "custom", "--source", raw, "--out", tmp_path / out, "--force", *SMALL),
             match)
    assert _snapshot(tmp_path / "X") == before
    assert sorted(p.name for p in (tmp_path / "X").iterdir()) == ["notes.txt", "raw"]


def test_a_prepared_folder_as_source_is_not_its_own_out(cli, tmp_path):
    """A prepared folder holds {split}.{lang} text: usable as a custom source, never replaced
    by what is prepared from it."""
    assert cli("prepare", *TOY, "--out", tmp_path / "toy").code == 0
    before = _snapshot(tmp_path / "toy")
    _refused(cli("prepare", "custom", "--source", tmp_path / "toy", "--out", tmp_path / "toy",
                 "--force", *SMALL), f"--out {tmp_path / 'toy'} is the input {tmp_path / 'toy'}")
    split_file = f"train={tmp_path / 'toy' / 'train.src'},{tmp_path / 'toy' / 'train.tgt'}"
    _refused(cli("prepare", "custom", "--source", _custom(tmp_path / "c"), "--split-file",
                 split_file, "--out", tmp_path / "toy", "--force", *SMALL),
             f"holds the input {tmp_path / 'toy' / 'train.src'}")
    assert _snapshot(tmp_path / "toy") == before


def test_an_out_inside_the_source_leaves_the_inputs_alone(cli, tmp_path):
    raw = _custom(tmp_path / "raw")
    before = _snapshot(raw)
    assert cli("prepare", "custom", "--source", raw, "--out", raw / "prepared", *SMALL).code == 0
    assert cli("prepare", "custom", "--source", raw, "--out", raw / "prepared", "--force",
               *SMALL).code == 0
    assert {k: v for k, v in _snapshot(raw).items() if k.parts[0] != "prepared"} == before
    assert load_prepared(raw / "prepared").references("test") == \
        (raw / "test.tgt").read_text().split("\n")[:-1]


def test_force_keeps_a_users_file_inside_a_prepared_folder(cli, tmp_path):
    out = tmp_path / "toy"
    assert cli("prepare", *TOY, "--out", out).code == 0
    (out / "my-notes.txt").write_text("mine\n")
    _refused(cli("prepare", *TOY, "--out", out, "--force"),
             "holds files arelu prepare did not write (my-notes.txt)")
    assert (out / "my-notes.txt").read_text() == "mine\n"


def test_another_source_needs_force_and_meta_records_checksums(cli, tmp_path):
    out = tmp_path / "out"
    first_source = _custom(tmp_path / "a")
    assert cli("prepare", "custom", "--source", first_source, "--out", out, *SMALL).code == 0
    meta = json.loads((out / "meta.json").read_text())
    assert set(meta["checksums"]) >= {"test.tgt", "test.src", "train.src.ids.npy", "tokenizer.json"}
    assert "meta.json" not in meta["checksums"]
    first = load_prepared(out).split_checksum("test")
    other = _custom(tmp_path / "b", offset=100)
    _refused(cli("prepare", "custom", "--source", other, "--out", out, *SMALL),
             f"prepared from files in {tmp_path / 'a'}, not these inputs; pass --force")
    assert load_prepared(out).split_checksum("test") == first
    assert cli("prepare", "custom", "--source", other, "--out", out, *SMALL, "--force").code == 0
    assert load_prepared(out).split_checksum("test") != first


@pytest.mark.parametrize("args, match", [
    (("--toy-vocab", "0"), "--toy-vocab must be at least 1, got 0"),
    (("--eval-size", "0"), "--eval-size must be at least 1, got 0"),
    (("--eval-size", "-3"), "--eval-size must be at least 1, got -3"),
    (("--train-size", "0"), "--train-size must be at least 1, got 0"),
    (("--max-words", "0"), "--max-words must be at least 1, got 0"),
    (("--max-ratio", "nan"), "--max-ratio must be at least 1, got nan"),
])
def test_zero_is_not_the_default(cli, tmp_path, args, match):
    _refused(cli("prepare", "toy", *args, "--out", tmp_path / "out"), match)
    assert not (tmp_path / "out").exists()


def test_unwritable_out_is_one_line(cli, tmp_path):
    (tmp_path / "file").write_text("x\n")
    _refused(cli("prepare", *TOY, "--out", tmp_path / "file" / "toy"),
             f"{tmp_path / 'file'} is a file, not a folder")
    assert (tmp_path / "file").read_text() == "x\n"


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_read_only_out_is_one_line(cli, tmp_path):
    (tmp_path / "ro").mkdir(mode=0o555)
    _refused(cli("prepare", *TOY, "--out", tmp_path / "ro" / "toy"), "Permission denied")


def test_folder_and_files_get_the_umask_modes(tmp_path):
    old = os.umask(0o027)
    try:
        prepare(PrepareRequest("custom", tmp_path / "out", source=_custom(tmp_path / "c"),
                               merges=30))
    finally:
        os.umask(old)
    assert (tmp_path / "out").stat().st_mode & 0o777 == 0o750
    assert {p.stat().st_mode & 0o777 for p in (tmp_path / "out").iterdir()} == {0o640}
    (tmp_path / "out").chmod(0o711)
    prepare(PrepareRequest("custom", tmp_path / "out", source=tmp_path / "c", merges=31,
                           force=True))
    assert (tmp_path / "out").stat().st_mode & 0o777 == 0o711


KILLED = """
import os, signal, sys
from pathlib import Path
from arelu_cli.data import bpe, prepared
from arelu_cli.data.prepare import PrepareRequest, prepare
where = sys.argv[1]
if where == "encoding":
    bpe.train_bpe = lambda *a, **k: os.kill(os.getpid(), signal.SIGKILL)
else:  # between moving the old folder aside and putting the new one in place
    real, calls = os.replace, []
    def replace(a, b):
        calls.append(a)
        if len(calls) == 2:
            os.kill(os.getpid(), signal.SIGKILL)
        real(a, b)
    prepared.os.replace = replace
out, source, merges = Path(sys.argv[2]), Path(sys.argv[3]), int(sys.argv[4])
prepare(PrepareRequest("custom", out, source=source, merges=merges, force=True))
"""


def _killed(where, out, source, merges):
    ran = subprocess.run([sys.executable, "-c", textwrap.dedent(KILLED), where, str(out),
                          str(source), str(merges)], capture_output=True, text=True, timeout=600)
    assert ran.returncode == -9, ran.stderr


def test_a_killed_run_leaves_no_folder_and_the_next_one_cleans_up(tmp_path):
    source, out = _custom(tmp_path / "c"), tmp_path / "out"
    _killed("encoding", out, source, 30)
    assert not out.exists()
    left = [p.name for p in tmp_path.iterdir() if p.name.startswith(".out.")]
    assert len(left) == 1 and left[0].startswith(".out.tmp-")
    assert not (tmp_path / left[0] / "meta.json").exists()
    (tmp_path / ".out.tmp-of-someone-else").mkdir()  # not a name prepare makes: kept
    assert prepare(PrepareRequest("custom", out, source=source, merges=30)).rebuilt
    assert sorted(p.name for p in tmp_path.iterdir()) == [".out.tmp-of-someone-else", "c", "out"]


def test_a_kill_while_swapping_folders_keeps_the_old_one(tmp_path):
    source, out = _custom(tmp_path / "c"), tmp_path / "out"
    prepare(PrepareRequest("custom", out, source=source, merges=30))
    _killed("swapping", out, source, 31)
    assert not out.exists()  # the old folder is aside, the new one not yet in place
    again = prepare(PrepareRequest("custom", out, source=source, merges=30))
    assert not again.rebuilt and load_prepared(out).meta["options"]["merges"] == 30
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c", "out"]


def test_a_running_prepares_folder_is_not_touched(tmp_path):
    source, out = _custom(tmp_path / "c"), tmp_path / "out"
    running = tmp_path / f".out.tmp-{os.getpid()}-0123abcd@{socket.gethostname()}"
    running.mkdir()
    prepare(PrepareRequest("custom", out, source=source, merges=30))
    assert running.is_dir()


def test_moving_inputs_is_still_the_same_source(tmp_path):
    """Same bytes elsewhere: up to date; with other options a rebuild needs --force (as in
    the same place)."""
    source = _custom(tmp_path / "c")
    prepare(PrepareRequest("custom", tmp_path / "out", source=source, merges=30))
    moved = source.rename(tmp_path / "elsewhere")
    assert not prepare(PrepareRequest("custom", tmp_path / "out", source=moved, merges=30)).rebuilt
    with pytest.raises(UserError, match=r"other options \(--merges: 30 there, 31 now\)"):
        prepare(PrepareRequest("custom", tmp_path / "out", source=moved, merges=31))
    assert prepare(PrepareRequest("custom", tmp_path / "out", source=moved, merges=31,
                                  force=True)).rebuilt
    assert load_prepared(tmp_path / "out").meta["options"]["merges"] == 31


@pytest.mark.parametrize("change, said", [
    (("--seed", "1"), "(--seed: 0 there, 1 now)"),
    (("--merges", "30"), "(--merges: 40 there, 30 now)"),
    (("--train-size", "150"), "(--train-size: 200 there, 150 now)"),
])
def test_other_options_on_a_prepared_folder_need_force(cli, tmp_path, change, said):
    """Another seed or merge count would replace the vocabulary and ids that runs trained on
    the folder depend on: refused, the folder untouched, unless --force."""
    out = tmp_path / "out"
    assert cli("prepare", *TOY, "--out", out).code == 0
    before = _snapshot(out)
    args = list(TOY) + list(change)
    _refused(cli("prepare", *args, "--out", out), f"{out} holds a toy corpus prepared with "
             f"other options {said}; pass --force to replace it")
    assert _snapshot(out) == before
    assert cli("prepare", *args, "--out", out, "--force").code == 0
    assert json.loads((out / "meta.json").read_text())["options"][change[0][2:].replace(
        "-", "_")] == int(change[1])
    assert cli("prepare", *args, "--out", out).code == 0  # now up to date


def test_too_many_merges_are_refused_before_any_work(cli, tmp_path):
    for corpus in ("toy", "tinyshakespeare"):
        _refused(cli("prepare", corpus, "--merges", "1000000000", "--out", tmp_path / "out"),
                 "--merges 1,000,000,000 is more than 1,000,000, the most arelu prepare learns")
        assert not (tmp_path / "out").exists()


def test_a_line_too_long_is_refused(cli, tmp_path):
    source = _custom(tmp_path / "c")
    (source / "test.src").write_text("a b\n" + "x " * 60_000 + "\nc\nd\n", encoding="utf-8")
    _refused(cli("prepare", "custom", "--source", source, "--out", tmp_path / "out", *SMALL),
             f"{source / 'test.src'} line 2 is 120,000 characters long; a corpus file holds one "
             "sentence or paragraph per line (at most 100,000 characters)")
    assert not (tmp_path / "out").exists()


def test_one_text_as_several_splits_is_a_warning(cli, tmp_path):
    source = _custom(tmp_path / "c")
    files = ",".join(str(source / f"test.{lang}") for lang in ("src", "tgt"))
    ran = cli("prepare", "custom", "--source", source, "--split-file", f"dev={files}",
              "--out", tmp_path / "out", *SMALL)
    assert ran.code == 0, ran.err
    assert ("warning: the dev and test splits hold the same text, so test scores are on the "
            "text that dev chose the settings on; give each split its own text") in ran.err
    ran = cli("prepare", "custom", "--source", source, "--split-file", f"dev={files}",
              "--split-file", f"train={files}", "--out", tmp_path / "out2", *SMALL)
    assert "the train and dev and test splits hold the same text, so scores on it measure " \
           "memorization" in ran.err
    assert "same text" not in cli("prepare", "custom", "--source", source, "--out",
                                  tmp_path / "out3", *SMALL).err
