"""The configuration reference as Markdown, generated from the schema itself so the docs cannot drift from it.

`python -m tandem.daemons.config.reference` rewrites docs/reference/configuration.md (tests/test_docs.py fails
while the committed page differs from what the schema gives).
"""

from __future__ import annotations

import dataclasses
import re
import typing
from typing import Any

from tandem.daemons.algorithms.registry import built_in
from tandem.daemons.settings.render import toml_value
from tandem.daemons.settings.schema import AlgorithmSection, PolicySection, RunConfig

PAGE_INTRO = """# Configuration reference

One TOML file describes a run; every key below has a default that runs on one machine over loopback, so a
config names only what differs (see [Training on one machine](../guides/one-machine.md#the-config-file)).
`tandem config show CONFIG` prints the same keys resolved for a given file, and `--set section.key=value`
overrides any of them on the command line.

This page is written from the config schema (`python -m tandem.daemons.config.reference`), and a test fails
while it differs from the code. `[algorithm]` holds the keys every algorithm shares; each built-in
algorithm's own keys follow it, in a table per algorithm. Keys of other sections marked `(replay)` apply to
the algorithms that learn from replay (Double DQN, SAC), `(dqn)` to Double DQN and `(on-policy)` to APPO and
IMPALA only.

"""


def config_reference_page() -> str:
    """The whole page docs/reference/configuration.md: an introduction, then `config_reference()`."""
    return PAGE_INTRO + config_reference()


def config_reference() -> str:
    """A section per table ([run], [env], [env.atari], ...): each key's type, default, bounds and meaning; after
    [algorithm]'s shared keys, each built-in algorithm's own."""
    parts = []
    for section in dataclasses.fields(RunConfig):
        hint = typing.get_type_hints(RunConfig)[section.name]
        table = PolicySection if section.name == "policies" else hint
        header = "policies.NAME" if section.name == "policies" else section.name
        if section.name == "algorithm":
            parts += _table(header, AlgorithmSection, defaults=RunConfig().algorithm) + _algorithm_tables()
        else:
            parts += _table(header, table)
    return "\n".join(parts) + "\n"


def _algorithm_tables() -> list[str]:
    """Each built-in algorithm's keys besides the shared ones, and the shared ones whose defaults it changes."""
    lines = []
    shared = {f.name: _default(f) for f in dataclasses.fields(AlgorithmSection)}
    for n, (name, spec) in enumerate(built_in().items()):
        own = [
            f.name
            for f in dataclasses.fields(spec.section)
            if f.name != "name" and shared.get(f.name) != _default(f)  # its own keys, or its own default
        ]
        intro = (
            f"{spec.summary}{' The default.' if n == 0 else ''} Keys besides the shared ones, and defaults of its own:"
        )
        lines += _table(
            "algorithm", spec.section, title=f'### `[algorithm]` with `name = "{name}"`', intro=intro, only=own
        )
        if spec.defaults:
            changed = [
                f"`{part}.{key} = {toml_value(v)}`"
                for part, values in spec.defaults.items()
                for key, v in values.items()
            ]
            lines += [f"It changes other sections' defaults too: {', '.join(changed)}.", ""]
    return lines


def _table(
    header: str,
    cls: type,
    defaults: object = None,
    title: str | None = None,
    intro: str | None = None,
    only: list[str] | None = None,
) -> list[str]:
    """`defaults`: an instance whose values are shown as the defaults; `only`: the keys to list."""
    lines = [
        title or f"## `[{header}]`",
        "",
        intro if intro is not None else _first_line(cls.__doc__, header),
        "",
        "| key | type | default | allowed | meaning |",
        "|---|---|---|---|---|",
    ]
    nested = []
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        if only is not None and f.name not in only:
            continue
        if dataclasses.is_dataclass(hints[f.name]):
            nested.append((f"{header}.{f.name}", hints[f.name]))
            continue
        item = typing.get_args(hints[f.name])[-1] if typing.get_origin(hints[f.name]) is dict else None
        if dataclasses.is_dataclass(item):  # a table of tables, such as [selfplay.league.NAME]: its own section
            nested.append((f"{header}.{f.name}.NAME", item))
        default = _default(f) if defaults is None else _shown(getattr(defaults, f.name))
        lines.append(
            f"| `{f.name}` | {_type_name(hints[f.name])} | {default} | {_allowed(f.metadata)} | "
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
    shown = text or re.sub(r"tandem\.daemons\.settings\.\w+\.", "", str(hint).replace("typing.", ""))
    return f"`{shown}`".replace("|", "\\|")


def _default(f: dataclasses.Field) -> str:
    if f.default is not dataclasses.MISSING:
        value = f.default
    elif f.default_factory is not dataclasses.MISSING:  # type: ignore[misc]
        value = f.default_factory()  # type: ignore[misc]
    else:
        return ""
    return _shown(value)


def _shown(value: Any) -> str:
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


if __name__ == "__main__":
    import pathlib
    import sys

    target = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else "docs/reference/configuration.md")
    target.write_text(config_reference_page(), encoding="utf-8")
    print(f"wrote {target}")
