"""The one rule by which a pipeline (``reproduce``, ``study``, ``attention-study``) reuses a
run folder it trained before: only for the settings the run was trained with.

Every setting that shapes a run is in its ``config.json``
(:mod:`arelu_cli.train.run_record`). A run whose recorded settings are the ones the plan now
asks for is reused (or resumed, if unfinished); one that differs only in a larger
``[train] max_steps`` is continued from its ``last.pt``; any other difference is refused
in one line that names the setting and says what to do, before the run is used: a report
never states settings its numbers did not come from.
"""

from __future__ import annotations

from pathlib import Path

from arelu_cli.config import Config
from arelu_cli.util.errors import UserError
from arelu_cli.model import checkpoint
from arelu_cli.train.run_dir import CONFIG, read_config, started
from arelu_cli.train.run_record import NOT_SHAPING, changed_while_resumed, differences, show

NEW, SAME, LONGER = "new", "same", "longer"
"""What :func:`reuse` says of a run folder: nothing trained there yet; trained (or being
trained) with the planned settings; trained with them for fewer steps than planned, to be
continued from its ``last.pt``."""


def reuse(folder: Path, planned: Config) -> str:
    """How the run in ``folder`` may serve the plan's run ``planned`` (the configuration the
    pipeline would train it with): :data:`NEW`, :data:`SAME` or :data:`LONGER`; a
    :class:`UserError` naming the first setting that differs otherwise."""
    record = read_config(folder)
    remedy = f"delete {folder} (or give another --out) to train it again"
    if record is None:
        if not started(folder):
            return NEW
        raise UserError(f"{folder / CONFIG} is missing or unreadable, so the settings the run "
                        f"in {folder} was trained with are unknown; {remedy}")
    try:
        changed = differences(record, planned)
    except UserError as err:
        raise UserError(f"{folder / CONFIG} does not hold a configuration this version reads "
                        f"({err}); {remedy}") from None
    changed = {k: v for k, v in changed.items() if k not in NOT_SHAPING}
    mixed = {k: v for k, v in changed_while_resumed(record).items()
             if k not in NOT_SHAPING and k != "train.max_steps"}
    if mixed:
        key, (first, now) = next(iter(mixed.items()))
        raise UserError(f"{folder} was resumed with {key} changed from {show(first)} to "
                        f"{show(now)} (resolved.setting_changes in its {CONFIG}), so no single "
                        f"setting describes it; {remedy}")
    steps = changed.pop("train.max_steps", None)
    if changed:
        key, (old, new) = next(iter(changed.items()))
        more = f" (and {len(changed) - 1} more: {', '.join(list(changed)[1:])})" \
            if len(changed) > 1 else ""
        raise UserError(f"{folder} was trained with {key} = {show(old)}, but the plan now asks "
                        f"for {show(new)}{more}; set it back to {show(old)}, or {remedy}")
    if steps is None:
        return SAME
    old, new = steps
    if new < old:
        raise UserError(f"{folder} was trained for train.max_steps = {old}, more than the "
                        f"{new} the plan now asks for; set it back to {old}, or {remedy}")
    if not (folder / checkpoint.LAST).is_file():
        raise UserError(f"{folder} was trained for {old} steps and the plan now asks for {new}, "
                        f"but its {checkpoint.LAST} is gone, so it cannot be continued; set "
                        f"train.max_steps back to {old}, or {remedy}")
    return LONGER
