"""Image preprocessing around any env whose observation is a uint8 image, from `[env.pixels]` (ALE ids: atari.py).

Order, innermost first: the env, gymnasium's MaxAndSkipObservation (each action repeated `frame_skip`
frames, rewards summed, the last two frames max-pooled), TimeLimit in agent steps, GrayscaleObservation,
ResizeObservation (a square `screen_size`), channels first, GameReturn (the env's own return, for reports),
for training SignReward, and last FrameStackObservation ([stack, H, W] uint8: what the Nature CNN takes, and
what an actor sends as frames once, PROTOCOL.md 2.1.2; colour frames [stack*C, H, W], sent whole).
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np

from tandem.daemons.envs.atari import GameReturn, SignReward
from tandem.daemons.settings.schema import PixelsSection

IMAGE = "an image: a uint8 Box of shape HxWxC or HxW with bounds 0 and 255"


def image_problem(space: gym.Space, cfg: PixelsSection) -> str | None:
    """Why `[env.pixels]` cannot take observations of `space`, as 'key: what is wrong', or None."""
    if not isinstance(space, gym.spaces.Box) or space.dtype != np.uint8 or len(space.shape) not in (2, 3):
        return f"env.pixels.enabled: the env's observation space is {space}, not {IMAGE}"
    if not (np.all(space.low == 0) and np.all(space.high == 255)):
        return (
            f"env.pixels.enabled: the env's observation space {space} has bounds other than 0 and 255 "
            f"(low {np.min(space.low)}..{np.max(space.low)}, high {np.min(space.high)}..{np.max(space.high)}); "
            f"it needs {IMAGE}"
        )
    channels = space.shape[2] if len(space.shape) == 3 else 1
    if cfg.grayscale and channels not in (1, 3):
        return (
            f"env.pixels.grayscale: frames of shape {space.shape} have {channels} channels; grayscale takes 1 or 3 "
            "(RGB) in the last axis (channels last), or set env.pixels.grayscale = false"
        )
    return None


def wrap_pixels(env: gym.Env, cfg: PixelsSection, training: bool, max_episode_steps: int = 0) -> gym.Env:
    """`env` (its observation space passed `image_problem`) with the preprocessing `cfg` asks for; the
    evaluator's (training False) sees true rewards. `max_episode_steps` > 0 cuts episodes after that many
    agent steps."""
    shape = env.observation_space.shape
    if len(shape) == 3 and shape[2] == 1:  # one channel is a grayscale frame already: [H, W] like the others
        env = gym.wrappers.ReshapeObservation(env, shape[:2])
    if cfg.frame_skip > 1:  # gymnasium's wrapper refuses a skip of 1, which is no skip anyway
        env = gym.wrappers.MaxAndSkipObservation(env, skip=cfg.frame_skip)
    if max_episode_steps:
        env = gym.wrappers.TimeLimit(env, max_episode_steps=max_episode_steps)
    if cfg.grayscale and len(env.observation_space.shape) == 3:
        env = gym.wrappers.GrayscaleObservation(env)
    # Always resized, even to the same size: cv2 then hands out a new array each step, which the frame stack
    # keeps by reference (an env that reuses one buffer would otherwise change frames already stacked).
    env = gym.wrappers.ResizeObservation(env, (cfg.screen_size, cfg.screen_size))
    colour = len(env.observation_space.shape) == 3
    if colour:
        env = channels_first(env)
    env = GameReturn(env)
    if training and cfg.clip_rewards:
        env = SignReward(env)
    if cfg.frame_stack > 1:
        env = gym.wrappers.FrameStackObservation(env, cfg.frame_stack)
        if colour:  # [stack, C, H, W] -> [stack*C, H, W]: still channels first for a 2-D CNN
            stack, c, h, w = env.observation_space.shape
            env = gym.wrappers.ReshapeObservation(env, (stack * c, h, w))
    elif not colour:  # one grayscale frame as [1, H, W]: a CNN's input has channels
        env = gym.wrappers.ReshapeObservation(env, (1, *env.observation_space.shape))
    return env


def channels_first(env: gym.Env) -> gym.Env:
    """[H, W, C] frames as [C, H, W] (a new contiguous array each step, as the frame stack needs)."""
    h, w, c = env.observation_space.shape
    space = gym.spaces.Box(0, 255, (c, h, w), np.uint8)
    return gym.wrappers.TransformObservation(env, lambda obs: np.ascontiguousarray(np.moveaxis(obs, -1, 0)), space)
