"""The device a model runs on, picked from a command's ``--device``."""

from __future__ import annotations

import torch

from arelu_cli.util.errors import UserError

def pick_device(name: str, local_rank: int = 0) -> torch.device:
    """``auto`` -> CUDA when available, else CPU; ``cuda`` without a GPU is an error."""
    if name == "cuda" or (name == "auto" and torch.cuda.is_available()):
        if not torch.cuda.is_available():
            raise UserError("device 'cuda' was asked for but torch sees no GPU; use --device cpu")
        return torch.device("cuda", local_rank)
    return torch.device("cpu")
