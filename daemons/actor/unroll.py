"""T steps of K gymnasium envs collected into the arrays of one TransitionBatch."""

from __future__ import annotations

import numpy as np


class UnrollBuilder:
    """Collects T steps of K envs into fresh arrays (fresh each unroll, so zero-copy sends stay safe)."""

    def __init__(self, steps: int, first_obs: np.ndarray, action_shape: tuple, action_dtype: np.dtype):
        self.steps, self.t = steps, 0
        envs = first_obs.shape[0]
        self.obs = np.empty((steps + 1, *first_obs.shape), first_obs.dtype)
        self.obs[0] = first_obs
        self.actions = np.empty((steps, envs, *action_shape), action_dtype)
        self.rewards = np.empty((steps, envs), np.float32)
        self.terminated = np.empty((steps, envs), bool)
        self.truncated = np.empty((steps, envs), bool)
        self.finals: list[np.ndarray] = []
        self.extras: dict[str, np.ndarray] = {}

    def add(self, actions: np.ndarray, result, extras: dict[str, np.ndarray] | None = None) -> bool:
        """Record one step (and the policy's per-step extras, [K, ...] each); True when the unroll is full."""
        t = self.t
        for name, values in (extras or {}).items():
            if name not in self.extras:
                values = np.asarray(values)
                self.extras[name] = np.empty((self.steps, *values.shape), values.dtype)
            self.extras[name][t] = values
        self.actions[t], self.rewards[t] = actions, result.rewards
        self.terminated[t], self.truncated[t] = result.terminated, result.truncated
        self.obs[t + 1] = result.obs
        if len(result.final_obs):
            self.finals.append(result.final_obs)
        self.t += 1
        return self.t == self.steps

    def final_obs(self) -> np.ndarray:
        if self.finals:
            return np.concatenate(self.finals)
        return np.empty((0, *self.obs.shape[2:]), self.obs.dtype)
