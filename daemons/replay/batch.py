"""What replay hands an off-policy algorithm: B transitions with their n-step returns already summed."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class SampledBatch:
    """B transitions drawn from replay, with n-step returns already summed (m <= n steps each)."""

    obs: np.ndarray  # [B, *obs_shape]
    actions: np.ndarray  # [B, *action_shape]
    returns: np.ndarray  # [B] float32: sum over i < m of gamma**i * r[t+i]
    next_obs: np.ndarray  # [B, *obs_shape]: the observation m steps later, to bootstrap from
    discounts: np.ndarray  # [B] float32: gamma**m, or 0 where the episode terminated within the m steps
    versions: np.ndarray  # [B] int64: policy version that chose actions[b]
    indices: np.ndarray  # [B] int64: replay slots, for update_priorities
    weights: np.ndarray  # [B] float32: importance-sampling weights (all ones for uniform replay)
