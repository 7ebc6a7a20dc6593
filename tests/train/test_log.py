"""The training log: rows under its one header, and a resumed run's truncation that keeps
the rows as written and survives whatever a kill left."""

import csv

import pandas as pd
import pytest

from arelu_cli.train import log as train_log
from arelu_cli.util.errors import UserError

OLDER = ("step", "epoch", "wall_s", "tokens_per_s", "train_loss", "lr", "val_loss", "val_bleu",
         "signature")
"""The columns of a log written before ``threads`` (and the statistics) existed."""


def _rows(path):
    with open(path, encoding="utf-8", newline="") as handle:
        return list(csv.reader(handle))


def test_a_resumed_run_keeps_its_rows_as_written(tmp_path):
    """Rows after the checkpoint and a line a kill cut short are dropped; the kept lines
    stay byte for byte (``100`` above an empty cell is not rewritten as ``100.0``); the
    rows appended after it are as wide as the header."""
    path = tmp_path / "log.csv"
    blank = dict.fromkeys(train_log.COLUMNS, "")
    with open(path, "w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=train_log.COLUMNS)
        writer.writeheader()
        writer.writerow(blank | {"step": 1, "tokens_per_s": 100, "train_loss": 5.0,
                                 "signature": "sig|recipe:r"})
        writer.writerow(blank | {"step": 2, "val_loss": 4.5, "val_bleu": 1.2,
                                 "signature": "sig|recipe:r"})  # validation only
        writer.writerow(blank | {"step": 3, "tokens_per_s": 100, "signature": "sig|recipe:r"})
        handle.write("4,0.4,4.0,10")  # killed mid-row
    kept = b"".join(path.read_bytes().splitlines(keepends=True)[:3])
    train_log.truncate_after(path, 2)
    assert path.read_bytes() == kept
    train_log.append_row(path, {"step": 3, "epoch": 0.3, "wall_s": 3.0, "tokens_per_s": 90,
                                "threads": 2, "train_loss": 3.4, "tau_z": 0.3, "signature": "s"})
    rows = _rows(path)
    assert rows[0] == list(train_log.COLUMNS) and {len(r) for r in rows} == {len(rows[0])}
    frame = train_log.read_log(path)
    assert frame["step"].tolist() == [1, 2, 3] and frame["val_loss"].tolist()[1] == 4.5
    assert frame["train_loss"].fillna(0).tolist() == [5.0, 0.0, 3.4]
    assert frame["signature"].tolist() == ["sig|recipe:r", "sig|recipe:r", "s"]
    assert frame["threads"].fillna(0).tolist() == [0, 0, 2]


def test_a_row_is_never_appended_under_other_columns(tmp_path):
    path = tmp_path / "log.csv"
    path.write_text("step,epoch,signature\n1,0.1,s\n")
    with pytest.raises(UserError, match=r"log.csv has other columns than arelu train's log"):
        train_log.append_row(path, {"step": 2, "signature": "s"})
    assert path.read_text() == "step,epoch,signature\n1,0.1,s\n"


@pytest.mark.parametrize("text", ["", "step,epo"])
def test_a_log_killed_before_its_first_row_starts_again(tmp_path, text):
    """A kill between creating log.csv and writing its header left it empty or cut short:
    resuming empties it and the next row writes the header."""
    path = tmp_path / "log.csv"
    path.write_text(text)
    train_log.truncate_after(path, 5)
    assert path.read_text() == ""
    train_log.append_row(path, {"step": 6, "signature": "s"})
    frame = pd.read_csv(path)
    assert tuple(frame.columns) == train_log.COLUMNS and frame["step"].tolist() == [6]


def test_a_log_without_a_step_column_is_not_rewritten(tmp_path):
    path = tmp_path / "log.csv"
    path.write_text("a,b\n1,2\n")
    with pytest.raises(UserError, match=r"log.csv is not a training log of arelu"):
        train_log.truncate_after(path, 1)
    assert path.read_text() == "a,b\n1,2\n"
