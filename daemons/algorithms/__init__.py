"""Learning rules: `make_algorithm` for a learner and `make_policy` for an actor, both from the run config.

Importing this package costs no torch: the algorithm modules are imported when one is made.
"""

from __future__ import annotations

from typing import Any

from daemons.config.schema import RunConfig


def check_supported(config: RunConfig, action_space: Any) -> None:
    """ValueError unless the configured algorithm exists and can act in `action_space`."""
    from daemons.algorithms.dqn import ALGORITHM_NAME, discrete_actions

    if config.algorithm.name != ALGORITHM_NAME:
        raise ValueError(f"algorithm.name {config.algorithm.name!r} is not supported (supported: {ALGORITHM_NAME!r})")
    try:
        discrete_actions(action_space)
    except ValueError as exc:
        raise ValueError(f"algorithm.name {ALGORITHM_NAME!r} cannot be used with this env: {exc}") from exc


def make_algorithm(config: RunConfig, obs_space: Any, action_space: Any, device: str, mask_size: int = 0) -> Any:
    """The learner-side algorithm of `config`, on `device`, with initial weights seeded by run.seed.

    `mask_size` > 0: observations end with that many action-mask entries (illegal actions are never chosen)."""
    from daemons.algorithms.dqn import DoubleDQN

    check_supported(config, action_space)
    return DoubleDQN(config.model, config.algorithm, obs_space, action_space, device=device, seed=config.run.seed,
                     mask_size=mask_size)


def make_policy(config: RunConfig, obs_space: Any, action_space: Any, seed: int | None, mask_size: int = 0) -> Any:
    """The actor-side policy of `config` on the CPU; `seed` drives its exploration and its initial weights."""
    from daemons.algorithms.dqn import DQNPolicy

    check_supported(config, action_space)
    return DQNPolicy(config.model, obs_space, action_space, seed=seed, mask_size=mask_size)
