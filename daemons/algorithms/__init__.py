"""Learning rules: `make_algorithm` for a learner and `make_policy` for an actor, both from the run config.

Each algorithm is one module that provides the same few names (see `base.py`); `ALGORITHMS` maps the
config's `algorithm.name` to it. Importing this package costs no torch: a module is imported when used.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any

from tandem.daemons.config.schema import RunConfig
from tandem.daemons.runtime.setup_errors import SetupError

# algorithm.name -> the module that implements it (one module may serve several related names)
ALGORITHMS = {
    "double_dqn": "tandem.daemons.algorithms.dqn",
    "appo": "tandem.daemons.algorithms.appo",
    "impala": "tandem.daemons.algorithms.appo",
}


def algorithm_module(name: str) -> ModuleType:
    """The module of algorithm `name`; ValueError listing the known names for any other."""
    if name not in ALGORITHMS:
        raise ValueError(f"algorithm.name {name!r} is not one of: {', '.join(ALGORITHMS)}")
    return importlib.import_module(ALGORITHMS[name])


def check_supported(config: RunConfig, action_space: Any) -> ModuleType:
    """The configured algorithm's module; ValueError unless it can act in `action_space`."""
    name = config.algorithm.name
    module = algorithm_module(name)
    try:
        module.check_action_space(name, action_space)
    except ValueError as exc:
        raise SetupError(f"algorithm.name {name!r} cannot be used with this env: {exc}") from exc
    return module


def feed_kind(config: RunConfig) -> str:
    """'replay' (off-policy: n-step transitions sampled from replay) or 'unrolls' (on-policy: a queue of unrolls)."""
    return algorithm_module(config.algorithm.name).FEED


def make_algorithm(config: RunConfig, obs_space: Any, action_space: Any, device: str, mask_size: int = 0) -> Any:
    """The learner-side algorithm of `config`, on `device`, with initial weights seeded by run.seed.

    `mask_size` > 0: observations end with that many action-mask entries (illegal actions are never chosen)."""
    module = check_supported(config, action_space)
    return module.make_learner(config.algorithm.name, config, obs_space, action_space, device, mask_size)


def make_policy(config: RunConfig, obs_space: Any, action_space: Any, seed: int | None, mask_size: int = 0) -> Any:
    """The actor-side policy of `config` on `actors.device`; `seed` drives its exploration and its initial weights."""
    module = check_supported(config, action_space)
    try:
        return module.make_policy(config.algorithm.name, config, obs_space, action_space, seed, mask_size)
    except ValueError as exc:
        if str(exc).startswith(f"device {config.actors.device!r}"):
            raise SetupError(f"actors.device: {exc}") from exc
        raise
