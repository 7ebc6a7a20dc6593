"""Checkpoints that describe themselves, are written atomically and refuse a wrong match.

A checkpoint is a dict saved with ``torch.save`` holding only tensors and plain values
(so it loads with ``weights_only=True``)::

    format, kind ("last": resumable, "best": weights for decoding), config (resolved, nested),
    vocab {checksum, src_size, tgt_size, path}, transform, tau, step, world_size, versions,
    model, average (EMA weights or None); last.pt also: optimizer, schedule, rng (per
    process), state (epoch, data position, clock, best BLEU, log accumulators)

``last.pt`` carries everything needed to continue a killed run to the same result;
``best.pt`` (best validation BLEU, as in the paper) carries the weights used for decoding.
A file is written to a temporary sibling, flushed to disk, then renamed over the old one,
so a kill at any moment leaves either the old or the new checkpoint, never half of one.
"""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path

import torch

from arelu_cli.config import Config, from_dict
from arelu_cli.data.prepared import Prepared
from arelu_cli.util.errors import UserError
from arelu_cli.model.lm import build_model
from arelu_cli.model.transformer import TokenModel
from arelu_cli.registry import OutputTransform, get_transform
from arelu_cli.util.atomic import open_temp

FORMAT = 1
LAST, BEST = "last.pt", "best.pt"


def vocab_checksum(data: Prepared) -> str:
    """SHA-256 of the prepared folder's tokenizer file(s): the identity of the vocabulary."""
    names = ["tokenizer.json"] if data.shared_vocab else ["tokenizer.src.json", "tokenizer.tgt.json"]
    digest = hashlib.sha256()
    for name in names:
        digest.update((data.path / name).read_bytes())
    return digest.hexdigest()


def vocab_record(data: Prepared) -> dict:
    return {"checksum": vocab_checksum(data), "src_size": data.src_vocab_size,
            "tgt_size": data.tgt_vocab_size, "path": str(data.path)}


def save(payload: dict, path: str | Path) -> Path:
    """``torch.save`` to a temporary file in the same folder, fsync, then rename; the file
    gets the mode of the one it replaces, or 0666 less the umask."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = open_temp(path)  # the umask's mode (or the replaced file's), not mkstemp's 0600
    try:
        with os.fdopen(fd, "wb") as handle:
            torch.save({"format": FORMAT, **payload}, handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def load(path: str | Path) -> dict:
    """Read a checkpoint onto the CPU; a missing or foreign file is a UserError."""
    path = Path(path)
    if path.is_dir():
        path = path / LAST
    if not path.is_file():
        raise UserError(f"no checkpoint at {path}; `arelu train --out DIR` writes DIR/{LAST} "
                        f"and DIR/{BEST}")
    try:
        ckpt = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # torch raises many types for a corrupt or foreign file
        # Some of its messages run over lines of advice (in colour): keep what went wrong.
        lines = re.sub(r"\x1b\[[0-9;]*m", "", str(err)).strip().splitlines()
        why = f"{type(err).__name__}: {(lines or [''])[0].split('. ')[0][:200]}"
        raise UserError(f"{path} is not a readable arelu checkpoint ({why}); give a last.pt "
                        "or best.pt that arelu train wrote") from None
    if not isinstance(ckpt, dict) or ckpt.get("format") != FORMAT:
        raise UserError(f"{path} is not an arelu checkpoint of format {FORMAT}")
    return ckpt


def check_compatible(ckpt: dict, path: str | Path, *, data: Prepared, transform: str,
                     tau: float | None) -> None:
    """Refuse to continue a checkpoint with another vocabulary, transform or tau."""
    checksum = vocab_checksum(data)
    if ckpt["vocab"]["checksum"] != checksum:
        raise UserError(
            f"checkpoint {path} was trained with another vocabulary (from {ckpt['vocab']['path']}, "
            f"checksum {ckpt['vocab']['checksum'][:12]}) than {data.path} (checksum "
            f"{checksum[:12]}); use the prepared folder it was trained on, or start a new run "
            "with another --out")
    if ckpt["transform"] != transform:
        raise UserError(
            f"checkpoint {path} was trained with the transform {ckpt['transform']}, but the "
            f"recipe and options ask for {transform}; resume with the recipe it was trained "
            f"with (or --transform {ckpt['transform']}), or start a new run with another --out")
    if tau is not None and ckpt["tau"] is not None and abs(ckpt["tau"] - tau) > 1e-12:
        raise UserError(f"checkpoint {path} was trained with tau={ckpt['tau']:.6g}, not "
                        f"{tau:.6g}; resume without --tau")


def load_model(path: str | Path, device: torch.device | str = "cpu"
               ) -> tuple[TokenModel, Config, OutputTransform]:
    """The model of a checkpoint (its averaged weights when it has them), in eval mode,
    with its resolved config and output transform."""
    ckpt = load(path)
    config = from_dict(ckpt["config"])
    model = build_model(config, ckpt["vocab"]["src_size"], ckpt["vocab"]["tgt_size"])
    model.load_state_dict(ckpt["average"] if ckpt.get("average") is not None else ckpt["model"])
    transform = get_transform(ckpt["transform"], tau=ckpt["tau"] or 0.0)
    return model.to(device).eval(), config, transform
