"""The configuration reference as Markdown, generated from the schema itself so the docs cannot drift from it."""

from __future__ import annotations

import dataclasses
import typing
from typing import Any

from tandem.daemons.config.render import toml_value
from tandem.daemons.config.schema import PolicySection, RunConfig


def config_reference() -> str:
    """A section per table ([run], [env], [env.atari], ...): each key's type, default, bounds and meaning."""
    parts = []
    for section in dataclasses.fields(RunConfig):
        hint = typing.get_type_hints(RunConfig)[section.name]
        table = PolicySection if section.name == "policies" else hint
        header = "policies.NAME" if section.name == "policies" else section.name
        parts += _table(header, table)
    return "\n".join(parts) + "\n"


def _table(header: str, cls: type) -> list[str]:
    lines = [
        f"## `[{header}]`",
        "",
        _first_line(cls.__doc__, header),
        "",
        "| key | type | default | allowed | meaning |",
        "|---|---|---|---|---|",
    ]
    nested = []
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        if dataclasses.is_dataclass(hints[f.name]):
            nested.append((f"{header}.{f.name}", hints[f.name]))
            continue
        lines.append(
            f"| `{f.name}` | {_type_name(hints[f.name])} | {_default(f)} | {_allowed(f.metadata)} | "
            f"{_cell(f.metadata.get('doc', ''))} |"
        )
    lines.append("")
    for sub_header, sub_cls in nested:
        lines += _table(sub_header, sub_cls)
    return lines


def _first_line(doc: str | None, header: str) -> str:
    text = " ".join((doc or "").split())
    prefix = f"[{header}]:"
    text = text[len(prefix) :].strip() if text.startswith(prefix) else text
    return text[:1].upper() + text[1:]


def _type_name(hint: Any) -> str:
    text = getattr(hint, "__name__", None) if typing.get_origin(hint) is None else None
    return f"`{text or str(hint).replace('typing.', '')}`".replace("|", "\\|")


def _default(f: dataclasses.Field) -> str:
    if f.default is not dataclasses.MISSING:
        value = f.default
    elif f.default_factory is not dataclasses.MISSING:  # type: ignore[misc]
        value = f.default_factory()  # type: ignore[misc]
    else:
        return ""
    return "unset" if value is None else f"`{_cell(toml_value(value))}`"


def _allowed(meta: typing.Mapping[str, Any]) -> str:
    if meta.get("choices"):
        return ", ".join(f"`{toml_value(c)}`" for c in meta["choices"])
    bounds = []
    if meta.get("above") is not None:
        bounds.append(f"> {meta['above']:g}")
    if meta.get("min") is not None:
        bounds.append(f">= {meta['min']:g}")
    if meta.get("max") is not None:
        bounds.append(f"<= {meta['max']:g}")
    return ", ".join(bounds)


def _cell(text: str) -> str:
    """Markdown table cells: no pipes or newlines of their own."""
    return " ".join(str(text).split()).replace("|", "\\|")
