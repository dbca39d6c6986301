"""Learning rules: `make_algorithm` for a learner and `make_policy` for an actor, both from the run config."""

from __future__ import annotations

import gymnasium as gym

from daemons.algorithms.base import Algorithm, Policy, SampledBatch, UpdateResult
from daemons.algorithms.dqn import ALGORITHM_NAME, DoubleDQN, DQNPolicy, discrete_actions
from daemons.config.schema import RunConfig

__all__ = ["Algorithm", "Policy", "SampledBatch", "UpdateResult", "DoubleDQN", "DQNPolicy",
           "make_algorithm", "make_policy"]


def check_supported(config: RunConfig, action_space: gym.Space) -> None:
    """ValueError unless the configured algorithm exists and can act in `action_space`."""
    if config.algorithm.name != ALGORITHM_NAME:
        raise ValueError(f"algorithm.name {config.algorithm.name!r} is not supported (supported: {ALGORITHM_NAME!r})")
    try:
        discrete_actions(action_space)
    except ValueError as exc:
        raise ValueError(f"algorithm.name {ALGORITHM_NAME!r} cannot be used with this env: {exc}") from exc


def make_algorithm(config: RunConfig, obs_space: gym.Space, action_space: gym.Space, device: str,
                   mask_size: int = 0) -> Algorithm:
    """The learner-side algorithm of `config`, on `device`, with initial weights seeded by run.seed.

    `mask_size` > 0: observations end with that many action-mask entries (illegal actions are never chosen)."""
    check_supported(config, action_space)
    return DoubleDQN(config.model, config.algorithm, obs_space, action_space, device=device, seed=config.run.seed,
                     mask_size=mask_size)


def make_policy(config: RunConfig, obs_space: gym.Space, action_space: gym.Space, seed: int | None,
                mask_size: int = 0) -> Policy:
    """The actor-side policy of `config` on the CPU; `seed` drives its exploration and its initial weights."""
    check_supported(config, action_space)
    return DQNPolicy(config.model, obs_space, action_space, seed=seed, mask_size=mask_size)
