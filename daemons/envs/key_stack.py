"""A Dict observation with one key stacked over the last S steps, padded as gymnasium's FrameStackObservation does.

FrameStackObservation stacks every key of a Dict (a Discrete direction becomes a MultiDiscrete of S); a game
that sends a screen and a vector of its own state wants only the screen stacked. This stacks one key and keeps
FrameStackObservation's "reset" padding (an episode's first frame repeated), so an actor sends each frame of
that key once (PROTOCOL.md 2.1.5).
"""

from __future__ import annotations

from collections import deque
from typing import Any

import gymnasium as gym
import numpy as np


class KeyFrameStack(gym.ObservationWrapper):
    """`env`'s Dict observation with `key` replaced by its last `stack` values, oldest first: [stack, *shape]."""

    def __init__(self, env: gym.Env, key: str, stack: int):
        super().__init__(env)
        space = env.observation_space
        if not isinstance(space, gym.spaces.Dict) or key not in space.spaces:
            keys = ", ".join(space.spaces) if isinstance(space, gym.spaces.Dict) else type(space).__name__
            raise ValueError(f"KeyFrameStack: the observation has no key {key!r} (it has: {keys})")
        inner = space.spaces[key]
        if not isinstance(inner, gym.spaces.Box):
            raise ValueError(f"KeyFrameStack: key {key!r} is a {type(inner).__name__}; only a Box key is stacked")
        if stack < 1:
            raise ValueError(f"KeyFrameStack: stack must be >= 1, got {stack}")
        self.key, self.stack = key, stack
        low = np.repeat(inner.low[None], stack, axis=0)
        high = np.repeat(inner.high[None], stack, axis=0)
        stacked = gym.spaces.Box(low, high, dtype=inner.dtype)
        self.observation_space = gym.spaces.Dict({**space.spaces, key: stacked})
        self.frames: deque[np.ndarray] = deque(maxlen=stack)

    def reset(self, **kwargs: Any) -> tuple[Any, dict]:
        obs, info = self.env.reset(**kwargs)
        self.frames.clear()
        for _ in range(self.stack):  # the first frame fills the stack, as padding_type="reset" does
            self.frames.append(np.array(obs[self.key]))
        return self.stacked(obs), info

    def observation(self, observation: Any) -> Any:
        self.frames.append(np.array(observation[self.key]))
        return self.stacked(observation)

    def stacked(self, observation: Any) -> dict[str, Any]:
        return {**observation, self.key: np.stack(self.frames)}
