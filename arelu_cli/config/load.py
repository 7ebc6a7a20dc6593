"""From recipe files to a checked :class:`~arelu_cli.config.schema.Config`: a recipe by name
or path (:func:`resolve_recipe`, the shipped ones in :data:`RECIPES`), its TOML
(:func:`read_recipe`), ``--set SECTION.KEY=VALUE`` overrides (:func:`parse_override`), each
value coerced to its field's type, unknown tables and keys refused (:func:`from_dict`), then
:func:`arelu_cli.config.checks.check_config`. Standard library only.
"""

from __future__ import annotations

import tomllib
import typing
from pathlib import Path
from typing import Literal, Mapping

from arelu_cli.config.checks import check_config
from arelu_cli.config.schema import SECTIONS, Config
from arelu_cli.util.errors import UserError


def _coerce(section: str, key: str, hint: object, value: object) -> object:
    """``value`` as the field's type, or a UserError naming the key and what it expects."""
    where = f"[{section}] {key}"
    if typing.get_origin(hint) is Literal:
        if value not in typing.get_args(hint):
            raise UserError(f"{where} must be one of {', '.join(map(repr, typing.get_args(hint)))}, "
                            f"got {value!r}")
        return value
    if hint is bool:
        if not isinstance(value, bool):
            raise UserError(f"{where} must be true or false, got {value!r}")
        return value
    if hint is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise UserError(f"{where} must be an integer, got {value!r}")
        return value
    if hint is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise UserError(f"{where} must be a number, got {value!r}")
        return float(value)
    if hint is str:
        if not isinstance(value, str):
            raise UserError(f"{where} must be a string, got {value!r}")
        return value
    if typing.get_origin(hint) is tuple:
        if not isinstance(value, (list, tuple)):
            raise UserError(f"{where} must be a list, got {value!r}")
        item = typing.get_args(hint)[0]
        return tuple(_coerce(section, key, item, v) for v in value)
    if hint == str | int:  # [train] threads
        if isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool)):
            return value
        raise UserError(f"{where} must be an integer or a string, got {value!r}")
    # str | float: alpha-ReLU's tau.
    if isinstance(value, str):
        return value
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    raise UserError(f"{where} must be a number or a string, got {value!r}")


def _section(name: str, table: Mapping[str, object]) -> object:
    return read_table(name, SECTIONS[name], table)


def read_table(name: str, cls: type, table: Mapping[str, object]) -> object:
    """The frozen dataclass ``cls`` of the recipe table ``[name]``, each value coerced to its
    field's type; unknown keys are a UserError (a study's own tables read through it too)."""
    if not isinstance(table, Mapping):
        raise UserError(f"[{name}] must be a table of keys, got {table!r}")
    hints = typing.get_type_hints(cls)
    unknown = sorted(set(table) - set(hints))
    if unknown:
        raise UserError(f"unknown key(s) {', '.join(unknown)} in [{name}]; known keys: "
                        f"{', '.join(hints)}")
    return cls(**{key: _coerce(name, key, hints[key], value) for key, value in table.items()})


def from_dict(tables: Mapping[str, Mapping[str, object]]) -> Config:
    """A validated :class:`Config` from nested tables (a parsed recipe or a checkpoint's)."""
    unknown = sorted(set(tables) - set(SECTIONS))
    if unknown:
        raise UserError(f"unknown table(s) {', '.join(f'[{u}]' for u in unknown)}; a recipe has "
                        f"{', '.join(f'[{s}]' for s in SECTIONS)}")
    for name, table in tables.items():
        if not isinstance(table, Mapping):
            raise UserError(f"[{name}] must be a table of keys, got {table!r}")
    return check_config(Config(**{name: _section(name, tables.get(name, {})) for name in SECTIONS}))


def parse_override(item: str) -> tuple[str, str, object]:
    """``"train.lr=1.5"`` -> ``("train", "lr", 1.5)``; the value is read as TOML (bare
    words are strings)."""
    key, sep, text = item.partition("=")
    section, dot, name = key.strip().partition(".")
    if not (sep and dot and section and name):
        raise UserError(f"--set takes SECTION.KEY=VALUE (e.g. train.lr=1.5), got {item!r}")
    try:
        value = tomllib.loads(f"v = {text.strip()}")["v"]
    except tomllib.TOMLDecodeError:
        value = text.strip()
    return section, name, value


RECIPES = Path(__file__).resolve().parents[1] / "recipes"
"""The recipes that ship with the package (the repository's ``recipes/`` links here)."""


def resolve_recipe(name: str | Path) -> Path:
    """A recipe file: ``name`` itself when it is a file, else ``./recipes/NAME.toml``, else
    the recipe of that name that ships with the package (``toy``, ``toy.toml`` and
    ``recipes/toy.toml`` all mean ``arelu_cli/recipes/toy.toml`` then), so the documented
    commands work from any folder."""
    path = Path(name)
    if path.is_file():
        return path
    if path.parent in (Path("."), Path("recipes")):
        for folder in (Path("recipes"), RECIPES):
            candidate = folder / f"{path.name.removesuffix('.toml')}.toml"
            if candidate.is_file():
                return candidate
    known = sorted(p.stem for p in RECIPES.glob("*.toml"))
    raise UserError(f"no recipe {str(name)!r}: give a TOML file or one of "
                    f"{', '.join(known) or '(none)'} (the recipes that ship with arelu)")


def read_recipe(recipe: str | Path) -> dict[str, object]:
    """The tables of the TOML file ``recipe``; anything but a readable TOML file (missing,
    a folder, unreadable, not UTF-8, not TOML) is a one-line :class:`UserError`."""
    path = Path(recipe)
    hint = "give a TOML file (recipes live in recipes/*.toml)"
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UserError(f"recipe {path} does not exist; {hint}") from None
    except IsADirectoryError:
        raise UserError(f"recipe {path} is a folder, not a file; {hint}") from None
    except OSError as err:
        raise UserError(f"cannot read recipe {path} ({err.strerror or err}); {hint}") from None
    except UnicodeDecodeError:
        raise UserError(f"recipe {path} is not UTF-8 text; {hint}") from None
    except tomllib.TOMLDecodeError as err:
        raise UserError(f"recipe {path} is not valid TOML: {err}") from None


def recipe_tables(recipe: str | Path | None = None,
                  overrides: Mapping[tuple[str, str], object] | None = None,
                  base: Mapping[str, Mapping[str, object]] | None = None) -> dict[str, object]:
    """The tables of a TOML recipe (or of ``base``, e.g. a checkpoint's config, or none)
    with ``{(section, key): value}`` overrides applied, e.g. from command-line flags;
    ``None`` values are ignored. What a configuration is made from: the shared one
    (:func:`load_config`) or a study's own (``arelu study``)."""
    tables = read_recipe(recipe) if recipe is not None else base or {}
    tables = {name: dict(table) if isinstance(table, Mapping) else table
              for name, table in tables.items()}
    for (section, key), value in (overrides or {}).items():
        if value is not None:
            tables.setdefault(section, {})[key] = value
    return tables


def load_config(recipe: str | Path | None = None,
                overrides: Mapping[tuple[str, str], object] | None = None,
                base: Mapping[str, Mapping[str, object]] | None = None) -> Config:
    """A TOML recipe (or ``base`` tables, or the defaults) with overrides
    (:func:`recipe_tables`) as the checked :class:`Config`; an override of a table it has not
    got is refused."""
    for (section, _), value in (overrides or {}).items():
        if value is not None and section not in SECTIONS:
            raise UserError(f"unknown table [{section}] in an override; known: "
                            f"{', '.join(SECTIONS)}")
    return from_dict(recipe_tables(recipe, overrides, base))
