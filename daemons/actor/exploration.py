"""Ape-X exploration: a fixed epsilon per env spread over every env of every actor, with an optional warm-up decay."""

from __future__ import annotations

import numpy as np


def actor_epsilons(base: float, alpha: float, index: int, count: int, num_envs: int) -> np.ndarray:
    """Ape-X epsilons spread over every env of every actor: env g of G gets base ** (1 + alpha * g / (G - 1))."""
    total = max(count, 1) * num_envs
    g = index * num_envs + np.arange(num_envs)
    if total == 1:
        return np.full(num_envs, base)
    return base ** (1.0 + alpha * g / (total - 1))


def decayed(epsilons: np.ndarray, env_steps: int, decay_steps: int) -> np.ndarray:
    """Linear decay from 1.0 to each env's own epsilon over `decay_steps` of this actor's env steps."""
    if decay_steps <= 0 or env_steps >= decay_steps:
        return epsilons
    return 1.0 - (1.0 - epsilons) * (env_steps / decay_steps)
