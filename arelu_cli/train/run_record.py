"""What a run folder says it was trained with: the settings of its ``config.json``, compared
with another configuration, and the settings changed when it was resumed.

``arelu train`` writes the whole configuration into ``config.json`` when a run starts. The
``[data]``, ``[model]`` and ``[train]`` tables shape the run (:data:`SHAPING`), except the
keys in :data:`NOT_SHAPING`, which change how fast or where it runs, or what is logged, but
not the model it trains (the data's identity is its fingerprint, checked on its own:
:func:`arelu_cli.train.data_version.check_same_data`). A run resumed with other settings
(``arelu train --resume RUN --set train.lr=...``) records the settings in force at the top
of ``config.json`` and each change, with the step from which it took effect, in
``resolved.setting_changes`` (as ``resolved.data_changes`` records a change of data).
``[train] precision`` is compared as the precision the run trains in (``resolved.precision``,
or what ``auto`` means on this machine), not as the word in the recipe.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

from arelu_cli.config import Config, from_dict
from arelu_cli.train.precision import resolve as resolve_precision
from arelu_cli.train.run_dir import CONFIG, read_config, write_config
from arelu_cli.util.errors import UserError

SHAPING = ("data", "model", "train")
"""The tables whose settings shape a run."""
NOT_SHAPING = frozenset({"data.path", "train.device", "train.threads", "train.compile",
                         "train.fused_output", "train.log_every", "train.save_every",
                         "train.tensorboard"})
"""Keys of those tables that do not change the model a run trains: where and how fast it
runs (``fused_output`` computes the same loss and gradients), what is logged and how often
``last.pt`` is saved; the data's identity is its fingerprint, not its path."""


def settings(tables: Mapping) -> dict[str, object]:
    """``{"train.lr": 0.5, ...}``: every key of the shaping tables of ``tables`` (a saved
    run's config, read through the schema, a key added since at its default) or of a
    :class:`Config`."""
    if isinstance(tables, Config):
        tables = tables.to_dict()
    config = from_dict({name: tables.get(name, {}) for name in SHAPING})
    full = config.to_dict()
    found = {f"{name}.{key}": value for name in SHAPING for key, value in full[name].items()}
    # the precision it trains in, not the word: "auto" is fp32 or bf16 by the hardware
    resolved = tables.get("resolved") if isinstance(tables.get("resolved"), Mapping) else {}
    found["train.precision"] = resolved.get("precision") or resolve_precision(
        config.train.precision, config.train.device)
    return found


def differences(before: Mapping, after: Mapping) -> dict[str, tuple[object, object]]:
    """``{"train.lr": (0.5, 2.0)}``: the settings whose value differs between two saved
    configs (or :class:`Config` s), in the schema's order."""
    old, new = settings(before), settings(after)
    return {key: (old[key], new[key]) for key in old if old[key] != new[key]}


def show(value: object) -> str:
    """A setting's value as a recipe writes it."""
    return json.dumps(list(value) if isinstance(value, tuple) else value)


def record_setting_changes(folder: Path, config: Config, step: int,
                           changes: dict[str, tuple[object, object]]) -> str:
    """Write ``config`` (the settings now in force) into the run's ``config.json``, keep its
    ``resolved`` record and add ``changes`` (taking effect from ``step``) to
    ``resolved.setting_changes``; return the line that says so."""
    record = read_config(folder)
    if record is None:
        raise UserError(f"{Path(folder) / CONFIG} is missing or unreadable, so the settings "
                        "the run was trained with are unknown; start a new run with another "
                        "--out")
    resolved = dict(record.get("resolved") or {})
    if "train.precision" in changes:  # compared resolved: fp32 or bf16
        resolved["precision"] = changes["train.precision"][1]
    resolved["setting_changes"] = [
        *resolved.get("setting_changes", []),
        *({"step": step, "setting": key, "from": old, "to": new}
          for key, (old, new) in changes.items())]
    write_config(folder, {**config.to_dict(), "resolved": resolved})
    listed = ", ".join(f"{key} {show(old)} -> {show(new)}" for key, (old, new) in changes.items())
    return (f"note: {folder} goes on from step {step} with changed settings ({listed}), "
            f"recorded in its {CONFIG}")


def changed_while_resumed(record: Mapping) -> dict[str, tuple[object, object]]:
    """The settings a run's record says were changed when it was resumed:
    ``{key: (first value, value in force)}``."""
    resolved = record.get("resolved") if isinstance(record.get("resolved"), Mapping) else {}
    found: dict[str, tuple[object, object]] = {}
    for change in resolved.get("setting_changes") or []:
        if isinstance(change, Mapping) and isinstance(change.get("setting"), str):
            first = found.get(change["setting"], (change.get("from"), None))[0]
            found[change["setting"]] = (first, change.get("to"))
    return found
