"""The [algorithm] table: its `name` finds the algorithm, whose own section class reads and checks the rest."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from tandem.daemons.algorithms.registry import built_in, default_algorithm, find_algorithm, is_plugin, owners_of
from tandem.daemons.algorithms.spec import AlgorithmSpec
from tandem.daemons.settings.fields import ConfigError, build, coerce
from tandem.daemons.settings.plugins import add_to_path
from tandem.daemons.settings.schema import AlgorithmSection
from tandem.daemons.settings.setup_errors import SetupError

log = logging.getLogger(__name__)


def algorithm_spec(name: Any, key: str) -> AlgorithmSpec:
    """The algorithm `name` finds; ConfigError at `key` (an algorithm.name) saying why there is none."""
    name = coerce(str, name, key)
    try:
        return find_algorithm(name)
    except SetupError as exc:  # one line: an unknown name, or a plug-in that does not import
        raise ConfigError(key, str(exc).removeprefix("algorithm.name ")) from exc


def spec_of(table: Any, key: str) -> AlgorithmSpec:
    """The algorithm an [algorithm] table (at `key`) names; the default one when it names none."""
    if not isinstance(table, dict) or "name" not in table:
        return default_algorithm()  # not a table: build() says so when it reads it
    return algorithm_spec(table["name"], f"{key}.name")


def look_beside(data: dict[str, Any], folders: Sequence[str]) -> None:
    """Put `folders` (the config file's) on the import path when the config names a plug-in algorithm, as
    the daemons do for every plug-in."""
    tables = [data.get("algorithm")]
    policies = data.get("policies")
    if isinstance(policies, dict):
        tables += [p.get("algorithm") for p in policies.values() if isinstance(p, dict)]
    if any(isinstance(t, dict) and isinstance(t.get("name"), str) and is_plugin(t["name"]) for t in tables):
        add_to_path(list(folders))


def fill_algorithm_defaults(data: dict[str, Any], spec: AlgorithmSpec) -> dict[str, Any]:
    """`data` (a parsed TOML) with the other sections' keys it leaves unset that `spec` has defaults for."""
    for part, values in spec.defaults.items():
        section = data.setdefault(part, {})
        if isinstance(section, dict):
            for key, value in values.items():
                section.setdefault(key, value)
    return data


def build_algorithm(
    spec: AlgorithmSpec, table: Any, key: str, problems: list[ConfigError] | None = None
) -> AlgorithmSection:
    """Table `key` as `spec`'s section (`problems` as for `build`). A key of another algorithm is dropped with a
    warning, not refused: configs written before each algorithm had a section of its own hold every algorithm's
    keys."""
    if isinstance(table, dict):
        foreign = {name: owners_of(name) for name in table if name not in spec.section.__dataclass_fields__}
        foreign = {name: owners for name, owners in foreign.items() if owners}
        if foreign:
            log.warning(
                "%s: ignoring keys of other algorithms than %r: %s",
                key,
                table.get("name", spec.name),
                ", ".join(f"{name} ({' and '.join(owners)})" for name, owners in foreign.items()),
            )
            table = {name: value for name, value in table.items() if name not in foreign}
        table = {**spec.section.implied(table), **table}
    return build(spec.section, table, key, problems)


def switched_defaults(spec: AlgorithmSpec, was: AlgorithmSpec, part: str, cls: type) -> dict[str, Any]:
    """Section `part`'s (of class `cls`) values that depend on the algorithm, as `spec` has them: a policy
    whose algorithm is not the run's (`was`) starts from its own algorithm's defaults, not the run's values."""
    keys = {key for s in (*built_in().values(), spec, was) for key in s.defaults.get(part, {})}
    fields = cls.__dataclass_fields__
    values = {key: fields[key].default for key in keys if key in fields}
    values.update(spec.defaults.get(part, {}))
    return values
