"""Dict (and Tuple) observation spaces: which keys a policy takes, and an env's observation as one array per key.

A Tuple observation is taken as a Dict whose keys are the positions, "0", "1", ...: it travels and is encoded
exactly as that Dict would be.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import gymnasium as gym
import numpy as np

from tandem.protocol.keyed import MAX_KEYS

MASKED_KEYS = {"observation", "action_mask"}  # the action-mask form, flattened into one array instead


def is_dict_space(space: Any) -> bool:
    """A Dict (not the action-mask form, which travels as one array) or a Tuple: one array per key."""
    if isinstance(space, gym.spaces.Tuple):
        return True
    return isinstance(space, gym.spaces.Dict) and set(space.spaces) != MASKED_KEYS


def key_dtype(space: gym.Space) -> np.dtype:
    """The dtype a key's observations travel and are checked as."""
    if isinstance(space, gym.spaces.Discrete):
        return np.dtype(np.int64)
    return np.dtype(space.dtype)


def key_spaces(space: gym.spaces.Dict | gym.spaces.Tuple) -> dict[str, gym.Space]:
    """key -> space of a Dict observation space (a Tuple's keys are its positions); ValueError naming a key Tandem
    cannot carry as an array."""
    spaces = (
        {str(i): sub for i, sub in enumerate(space.spaces)} if isinstance(space, gym.spaces.Tuple) else space.spaces
    )
    if not 1 <= len(spaces) <= MAX_KEYS:
        raise ValueError(f"a Dict or Tuple observation needs 1 to {MAX_KEYS} keys, got {len(spaces)}")
    for key, sub in spaces.items():
        if not isinstance(sub, (gym.spaces.Box, gym.spaces.Discrete, gym.spaces.MultiBinary)):
            raise ValueError(
                f"observation key {key!r} is a {type(sub).__name__}: each key of a Dict observation must be a Box, "
                "Discrete or MultiBinary (drop the others with gymnasium.wrappers.FilterObservation, as "
                "examples/minigrid_dict.py drops MiniGrid's 'mission' text)"
            )
    return dict(spaces)


def stack_candidates(space: Any, most: int) -> dict[str, int]:
    """key -> S for each key of a Dict observation that may be a stack of S image frames (a uint8 Box of 3 or more
    dimensions, the first one S in [2, most]). Only a candidate: a sender checks each batch against the stacking
    rule before it sends a key as its frames (PROTOCOL.md 2.1.5), and sends it whole where it does not follow it."""
    if not is_dict_space(space):
        return {}
    return {
        key: sub.shape[0]
        for key, sub in key_spaces(space).items()
        if isinstance(sub, gym.spaces.Box) and sub.dtype == np.uint8 and len(sub.shape) >= 3
        if 2 <= sub.shape[0] <= most
    }


class DictObs:
    """An env's Dict observation as {key: array} in the space's key order, each in its key's dtype."""

    def __init__(self, space: gym.spaces.Dict | gym.spaces.Tuple):
        self.dtypes = {key: key_dtype(sub) for key, sub in key_spaces(space).items()}
        self.tuple = isinstance(space, gym.spaces.Tuple)

    def __call__(self, obs: Any) -> dict[str, np.ndarray]:
        if self.tuple:
            if not isinstance(obs, (tuple, list)) or len(obs) != len(self.dtypes):
                raise ValueError(
                    f"the env's observation space is a Tuple of {len(self.dtypes)}, it returned {obs!r:.80}"
                )
            obs = {str(i): part for i, part in enumerate(obs)}
        if not isinstance(obs, Mapping):
            raise ValueError(f"the env's observation space is a Dict, but it returned a {type(obs).__name__}")
        missing = [key for key in self.dtypes if key not in obs]
        if missing:
            raise ValueError(f"the env's observation has no key {missing[0]!r} (keys: {', '.join(map(str, obs))})")
        return {key: np.asarray(obs[key], dtype) for key, dtype in self.dtypes.items()}
