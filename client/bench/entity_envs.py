"""`tandem bench entities`' envs: the same random data each step, as entities or as one flat Box."""

from __future__ import annotations

import gymnasium as gym
import numpy as np

from tandem.daemons.envs.entity_actions import PerEntity


class Swarm(gym.Env):
    """`entities` things of `features` random features each step and one of 4 moves a step (reward: 1 for move 0);
    `flat`: the same data as one Box of entities * features. `per_entity`: each thing picks a move (a PerEntity
    head; flat: a MultiDiscrete of one move per thing)."""

    def __init__(
        self, entities: int = 64, features: int = 8, flat: bool = False, per_entity: bool = False, length: int = 100
    ):
        self.entities, self.features, self.flat, self.length = entities, features, flat, length
        row = gym.spaces.Box(-np.inf, np.inf, (features,), np.float32)
        if flat:
            self.observation_space = gym.spaces.Box(-np.inf, np.inf, (entities * features,), np.float32)
            self.action_space = gym.spaces.MultiDiscrete([4] * entities) if per_entity else gym.spaces.Discrete(4)
        else:
            self.observation_space = gym.spaces.Dict({"thing": gym.spaces.Sequence(row, stack=True)})
            head = PerEntity("thing", 4) if per_entity else gym.spaces.Discrete(4)
            self.action_space = gym.spaces.Dict({"move": head})
        self.rng = np.random.default_rng(0)
        self.t = 0

    def observe(self):
        rows = self.rng.standard_normal((self.entities, self.features), dtype=np.float32)
        return rows.reshape(-1) if self.flat else {"thing": rows}

    def reset(self, *, seed=None, options=None):
        if seed is not None:
            self.rng = np.random.default_rng(seed)
        self.t = 0
        return self.observe(), {}

    def step(self, action):
        moves = np.asarray(action if self.flat else action["move"])  # one move, or one a thing
        self.t += 1
        return self.observe(), float((moves == 0).mean()), False, self.t >= self.length, {}


def swarm(**kwargs) -> gym.Env:
    return Swarm(**kwargs)
