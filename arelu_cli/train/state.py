"""What a training run holds, what its checkpoints keep of it, and how a run resumes.

:class:`Session` is a run: everything it holds (config, data, model, optimizer, weight
average) and its :class:`State`, where it stands. ``last.pt`` stores the weights, optimizer,
average, per-process RNG states, data position and log accumulators
(:meth:`Session.payload`, :meth:`Session.save_last`), so a run killed at any moment resumes
from it (:func:`load_for_resume`, :meth:`Session.restore`) to the same final step with the
same losses (the paper's setup trains for a fixed budget; an interruption must not change
the result). ``best.pt`` and the
``[train] keep_every`` snapshots keep the decoding weights only.

A run resumes only on the data it was trained on: :func:`load_for_resume` compares the data
fingerprint the run recorded with the prepared folder's now
(:func:`arelu_cli.train.data_version.check_same_data`).
"""

from __future__ import annotations

import copy
import dataclasses
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch

from arelu_cli.config import Config, from_dict
from arelu_cli.data.prepared import Prepared
from arelu_cli.util.errors import UserError
from arelu_cli.model import checkpoint
from arelu_cli.train import distributed
from arelu_cli.model.transformer import TokenModel
from arelu_cli.train.schedule import noam_lr
from arelu_cli.train.data_version import DataChange, check_same_data
from arelu_cli.train.events import EventLog
from arelu_cli.train.run_dir import read_last
from arelu_cli.registry import OutputTransform
from arelu_cli.util.signatures import versions


@dataclass
class State:
    """Where training stands; everything here goes into ``last.pt``."""

    step: int = 0
    epoch: int = 0
    position: int = 0
    """Batches of ``epoch`` this process has consumed."""
    epoch_batches: int = 1
    elapsed: float = 0.0
    """Wall-clock seconds of the run before this process started (validation included)."""
    best_bleu: float = -1.0
    """The best validation score: BLEU, or for a language model minus the validation loss."""
    best_step: int = 0
    """The step of ``best_bleu``; 0 before the first validation."""
    valid_seconds: float = 0.0
    """Duration of the last validation: the time the budget keeps for a final one."""
    interval: dict = field(default_factory=lambda: {"loss": 0.0, "tgt": 0.0, "tokens": 0.0,
                                                    "seconds": 0.0})
    """Sums since the last log row (global over processes, loss local until logged)."""
    totals: dict = field(default_factory=lambda: {"tokens": 0.0, "seconds": 0.0})


@dataclass
class Session:
    """A training run: everything it holds and where it stands (:attr:`state`); built by
    :func:`arelu_cli.train.loop.setup_run`."""

    config: Config
    out: Path
    ctx: distributed.Context
    data: Prepared
    model: TokenModel
    """The plain model (weights, checkpoints, validation without an average)."""
    forward: torch.nn.Module
    """What the training step calls: the model (or, with ``fused_output``, the model and its
    fused loss: :class:`~arelu_cli.model.fused_output.FusedOutputLoss`), wrapped in DDP
    and/or compiled."""
    transform: OutputTransform
    optimizer: torch.optim.Optimizer
    average: TokenModel | None
    signature: str
    started: float = field(default_factory=time.perf_counter)
    saved_step: int | None = None
    """The step ``last.pt`` holds (None before the first save)."""
    recipe: str | None = None
    """The recipe's name, in the signature and the checkpoints (kept when resuming)."""
    state: State = field(default_factory=State)
    """Where the run stands."""
    events: EventLog | None = None
    """The TensorBoard events of the log rows (main process, ``[train] tensorboard``)."""
    beside: int = 0
    """Other runs trained at the same time by the same command (``arelu reproduce`` on a CPU:
    :mod:`arelu_cli.studies.side_by_side`), in ``summary.json``: its speed is a shared CPU's."""

    def clock(self) -> float:
        """Wall-clock seconds of the whole run so far."""
        return self.state.elapsed + time.perf_counter() - self.started

    def restore(self, ckpt: dict) -> None:
        """Put the weights, optimizer, average, state and this process's RNG of ``last.pt``
        back."""
        s, state = self, self.state
        if ckpt["world_size"] != s.ctx.world_size:
            raise UserError(f"the checkpoint was written by {ckpt['world_size']} process(es); "
                            f"resume with the same number (--nproc_per_node={ckpt['world_size']})")
        s.model.load_state_dict(ckpt["model"])
        s.optimizer.load_state_dict(ckpt["optimizer"])
        if s.average is not None:
            s.average.load_state_dict(ckpt["average"])
        for key, value in ckpt["state"].items():
            setattr(state, key, value)
        rng = ckpt["rng"][s.ctx.rank]
        torch.set_rng_state(rng["torch"])
        if rng["cuda"] is not None and s.ctx.device.type == "cuda":
            torch.cuda.set_rng_state(rng["cuda"], s.ctx.device)

    def payload(self, kind: str, state: State | None = None) -> dict:
        """What a checkpoint of ``kind`` holds: ``last`` (everything to resume), ``best`` (the
        decoding weights and their BLEU) or ``snapshot`` (the decoding weights); of ``state``,
        :attr:`state` when not given."""
        s, state = self, state or self.state
        weights = s.average if s.average is not None else s.model
        base = {"kind": kind, "config": s.config.to_dict(),
                "vocab": checkpoint.vocab_record(s.data), "transform": s.transform.name,
                "tau": s.transform.tau, "step": state.step, "world_size": s.ctx.world_size,
                "recipe": s.recipe, "versions": versions()}
        if kind == "best":
            return {**base, "model": weights.state_dict(), "average": None, "bleu": state.best_bleu}
        if kind == "snapshot":
            return {**base, "model": weights.state_dict(), "average": None}
        t = s.config.train
        d_model = s.config.model.d_model
        schedule = {"kind": "noam", "lr": t.lr, "warmup": t.warmup, "d_model": d_model,
                    "current_lr": noam_lr(max(state.step, 1), t.lr, d_model, t.warmup)}
        return {**base, "model": s.model.state_dict(), "optimizer": s.optimizer.state_dict(),
                "schedule": schedule,
                "average": None if s.average is None else s.average.state_dict(),
                "state": dict(vars(state))}

    def save_last(self) -> None:
        """Every process's RNG state is gathered; the main process writes ``last.pt``."""
        s, state = self, self.state
        state.interval["loss"] = float(state.interval["loss"])
        cuda = s.ctx.device.type == "cuda"
        rng = {"torch": torch.get_rng_state(),
               "cuda": torch.cuda.get_rng_state(s.ctx.device) if cuda else None}
        rngs = distributed.gather(s.ctx, rng)
        if s.ctx.is_main:
            state_now = copy.copy(state)
            state_now.elapsed = s.clock()
            checkpoint.save({**s.payload("last", state_now), "rng": rngs}, s.out / checkpoint.LAST)
        s.saved_step = state.step


def load_for_resume(out: Path, config: Config, data: Prepared, transform: OutputTransform,
                    allow_data_change: bool) -> tuple[dict, DataChange | None]:
    """``last.pt`` of the run in ``out``, checked against what it is to continue with: the
    same vocabulary, transform, tau, ``[model]`` and (unless ``allow_data_change``) data;
    and the change of data fingerprint to record, if the data changed and that is allowed."""
    ckpt = read_last(out)
    tau = config.train.tau if not isinstance(config.train.tau, str) else None
    checkpoint.check_compatible(ckpt, out / checkpoint.LAST, data=data, transform=transform.name,
                                tau=tau)
    # Read through the schema: a key added since the checkpoint was written takes its default.
    saved = from_dict({"model": ckpt["config"]["model"]}).model
    changed = [(f.name, getattr(saved, f.name), getattr(config.model, f.name))
               for f in dataclasses.fields(saved)
               if getattr(saved, f.name) != getattr(config.model, f.name)]
    if changed:
        shown = ", ".join(f"{key} {old!r} there, {new!r} now" for key, old, new in changed)
        raise UserError(f"{out / checkpoint.LAST} has another [model] than the recipe "
                        f"({shown}); resume with the [model] it was trained with (its "
                        "config.json)")
    if ckpt["step"] > config.train.max_steps:
        raise UserError(f"{out} is at step {ckpt['step']} already, past the max_steps of "
                        f"{config.train.max_steps} asked for now; give a larger --max-steps "
                        "(or --set train.max_steps=N) to continue it")
    return ckpt, check_same_data(out, data, ckpt["step"], allow_data_change)
