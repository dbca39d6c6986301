"""Writes a resolved `RunConfig` back as TOML, each key under its one-line doc."""

from __future__ import annotations

import dataclasses
import json
from typing import Any


def toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)  # a JSON string is a valid TOML basic string
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{json.dumps(k)} = {toml_value(v)}" for k, v in value.items()) + "}"
    raise TypeError(f"cannot write {type(value).__name__} as TOML")


def render_toml(config: Any, with_docs: bool = True) -> str:
    """Every section and key; keys left unset (None) appear as comments so the file stays loadable."""
    lines: list[str] = []
    for section in dataclasses.fields(config):
        value = getattr(config, section.name)
        if isinstance(value, dict):  # a table of tables: [policies.NAME]
            for name, table in value.items():
                render_table(lines, f"{section.name}.{name}", table, with_docs)
        else:
            render_table(lines, section.name, value, with_docs)
    return "\n".join(lines) + "\n"


def render_table(lines: list[str], header: str, table: Any, with_docs: bool) -> None:
    if lines:
        lines.append("")
    if with_docs and table.__doc__:
        lines.append(f"# {table.__doc__.strip()}")
    lines.append(f"[{header}]")
    nested = []
    for f in dataclasses.fields(table):
        value = getattr(table, f.name)
        if dataclasses.is_dataclass(value):  # a sub-table such as [env.atari], written after this table's keys
            nested.append((f"{header}.{f.name}", value))
            continue
        if isinstance(value, dict) and value and all(dataclasses.is_dataclass(v) for v in value.values()):
            # a table of sub-tables such as [selfplay.league.NAME]; an empty one is written as `{}` below
            nested += [(f"{header}.{f.name}.{name}", sub) for name, sub in value.items()]
            continue
        if with_docs and f.metadata.get("doc"):
            lines.append(f"# {f.metadata['doc']}")
        if value is None:
            lines.append(f"# {f.name} = (unset)")
        else:
            lines.append(f"{f.name} = {toml_value(value)}")
    for sub_header, sub_table in nested:
        render_table(lines, sub_header, sub_table, with_docs)


def config_to_dict(config: Any) -> dict[str, Any]:
    return dataclasses.asdict(config)
