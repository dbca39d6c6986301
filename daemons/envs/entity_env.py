"""An env with entity observations as Tandem carries it: observations padded to their bounds, actions as slots."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from tandem.daemons.envs.entity_rows import NO_ACTION, EntityRows
from tandem.daemons.envs.entity_spaces import EntityLayout, declared_layout

__all__ = ["NO_ACTION", "EntityEnv"]


class EntityEnv(gym.Wrapper):
    """`env` with its entity types padded to `bound` rows and its actions taken as slots (EntityRows)."""

    def __init__(self, env: gym.Env, bound: int):
        super().__init__(env)
        try:
            self.layout: EntityLayout = declared_layout(env.observation_space, env.action_space, bound)
        except ValueError as exc:
            raise ValueError(f"entity observations: {exc}") from exc
        self.observation_space = self.layout.observation_space()
        self.action_space = self.layout.action_space()
        self.rows = EntityRows(self.layout, as_tuple=isinstance(env.action_space, gym.spaces.Tuple))

    def reset(self, **kwargs: Any):
        obs, info = self.env.reset(**kwargs)
        return self.rows.pad(obs), info

    def step(self, action: Any):
        obs, reward, terminated, truncated, info = self.env.step(self.rows.env_action(np.asarray(action)))
        return self.rows.pad(obs), reward, terminated, truncated, info
