"""Reads a run's TOML (plus `--set` overrides) into `RunConfig`, naming every bad key, type or value."""

from __future__ import annotations

import dataclasses
import difflib
import tomllib
import types
import typing
from pathlib import Path
from typing import Any

from daemons.config.schema import RunConfig


class ConfigError(ValueError):
    """A config problem; `key` is the dotted path of what was wrong (e.g. 'actors.count')."""

    def __init__(self, key: str, message: str):
        self.key = key
        super().__init__(f"{key}: {message}" if key else message)


def load_config(path: str | Path, overrides: typing.Sequence[str] = ()) -> RunConfig:
    """Parse the TOML file at `path`, apply `section.key=value` overrides, validate everything."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError("", f"cannot read {path}: {exc.strerror or exc}") from exc
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError("", f"{path} is not valid TOML: {exc}") from exc
    return config_from_dict(apply_overrides(data, overrides))


def config_from_dict(data: dict[str, Any]) -> RunConfig:
    config = build(RunConfig, data, "")
    check_relations(config)
    return config


def parse_override(text: str) -> tuple[list[str], Any]:
    """'section.key=value' -> (['section', 'key'], value); the value is read as TOML, else as a plain string."""
    key, sep, raw = text.partition("=")
    parts = key.strip().split(".")
    if not sep or len(parts) < 2 or not all(parts):
        raise ConfigError(key.strip(), f"override {text!r} must look like section.key=value")
    try:
        value = tomllib.loads(f"v = {raw.strip()}")["v"]
    except tomllib.TOMLDecodeError:
        value = raw.strip()  # so that --set env.id=CartPole-v1 needs no quotes
    return parts, value


def apply_overrides(data: dict[str, Any], overrides: typing.Sequence[str]) -> dict[str, Any]:
    for text in overrides:
        parts, value = parse_override(text)
        node = data
        for i, part in enumerate(parts[:-1]):
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                raise ConfigError(".".join(parts[: i + 1]), "is a value, not a section")
            node = child
        node[parts[-1]] = value
    return data


def valid_keys_message(cls: type, key: str, name: str) -> str:
    names = [f.name for f in dataclasses.fields(cls)]
    close = difflib.get_close_matches(name, names, n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    where = f"[{key}]" if key else "the top level"
    return f"unknown key {name!r}{hint} Valid keys in {where}: {', '.join(names)}"


def build(cls: type, data: Any, key: str) -> Any:
    """Instantiate dataclass `cls` from a TOML table, checking keys, types and bounds."""
    if not isinstance(data, dict):
        raise ConfigError(key, f"must be a table, got {type_name(data)}")
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    for name in data:
        if name not in fields:
            path = f"{key}.{name}" if key else name
            raise ConfigError(path, valid_keys_message(cls, key, name))
    values = {}
    for name, value in data.items():
        path = f"{key}.{name}" if key else name
        hint = hints[name]
        if dataclasses.is_dataclass(hint):
            values[name] = build(hint, value, path)
        else:
            values[name] = coerce(hint, value, path)
            check_bounds(fields[name].metadata, values[name], path)
    return cls(**values)


def type_name(value: Any) -> str:
    return {bool: "a boolean", int: "an integer", float: "a number", str: "a string", list: "a list",
            dict: "a table"}.get(type(value), type(value).__name__)


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


def check_relations(config: RunConfig) -> None:
    """Values that are each fine alone but impossible together."""
    from daemons.config.policies import check_policies, policy_config, policy_names, port_table

    check_policies(config)
    for policy in policy_names(config):
        where = f"policies.{policy}." if config.policies else ""
        c = policy_config(config, policy)
        if c.learner.replay_min_size > c.learner.replay_capacity:
            raise ConfigError(f"{where}learner.replay_min_size", f"{c.learner.replay_min_size} is more than "
                              f"learner.replay_capacity ({c.learner.replay_capacity}): training would never start")
        if c.algorithm.batch_size > c.learner.replay_capacity:
            raise ConfigError(f"{where}algorithm.batch_size", "is larger than learner.replay_capacity")
    if config.supervisor.liveness_timeout_s <= config.supervisor.heartbeat_interval_s:
        raise ConfigError("supervisor.liveness_timeout_s", "must be longer than supervisor.heartbeat_interval_s")
    if config.model.kind not in ("auto", "mlp", "nature_cnn") and ":" not in config.model.kind:
        raise ConfigError("model.kind", f"{config.model.kind!r} is not 'auto', 'mlp', 'nature_cnn' or 'module:callable'")
    if not config.env.id.strip():
        raise ConfigError("env.id", "must name a gymnasium id or 'module:callable'")
    if not config.run.name or any(c in config.run.name for c in "/\\ "):
        raise ConfigError("run.name", f"{config.run.name!r} must be non-empty, without '/', '\\' or spaces")
    ports = port_table(config)
    chosen = [p for p in ports.values() if p]
    if len(chosen) != len(set(chosen)):
        raise ConfigError("transport", f"two sockets are given the same port: {ports}")
