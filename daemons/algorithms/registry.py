"""Finds an algorithm by what `algorithm.name` says: a built-in one by its name, any other by its import path."""

from __future__ import annotations

import functools

from tandem.daemons.algorithms.spec import AlgorithmSpec
from tandem.daemons.settings.plugins import import_object
from tandem.daemons.settings.setup_errors import SetupError

# The built-in algorithms, found the way a plug-in is (so that no name is written twice); the first is the
# default. Each module defines its spec without importing torch, so reading a config stays light.
BUILT_IN = (
    "tandem.daemons.algorithms.dqn.spec:DOUBLE_DQN",
    "tandem.daemons.algorithms.appo.spec:APPO",
    "tandem.daemons.algorithms.appo.spec:IMPALA",
    "tandem.daemons.algorithms.sac.spec:SAC",
)
KEY = "algorithm.name"
PLUGIN_FORM = "package.module:NAME"


@functools.cache
def built_in() -> dict[str, AlgorithmSpec]:
    """name -> spec of every built-in algorithm, the default first."""
    specs = [import_object(path, KEY) for path in BUILT_IN]
    return {spec.name: spec for spec in specs}


def default_algorithm() -> AlgorithmSpec:
    """What a config that names no algorithm runs."""
    return next(iter(built_in().values()))


def is_plugin(name: str) -> bool:
    return ":" in name


def find_algorithm(name: str) -> AlgorithmSpec:
    """The algorithm `name` names: a built-in name, or 'package.module:NAME' (imported: a plug-in's module
    is looked for where the daemons look for envs and networks). SetupError (a ValueError) saying why not."""
    if not is_plugin(name):
        specs = built_in()
        if name not in specs:
            raise SetupError(f"{KEY} {name!r} is not one of: {', '.join(specs)} (or {PLUGIN_FORM!r} for your own)")
        return specs[name]
    found = import_object(name, KEY, PLUGIN_FORM)
    if not isinstance(found, AlgorithmSpec):
        raise SetupError(
            f"{KEY} {name!r} is a {type(found).__name__}, not an AlgorithmSpec "
            "(tandem.daemons.algorithms.spec; the docs' guide: Your own algorithm)"
        )
    return found


def owners_of(key: str) -> list[str]:
    """The built-in algorithms whose [algorithm] section has `key` (for an error about a key of another one)."""
    return [name for name, spec in built_in().items() if key in spec.section.__dataclass_fields__]
