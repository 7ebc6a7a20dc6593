"""TensorBoard event files of a training run (``[train] tensorboard``, on by default).

Every row of ``log.csv`` (:mod:`arelu_cli.train.log`) also goes to TensorBoard, into
``RUN/tensorboard/`` next to it, at the row's step: the losses, learning rate, tokens/s,
the output layer's support size, ``sum p``, threshold and share of zero outputs, and the
dev BLEU (translation) or perplexity (a language model); :data:`TAGS` names them.
``tensorboard --logdir runs/`` then shows every run of a folder side by side, as JoeyNMT
and the Hugging Face Trainer's ``report_to`` do. Only the main process writes, through
``torch.utils.tensorboard`` (the ``tensorboard`` package); the file is opened at the first
row (a run refused before its first step leaves none) and written by its background
thread, flushed every :data:`FLUSH_SECONDS` and at the end, so training does not wait on
it. A resumed run hides the events a killed run wrote after its last checkpoint, as
``log.csv`` drops those rows.
"""

from __future__ import annotations

import math
from pathlib import Path

FOLDER = "tensorboard"
TAGS = {"train_loss": "loss/train", "val_loss": "loss/dev", "lr": "train/lr",
        "tokens_per_s": "train/tokens_per_s", "nnz": "output/support_size",
        "sum_p": "output/sum_p", "tau": "output/tau", "tau_z": "output/tau_z",
        "logit_norm": "output/logit_norm", "zero_share": "output/zero_share",
        "val_bleu": "dev/bleu", "val_ppl": "dev/perplexity"}
"""``log.csv`` column (or ``zero_share``, ``1 - nnz / V``) -> TensorBoard tag."""
FLUSH_SECONDS = 120
MAX_QUEUE = 10_000
"""Events held before the background thread writes them (rather than one flush per row)."""


class EventLog:
    """The scalars of a run's log rows as TensorBoard events in ``RUN/tensorboard/``."""

    def __init__(self, run: Path, vocab_size: int, purge_from: int | None = None):
        self.folder = Path(run) / FOLDER
        self.vocab_size = vocab_size
        self.purge_from = purge_from
        """A resumed run's first step: events an earlier attempt wrote at it or later are
        hidden (None: a new run, whose folder holds no events)."""
        self._writer = None

    def add(self, step: int, row: dict) -> None:
        """The row's scalars at ``step``; empty and non-numeric cells are left out."""
        values = dict(row)
        if isinstance(values.get("nnz"), (int, float)) and self.vocab_size:
            values["zero_share"] = 1.0 - values["nnz"] / self.vocab_size
        scalars = {TAGS[key]: float(value) for key, value in values.items()
                   if key in TAGS and isinstance(value, (int, float))
                   and not isinstance(value, bool) and not math.isnan(value)}
        if not scalars:
            return
        writer = self._open()
        for tag, value in scalars.items():
            writer.add_scalar(tag, value, global_step=step)

    def _open(self):
        if self._writer is None:
            from torch.utils.tensorboard import SummaryWriter

            self._writer = SummaryWriter(str(self.folder), purge_step=self.purge_from,
                                         max_queue=MAX_QUEUE, flush_secs=FLUSH_SECONDS)
        return self._writer

    def close(self) -> None:
        """Write what is queued and close the file (nothing if no row came)."""
        if self._writer is not None:
            self._writer.close()
            self._writer = None


def remove_events(run: Path) -> None:
    """Delete the event files an earlier, unsaved attempt of a new run left in
    ``RUN/tensorboard/`` (only TensorBoard's own ``events.out.tfevents.*`` files)."""
    folder = Path(run) / FOLDER
    if not folder.is_dir():
        return
    for path in folder.glob("events.out.tfevents.*"):
        if path.is_file():
            path.unlink()
    if not any(folder.iterdir()):
        folder.rmdir()
