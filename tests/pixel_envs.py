"""A tiny deterministic image env (not ALE) for `[env.pixels]`: a block that moves one column step per frame.

Imported by daemons as `tests.pixel_envs:MovingBlock`. Frame `t` (0 at reset) shows a bright block at
column `block_x(t)` on a dark field, 210x160x3 uint8 like an Atari screen; the reward of the step that
shows frame `t` is `t`, so a skip's summed reward tells which frames it stepped.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np

HEIGHT, WIDTH = 210, 160
BLOCK_H, BLOCK_W, STEP_X = 40, 8, 8
TOP = 80


def block_x(t: int) -> int:
    return (STEP_X * t) % (WIDTH - BLOCK_W)


def frame(t: int, channels: int = 3) -> np.ndarray:
    """What MovingBlock shows at frame `t`: each channel a different brightness, so grayscale mixes them."""
    out = np.full((HEIGHT, WIDTH, channels), 10, np.uint8)
    x = block_x(t)
    out[TOP : TOP + BLOCK_H, x : x + BLOCK_W] = np.array([200, 150, 250, 255][:channels], np.uint8)
    return out


class MovingBlock(gym.Env):
    """`episode_frames` frames an episode (terminated at the last; a list: one after another, in turn);
    `channels` 3 (RGB), 1, or 0 for HxW frames."""

    action_space = gym.spaces.Discrete(2)

    def __init__(self, episode_frames: int | list[int] = 100, channels: int = 3, reuse_buffer: bool = True):
        self.lengths = list(episode_frames) if isinstance(episode_frames, (list, tuple)) else [episode_frames]
        self.episode, self.episode_frames, self.channels = -1, self.lengths[0], channels
        shape = (HEIGHT, WIDTH, channels) if channels else (HEIGHT, WIDTH)
        self.observation_space = gym.spaces.Box(0, 255, shape, np.uint8)
        # Many emulators hand out one screen buffer they overwrite: the wrappers must not keep it by reference.
        self.reuse_buffer = reuse_buffer
        self.buffer = np.zeros(shape, np.uint8)
        self.t = 0
        self.actions: list[int] = []

    def _obs(self) -> np.ndarray:
        shown = frame(self.t, max(self.channels, 1)).reshape(self.observation_space.shape)
        if not self.reuse_buffer:
            return shown
        self.buffer[...] = shown
        return self.buffer

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t, self.episode = 0, self.episode + 1
        self.episode_frames = self.lengths[self.episode % len(self.lengths)]
        return self._obs(), {}

    def step(self, action):
        self.actions.append(int(action))
        self.t += 1
        return self._obs(), float(self.t), self.t >= self.episode_frames, False, {}
