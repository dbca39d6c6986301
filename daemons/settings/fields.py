"""Builds a config dataclass from a TOML table: every key known, every value of its type and within its bounds."""

from __future__ import annotations

import dataclasses
import difflib
import math
import types
import typing
from typing import Any


class ConfigError(ValueError):
    """A config problem; `key` is the dotted path of what was wrong (e.g. 'actors.count')."""

    def __init__(self, key: str, message: str):
        self.key = key
        super().__init__(f"{key}: {message}" if key else message)

    @property
    def problems(self) -> list[ConfigError]:
        """Each problem on its own (ConfigErrors holds several)."""
        return [self]


class ConfigErrors(ConfigError):
    """Several config problems found in one reading, in the order of the file; `key` is the first one's."""

    def __init__(self, problems: list[ConfigError]):
        self._problems = [one for problem in problems for one in problem.problems]
        self.key = self._problems[0].key
        ValueError.__init__(self, "; ".join(str(problem) for problem in self._problems))  # one line in a daemon's log

    @property
    def problems(self) -> list[ConfigError]:
        return list(self._problems)


def raise_all(problems: list[ConfigError]) -> None:
    """Raise what `problems` holds: nothing, the one problem itself, or all of them as one ConfigErrors."""
    if len(problems) == 1:
        raise problems[0]
    if problems:
        raise ConfigErrors(problems)


def valid_keys_message(cls: type, key: str, name: str) -> str:
    names = [f.name for f in dataclasses.fields(cls)]
    close = difflib.get_close_matches(name, names, n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    where = f"[{key}]" if key else "the top level"
    return f"unknown key {name!r}{hint} Valid keys in {where}: {', '.join(names)}"


def build(cls: type, data: Any, key: str, problems: list[ConfigError] | None = None) -> Any:
    """Instantiate dataclass `cls` from a TOML table, checking keys, types and bounds.

    Every problem of the table is found, not only the first: raised together, or, with `problems` given,
    appended there while each bad field keeps its default (so that the rest can still be checked)."""
    found: list[ConfigError] = []
    if not isinstance(data, dict):
        found.append(ConfigError(key, f"must be a table, got {type_name(data)}"))
        data = {}
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    values = {}
    for name, value in data.items():  # in the file's order, so the problems are too
        path = f"{key}.{name}" if key else name
        if name not in fields:
            moved = getattr(cls, "moved", {}).get(name)  # a key that moved into a table of its own (ClassVar)
            found.append(ConfigError(path, moved_message(key, moved) if moved else valid_keys_message(cls, key, name)))
            continue
        hint = hints[name]
        try:
            if dataclasses.is_dataclass(hint) and isinstance(value, hint):
                values[name] = value  # a section built already: the algorithm's, whose class depends on its name
            elif dataclasses.is_dataclass(hint):
                values[name] = build(hint, value, path, found)
            else:
                checked = coerce(hint, value, path)
                check_bounds(fields[name].metadata, checked, path)
                values[name] = checked
        except ConfigError as exc:
            found.extend(exc.problems)
    if problems is None:
        raise_all(found)
    else:
        problems.extend(found)
    return cls(**values)


def moved_message(key: str, moved: str) -> str:
    """Where a key that moved into a table of its own is written now."""
    table, _, name = moved.rpartition(".")
    return f"moved: write it as {key}.{moved} (key {name!r} in [{key}.{table}])"


def type_name(value: Any) -> str:
    return {
        bool: "a boolean",
        int: "an integer",
        float: "a number",
        str: "a string",
        list: "a list",
        dict: "a table",
    }.get(type(value), type(value).__name__)


def coerce(hint: Any, value: Any, key: str) -> Any:
    """Check `value` against a type hint (int, float, bool, str, list[...], dict[str, Any], X | None)."""
    origin = typing.get_origin(hint)
    if origin in (types.UnionType, typing.Union):
        options = [h for h in typing.get_args(hint) if h is not type(None)]
        return coerce(options[0], value, key)
    if hint is Any:
        return value
    if hint is float:
        if type(value) in (int, float):
            if not math.isfinite(value):  # TOML has nan and inf: nan passes every bound check silently
                raise ConfigError(key, f"must be a finite number, got {value!r}")
            return float(value)
        raise ConfigError(key, f"must be a number, got {type_name(value)} {value!r}")
    if hint in (int, bool, str):
        if type(value) is hint:
            return value
        raise ConfigError(key, f"must be {type_name(hint())}, got {type_name(value)} {value!r}")
    if origin is list:
        if not isinstance(value, list):
            raise ConfigError(key, f"must be a list, got {type_name(value)} {value!r}")
        (item,) = typing.get_args(hint)
        return [coerce(item, v, f"{key}[{i}]") for i, v in enumerate(value)]
    if origin is dict:
        if not isinstance(value, dict):
            raise ConfigError(key, f"must be a table, got {type_name(value)} {value!r}")
        _, item = typing.get_args(hint)
        if dataclasses.is_dataclass(item):  # a table of tables, e.g. [policies.NAME]
            return {k: build(item, v, f"{key}.{k}") for k, v in value.items()}
        return {k: coerce(item, v, f"{key}.{k}") for k, v in value.items()}
    raise ConfigError(key, f"unsupported type {hint!r}")  # a schema bug, not a user error


def check_bounds(meta: typing.Mapping[str, Any], value: Any, key: str) -> None:
    if value is None:
        return
    if meta.get("choices") and value not in meta["choices"]:
        raise ConfigError(key, f"{value!r} is not one of: {', '.join(map(str, meta['choices']))}")
    items = value if isinstance(value, list) else [value]
    for item in items:
        if not isinstance(item, (int, float)) or isinstance(item, bool):
            continue
        if meta.get("min") is not None and item < meta["min"]:
            raise ConfigError(key, f"must be >= {meta['min']}, got {item}")
        if meta.get("max") is not None and item > meta["max"]:
            raise ConfigError(key, f"must be <= {meta['max']}, got {item}")
        if meta.get("above") is not None and item <= meta["above"]:
            raise ConfigError(key, f"must be > {meta['above']}, got {item}")
