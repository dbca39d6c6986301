"""MiniGrid envs with their Dict observation as Tandem trains on it: the image and the direction, per key.

`env.id = "minigrid_dict:make"` with `env.kwargs = { id = "MiniGrid-DoorKey-5x5-v0" }` (found beside the
config that names it). MiniGrid observes {'image': uint8 [7, 7, 3] (object, colour and state codes of the
cells in view), 'direction': Discrete(4), 'mission': a text}; the text is dropped (every episode of these
tasks has the same one), the other two keys travel as arrays of their own and get an encoder each.
`minigrid_dict:make_stacked` stacks the image over the last steps (`stack` views, each sent once).
"""

from __future__ import annotations

import gymnasium as gym
import minigrid  # noqa: F401  (registers the MiniGrid-* ids)
from gymnasium.wrappers import FilterObservation

from tandem.daemons.envs.key_stack import KeyFrameStack

KEYS = ["image", "direction"]


def make(id: str = "MiniGrid-DoorKey-5x5-v0", **kwargs) -> gym.Env:
    """The MiniGrid env `id` observing only `KEYS`; `kwargs` go to gymnasium.make."""
    return FilterObservation(gym.make(id, **kwargs), KEYS)


def make_stacked(id: str = "MiniGrid-DoorKey-5x5-v0", stack: int = 4, **kwargs) -> gym.Env:
    """`make(id)` with its image the last `stack` views ([stack, 7, 7, 3]); each view travels once (PROTOCOL.md
    2.1.5), the direction stays one value."""
    return KeyFrameStack(make(id, **kwargs), "image", stack)
