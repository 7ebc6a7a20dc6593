"""Which version of its prepared folder a run was trained on: ``--resume`` continues a run
only on the version its ``config.json`` records (the data fingerprint of
:func:`arelu_cli.data.prepared.data_fingerprint`); another version only with
``--allow-data-change``, which :func:`record_data_change` notes in the run's ``config.json``.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import Path

from arelu_cli.data.prepared import Prepared, data_fingerprint
from arelu_cli.util.errors import UserError
from arelu_cli.train.run_dir import CONFIG, read_config, write_config

SHORT = 12
"""Hex digits of a data fingerprint shown in messages."""


@dataclass(frozen=True)
class DataChange:
    """A resumed run goes on, from ``step``, on another version of its prepared folder."""

    step: int
    before: str | None
    after: str | None


def recorded_fingerprint(run: Path) -> str | None:
    """The data fingerprint ``train`` recorded in the run's config.json; None when it recorded
    none (data without checksums) or the config.json cannot be read."""
    config = read_config(run)
    resolved = config.get("resolved") if isinstance(config, dict) else None
    found = resolved.get("data_fingerprint") if isinstance(resolved, dict) else None
    return found if isinstance(found, str) else None


def check_same_data(out: Path, data: Prepared, step: int,
                    allow_change: bool) -> DataChange | None:
    """Resuming the run in ``out`` (at ``step``) on ``data``: refuse another version of the
    data than the run recorded, unless ``allow_change`` (then return the change, to be
    recorded)."""
    recorded, current = recorded_fingerprint(out), data_fingerprint(data.meta)
    if recorded == current:
        return None
    if not allow_change:
        raise UserError(
            f"{out} was trained on another version of {data.path} (data fingerprint "
            f"{_short(recorded)}, now {_short(current)}); train into a new --out, or continue "
            f"it on the changed data with: arelu train --resume {shlex.quote(str(out))} "
            "--allow-data-change")
    return DataChange(step, recorded, current)


def _short(fingerprint: str | None) -> str:
    return fingerprint[:SHORT] if fingerprint else "none"


def record_data_change(out: Path, change: DataChange) -> str:
    """Note ``change`` in the run's config.json (``resolved.data_fingerprint`` becomes the new
    one; ``resolved.data_changes`` lists every change) and return the line that says so."""
    config = read_config(out)
    resolved = config["resolved"]
    resolved["data_fingerprint"] = change.after
    resolved["data_changes"] = [*resolved.get("data_changes", []),
                                {"step": change.step, "from": change.before, "to": change.after}]
    write_config(out, config)
    return (f"note: {out} goes on from step {change.step} on changed data (data fingerprint "
            f"{_short(change.before)}, now {_short(change.after)}; --allow-data-change), "
            f"recorded in its {CONFIG}")
