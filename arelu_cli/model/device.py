"""The device a model runs on, picked from a command's ``--device``."""

from __future__ import annotations

import torch

from arelu_cli.util.errors import UserError

DEVICES = ("auto", "cpu", "cuda")


def pick_device(name: str, local_rank: int = 0) -> torch.device:
    """``auto`` -> CUDA when available, else CPU; ``cuda`` without a GPU and any name but
    :data:`DEVICES` are errors (a device torch cannot run on must not become the CPU
    quietly)."""
    if name not in DEVICES:
        raise UserError(f"--device must be one of {', '.join(DEVICES)}, got {name!r}")
    if name == "cuda" or (name == "auto" and torch.cuda.is_available()):
        if not torch.cuda.is_available():
            raise UserError("device 'cuda' was asked for but torch sees no GPU; use --device cpu")
        return torch.device("cuda", local_rank)
    return torch.device("cpu")
