"""A run that diverges ends there, hiding nothing and losing no good state: a step whose loss
or gradient norm is not finite (NaN or inf) is never applied, and weights that an update
made non-finite (or whose validation loss is not finite) are never saved, so ``last.pt``
keeps the last good state. :func:`diverged` writes ``diverged.json`` in the run folder for
tools (a diverged run has no ``summary.json``) and raises :class:`Diverged` with the
one-line message (exit status 2, like every :class:`UserError`).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import torch

from arelu_cli.util.atomic import atomic_write_text
from arelu_cli.util.errors import UserError
from arelu_cli.train.run_dir import diverged_path
from arelu_cli.train.stop_signals import resume_hint



class Diverged(UserError):
    """The loss, the gradient norm or the weights stopped being finite."""


def is_finite(value: torch.Tensor | float) -> bool:
    return math.isfinite(float(value))


def grad_norm(parameters: list[torch.Tensor], clip: float) -> torch.Tensor:
    """The gradients' global L2 norm, clipped to ``clip`` first when it is positive."""
    if clip > 0:
        return torch.nn.utils.clip_grad_norm_(parameters, clip)
    return torch.nn.utils.get_total_norm([p.grad for p in parameters if p.grad is not None])


def diverged(out: Path, step: int, what: dict, saved_step: int | None, record: bool) -> None:
    """Stop the run at ``step``, where the values ``what`` (name: value) are not finite:
    raise :class:`Diverged`; with ``record`` (the main process) first write ``diverged.json``
    (the step, those values, the message) for tools."""
    values = ", ".join(f"{name} {float(value):g}" for name, value in what.items())
    message = (f"training diverged at step {step} ({values}); that step was not saved. "
               f"{resume_hint(out, saved_step)} after lowering the learning rate (--set "
               "train.lr=...) or clipping gradients (--set train.clip_norm=1.0)")
    if record:  # strict JSON: a value that is not finite is written as "nan", "inf", "-inf"
        numbers = {k: float(v) if is_finite(v) else str(float(v)) for k, v in what.items()}
        atomic_write_text(diverged_path(out), json.dumps(
            {"step": step, **numbers, "last_saved_step": saved_step, "message": message},
            indent=2, allow_nan=False) + "\n")
    raise Diverged(message)
