"""Comma-separated option values (``--alpha 1.5,2``, ``--seeds 1,2,3``) -> typed lists.

One parser for every list a command or a recipe override takes, so that each bad list gets
the same one-line error naming its option.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from arelu_cli.util.errors import UserError

T = TypeVar("T")

KINDS = {int: "integers", float: "numbers", str: "names"}


def parse_list(text: str, cast: Callable[[str], T], option: str, *, example: str = "",
               empty_ok: bool = False) -> list[T]:
    """``"10000, 40000"`` -> ``[10000, 40000]``: items stripped, empty ones dropped; a list
    with no item (unless ``empty_ok``) or an item ``cast`` refuses is a UserError naming
    ``option`` (and ``example``, a valid value)."""
    items = [item.strip() for item in str(text).split(",") if item.strip()]
    hint = f", e.g. {example}" if example else ""
    if not items and not empty_ok:
        raise UserError(f"{option} needs at least one value (a comma-separated list{hint})")
    try:
        return [cast(item) for item in items]
    except ValueError:
        kind = KINDS.get(cast, f"{getattr(cast, '__name__', 'valid')} values")
        raise UserError(f"{option} takes comma-separated {kind}{hint}; got {text!r}") from None


def parse_per_name(text: str, names: list[str], option: str, *,
                   example: str = "softmax=0.1,1.5-relu=0") -> dict[str, float]:
    """``"0.1"`` -> every name at 0.1; ``"softmax=0.1, 1.5-relu=0"`` -> those names at those
    numbers (the others absent). A name not in ``names`` or a value that is not a number is a
    UserError naming ``option``."""
    items = parse_list(text, str, option, example=example)
    if len(items) == 1 and "=" not in items[0]:
        (value,) = parse_list(items[0], float, option, example=example)
        return {name: value for name in names}
    found = {}
    for item in items:
        name, sep, value = (part.strip() for part in item.partition("="))
        if not sep or name not in names:
            raise UserError(f"{option} takes one number or NAME=NUMBER pairs of "
                            f"{', '.join(names)} (e.g. {example}); got {item!r}")
        (found[name],) = parse_list(value, float, option, example=example)
    return found
