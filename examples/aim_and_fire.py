"""Aim and fire: hybrid actions, a Discrete head beside a Box head, in a plain env (docs/guides/entities.md).

Each step shows a target at (x, y) in [-1, 1]^2. The agent aims (`aim`, a Box of 2: where it points) and decides
whether to fire (`fire`, Discrete(2)): firing pays 1 when the target is on the right (x > 0), holding pays 1
when it is on the left, and the aim costs its distance from the target (|dx| + |dy|). An episode is 16 steps:
16 is the most it returns; acting at random returns about -5.

    tandem up examples/entity_skirmish.toml --set "env.id='aim_and_fire:make'" --set "env.max_entities=1"
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np


class AimAndFire(gym.Env):
    def __init__(self, length: int = 16):
        self.length = length
        self.observation_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
        self.action_space = gym.spaces.Dict(
            {"fire": gym.spaces.Discrete(2), "aim": gym.spaces.Box(-1.0, 1.0, (2,), np.float32)}
        )
        self.rng = np.random.default_rng()
        self.t = 0
        self.target = np.zeros(2, np.float32)

    def draw(self) -> np.ndarray:
        self.target = self.rng.uniform(-1.0, 1.0, 2).astype(np.float32)
        return self.target.copy()

    def reset(self, *, seed=None, options=None):
        if seed is not None:
            self.rng = np.random.default_rng(seed)
        self.t = 0
        return self.draw(), {}

    def step(self, action):
        miss = float(np.abs(np.asarray(action["aim"]) - self.target).sum())
        right = (int(action["fire"]) == 1) == bool(self.target[0] > 0)
        self.t += 1
        return self.draw(), float(right) - miss, False, self.t >= self.length, {}


def make(**kwargs) -> gym.Env:
    return AimAndFire(**kwargs)
