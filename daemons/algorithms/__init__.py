"""Learning rules: `make_algorithm` and `make_feed` for a learner, `make_policy` for an actor, from the run config.

Each algorithm is an `AlgorithmSpec` (spec.py) that `algorithm.name` finds (registry.py): a built-in one by
its name, any other by its import path. Importing this package costs no torch: a spec's factories import
what they build.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tandem.daemons.algorithms.registry import built_in, find_algorithm
from tandem.daemons.algorithms.spec import AlgorithmSpec
from tandem.daemons.settings.schema import RunConfig
from tandem.daemons.settings.setup_errors import SetupError

if TYPE_CHECKING:  # numpy: not needed to read a config
    from tandem.daemons.algorithms.base import Algorithm, Feed, Policy


def algorithm_of(config: RunConfig) -> AlgorithmSpec:
    """The configured algorithm; SetupError (a ValueError) when `algorithm.name` finds none."""
    return find_algorithm(config.algorithm.name)


def check_supported(config: RunConfig, action_space: Any, obs_space: Any = None) -> AlgorithmSpec:
    """The configured algorithm; SetupError unless it can act in `action_space` and observe `obs_space`."""
    from tandem.daemons.envs.dict_obs import is_dict_space, key_spaces  # gymnasium: only once there are spaces to check

    spec = algorithm_of(config)
    try:
        spec.check_action_space(action_space)
    except ValueError as exc:
        raise SetupError(
            f"algorithm.name {config.algorithm.name!r} cannot be used with this env: {exc}{takers_of(action_space)}"
        ) from exc
    if is_dict_space(obs_space) and not spec.dict_observations:
        takers = ", ".join(name for name, s in built_in().items() if s.dict_observations)
        raise SetupError(
            f"algorithm.name {config.algorithm.name!r} cannot be used with this env: it observes a Dict or Tuple "
            f"({', '.join(key_spaces(obs_space))}), which only these algorithms take: {takers} (or flatten it with "
            "gymnasium.wrappers.FlattenObservation)"
        )
    return spec


def takers_of(action_space: Any) -> str:
    """'; use algorithm.name = "appo" or "sac" instead': the built-in algorithms that can act in `action_space`."""
    takers = []
    for name, spec in built_in().items():
        try:
            spec.check_action_space(action_space)
        except ValueError:
            continue
        takers.append(f'"{name}"')
    if not takers:
        return ""
    either = takers[0] if len(takers) == 1 else f"{', '.join(takers[:-1])} or {takers[-1]}"
    return f"; use algorithm.name = {either} instead"


def make_algorithm(config: RunConfig, obs_space: Any, action_space: Any, device: str, mask_size: int = 0) -> Algorithm:
    """The learner-side algorithm of `config`, on `device`, with initial weights seeded by run.seed.

    `mask_size` > 0: observations end with that many action-mask entries (illegal actions are never chosen)."""
    spec = check_supported(config, action_space, obs_space)
    return spec.make_learner(config, obs_space, action_space, device, mask_size)


def make_feed(config: RunConfig, obs_space: Any, action_space: Any) -> Feed:
    """The learner's data path for the configured algorithm (replay, or a queue of fresh unrolls)."""
    return algorithm_of(config).make_feed(config, obs_space, action_space)


def make_policy(config: RunConfig, obs_space: Any, action_space: Any, seed: int | None, mask_size: int = 0) -> Policy:
    """The actor-side policy of `config` on `actors.device`; `seed` drives its exploration and its initial weights."""
    spec = check_supported(config, action_space, obs_space)
    try:
        return spec.make_policy(config, obs_space, action_space, seed, mask_size)
    except ValueError as exc:
        if str(exc).startswith(f"device {config.actors.device!r}"):
            raise SetupError(f"actors.device: {exc}") from exc
        raise
