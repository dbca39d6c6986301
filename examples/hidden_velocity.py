"""CartPole that shows only the cart's position and the pole's angle: the velocities must be remembered.

`env.id = "hidden_velocity:cartpole"` (found beside the config that names it). One observation no longer
tells which way the pole is falling, so a feed-forward policy cannot balance it for long; a recurrent core
(model.core = "lstm") can, by remembering the last positions. Used by examples/cartpole_lstm.toml.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np

SHOWN = [0, 2]  # cart position, pole angle (CartPole's observation: x, x_dot, theta, theta_dot)


class PositionsOnly(gym.ObservationWrapper):
    """CartPole's observation without the two velocities."""

    def __init__(self, env: gym.Env):
        super().__init__(env)
        space = env.observation_space
        self.observation_space = gym.spaces.Box(space.low[SHOWN], space.high[SHOWN], dtype=np.float32)

    def observation(self, observation: np.ndarray) -> np.ndarray:
        return np.asarray(observation, dtype=np.float32)[SHOWN]


def cartpole(**kwargs) -> gym.Env:
    """CartPole-v1 (500 steps) with its velocities hidden; `kwargs` go to gymnasium.make."""
    return PositionsOnly(gym.make("CartPole-v1", **kwargs))
