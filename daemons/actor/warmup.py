"""Uniform random actions while a policy's weights are still the untrained ones (an off-policy algorithm's warm-up),
and the acting rule that applies them.

SAC implementations fill their replay with uniformly random actions before learning starts (SB3's
`learning_starts`, Spinning Up's `start_steps`), which spreads the first data over the whole action range; an
untrained squashed Gaussian keeps it near the middle. Version 0 of a policy is always its learner's initial,
untrained weights (versions only rise, across restarts too), so "acting with version 0" is that phase in an async
run and in a serial one alike.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tandem.daemons.algorithms.base import Policy, explore_with
from tandem.daemons.settings.schema import RunConfig


def uniform_warmup(config: RunConfig) -> bool:
    """The policy's algorithm asks for uniform actions while its weights are untrained (its section says)."""
    return config.algorithm.uniform_until_trained()


class UniformActions:
    """Actions drawn uniformly from a bounded Box (float32 [K, *shape]), from a seeded generator of their own."""

    def __init__(self, action_space: Any, seed: int | None):
        low, high = np.asarray(action_space.low, np.float64), np.asarray(action_space.high, np.float64)
        if not (np.isfinite(low).all() and np.isfinite(high).all()):
            raise ValueError(f"uniform warm-up actions need a bounded Box action space, got {action_space}")
        self.low, self.high, self.dtype = low, high, np.dtype(action_space.dtype or np.float32)
        self.rng = np.random.default_rng(seed)

    def __call__(self, count: int) -> np.ndarray:
        return self.rng.uniform(self.low, self.high, size=(count, *self.low.shape)).astype(self.dtype)


def explore_or_warm_up(
    policy: Policy,
    warmup: UniformActions | None,
    version: int,
    obs: np.ndarray,
    epsilons: np.ndarray,
    state: np.ndarray | None = None,
) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """The acting rule of every actor (the daemon, the action server, serial mode): uniform actions while the
    weights are the untrained version 0 and the algorithm asks for them (`warmup`), else the policy explores."""
    if warmup is not None and version == 0:
        return warmup(len(obs)), {}
    return explore_with(policy, obs, epsilons, state)
