"""Skirmish: a Tandem-native game with a varying set of units, for entity observations (docs/guides/entities.md).

Each step shows 1 to `max_units` of your units and 1 to `max_enemies` enemies on a unit square, each an entity
of features (x, y, hp), and a global feature (the episode's progress). Every unit picks an enemy to fire at
(`target`: a SelectEntity head; wrecks, hp 0, cannot be picked: the `targets:target` mask) and a stance
(`stance`: a PerEntity head, 0 advance or 1 hold). A unit earns 1 for firing at the living enemy nearest to it
and 0.5 for holding when its hp is under 0.5 or advancing otherwise, each shared over the step's units; the
field is drawn anew every step. An episode is `length` steps: 1.5 * length is the most it returns.

    tandem up examples/entity_skirmish.toml
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np

from tandem.entities import PerEntity, SelectEntity


class Skirmish(gym.Env):
    def __init__(self, max_units: int = 4, max_enemies: int = 6, length: int = 16):
        self.max_units, self.max_enemies, self.length = max_units, max_enemies, length
        row = gym.spaces.Box(-np.inf, np.inf, (3,), np.float32)
        self.observation_space = gym.spaces.Dict(
            {
                "unit": gym.spaces.Sequence(row, stack=True),
                "enemy": gym.spaces.Sequence(row, stack=True),
                "global": gym.spaces.Box(0.0, 1.0, (1,), np.float32),
                "targets:target": gym.spaces.Sequence(gym.spaces.MultiBinary(1), stack=True),
            }
        )
        self.action_space = gym.spaces.Dict({"target": SelectEntity("unit", "enemy"), "stance": PerEntity("unit", 2)})
        self.rng = np.random.default_rng()
        self.t = 0

    def draw(self) -> dict[str, np.ndarray]:
        units = self.rng.random((self.rng.integers(1, self.max_units + 1), 3), dtype=np.float32)
        enemies = self.rng.random((self.rng.integers(1, self.max_enemies + 1), 3), dtype=np.float32)
        enemies[self.rng.random(len(enemies)) < 0.2, 2] = 0.0  # wrecks
        enemies[self.rng.integers(len(enemies)), 2] = max(enemies[0, 2], 0.1)  # at least one enemy lives
        self.units, self.enemies = units, enemies
        alive = enemies[:, 2] > 0
        return {
            "unit": units,
            "enemy": enemies,
            "global": np.array([self.t / self.length], np.float32),
            "targets:target": alive,
        }

    def reset(self, *, seed=None, options=None):
        if seed is not None:
            self.rng = np.random.default_rng(seed)
        self.t = 0
        return self.draw(), {}

    def step(self, action):
        alive = self.enemies[:, 2] > 0
        distance = np.linalg.norm(self.units[:, None, :2] - self.enemies[None, :, :2], axis=-1)
        distance[:, ~alive] = np.inf
        nearest = distance.argmin(axis=1)
        fired = np.asarray(action["target"]) == nearest
        stance = np.asarray(action["stance"]) == (self.units[:, 2] < 0.5)
        reward = float((fired + 0.5 * stance).mean())
        self.t += 1
        return self.draw(), reward, False, self.t >= self.length, {}


def make(**kwargs) -> gym.Env:
    return Skirmish(**kwargs)
