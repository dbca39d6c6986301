"""Dict observation spaces: which keys a policy takes, and an env's Dict observation as one array per key."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import gymnasium as gym
import numpy as np

from tandem.protocol.keyed import MAX_KEYS

MASKED_KEYS = {"observation", "action_mask"}  # the action-mask form, flattened into one array instead


def is_dict_space(space: Any) -> bool:
    """A Dict whose keys travel one array each (not the action-mask form, which travels as one array)."""
    return isinstance(space, gym.spaces.Dict) and set(space.spaces) != MASKED_KEYS


def key_dtype(space: gym.Space) -> np.dtype:
    """The dtype a key's observations travel and are checked as."""
    if isinstance(space, gym.spaces.Discrete):
        return np.dtype(np.int64)
    return np.dtype(space.dtype)


def key_spaces(space: gym.spaces.Dict) -> dict[str, gym.Space]:
    """key -> space of a Dict observation space; ValueError naming a key Tandem cannot carry as an array."""
    if not 1 <= len(space.spaces) <= MAX_KEYS:
        raise ValueError(f"a Dict observation needs 1 to {MAX_KEYS} keys, got {len(space.spaces)}")
    for key, sub in space.spaces.items():
        if not isinstance(sub, (gym.spaces.Box, gym.spaces.Discrete, gym.spaces.MultiBinary)):
            raise ValueError(
                f"observation key {key!r} is a {type(sub).__name__}: each key of a Dict observation must be a Box, "
                "Discrete or MultiBinary (drop the others with gymnasium.wrappers.FilterObservation, as "
                "examples/minigrid_dict.py drops MiniGrid's 'mission' text)"
            )
    return dict(space.spaces)


class DictObs:
    """An env's Dict observation as {key: array} in the space's key order, each in its key's dtype."""

    def __init__(self, space: gym.spaces.Dict):
        self.dtypes = {key: key_dtype(sub) for key, sub in key_spaces(space).items()}

    def __call__(self, obs: Any) -> dict[str, np.ndarray]:
        if not isinstance(obs, Mapping):
            raise ValueError(f"the env's observation space is a Dict, but it returned a {type(obs).__name__}")
        missing = [key for key in self.dtypes if key not in obs]
        if missing:
            raise ValueError(f"the env's observation has no key {missing[0]!r} (keys: {', '.join(map(str, obs))})")
        return {key: np.asarray(obs[key], dtype) for key, dtype in self.dtypes.items()}
