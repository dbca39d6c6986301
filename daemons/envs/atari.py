"""The standard Atari preprocessing around an ALE env, from `[env.atari]`: no TOML user writes Python for it.

Order, innermost first: the ALE env (frameskip=1), gymnasium's AtariPreprocessing (no-op starts, frame
skip with max-pooling of the last two frames, resize, grayscale), GameReturn (the game's own return, for
reports), then for training EpisodicLife and SignReward, FireReset when asked, and last the frame stack
([stack, H, W] uint8, which the Nature CNN takes as channels-first).
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from tandem.daemons.settings.schema import AtariSection

GAME_RETURN, GAME_LENGTH = "game_return", "game_length"  # info keys set on the step that ends a real game


def register_ale() -> None:
    """Make the 'ALE/...' ids known to gymnasium (ale-py registers them on request only)."""
    try:
        import ale_py
    except ImportError as exc:
        raise ValueError("env.atari needs the ale-py package (pip install ale-py; the ROMs come with it)") from exc
    gym.register_envs(ale_py)


class GameReturn(gym.Wrapper):
    """Adds the game's unclipped return and length (in agent steps) to the info of the step that ends it."""

    def __init__(self, env: gym.Env):
        super().__init__(env)
        self.total, self.length = 0.0, 0

    def reset(self, **kwargs: Any):
        self.total, self.length = 0.0, 0
        return self.env.reset(**kwargs)

    def step(self, action: Any):
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.total += float(reward)
        self.length += 1
        if terminated or truncated:
            info = {**info, GAME_RETURN: self.total, GAME_LENGTH: self.length}
        return obs, reward, terminated, truncated, info


class EpisodicLife(gym.Wrapper):
    """A lost life ends the learner's episode, but the game goes on: reset() then continues it with a no-op
    step instead of starting a new game (Mnih et al. 2015). Only a real game over resets the ALE."""

    def __init__(self, env: gym.Env):
        super().__init__(env)
        self.lives = 0
        self.game_over = True

    def step(self, action: Any):
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.game_over = terminated or truncated
        lives = self.env.unwrapped.ale.lives()
        if 0 < lives < self.lives:
            terminated = True
        self.lives = lives
        return obs, reward, terminated, truncated, info

    def reset(self, **kwargs: Any):
        if self.game_over:
            obs, info = self.env.reset(**kwargs)
        else:
            obs, _, terminated, truncated, info = self.env.step(0)
            if terminated or truncated:  # the no-op ended the game: start a new one
                obs, info = self.env.reset(**kwargs)
        self.lives = self.env.unwrapped.ale.lives()
        self.game_over = False
        return obs, info


class FireReset(gym.Wrapper):
    """Every reset() presses FIRE then UP (actions 1 and 2), as the Baselines-derived wrappers of Sample
    Factory, cleanRL and SB3 do: games such as Breakout wait for FIRE to serve. Outside EpisodicLife, so a
    lost life is followed by a serve too. The two steps' rewards are not the agent's (FIRE scores nothing)."""

    def reset(self, **kwargs: Any):
        obs, info = self.env.reset(**kwargs)
        for action in (1, 2):
            obs, _, terminated, truncated, info = self.env.step(action)
            if terminated or truncated:  # the game ended on the serve: start again, unserved
                return self.env.reset(**kwargs)
        return obs, info


def has_fire(env: gym.Env) -> bool:
    """True when the ALE game's action 1 is FIRE and it has the UP action 2 a serve presses after it."""
    meanings = env.unwrapped.get_action_meanings()
    return len(meanings) >= 3 and meanings[1] == "FIRE"


class SignReward(gym.RewardWrapper):
    """Rewards clipped to their sign, -1, 0 or +1 (the game's own return is kept by GameReturn)."""

    def reward(self, reward: float) -> float:
        return float(np.sign(reward))


def wrap_atari(env: gym.Env, cfg: AtariSection, training: bool, max_episode_steps: int = 0) -> gym.Env:
    """`env` (frameskip=1) with the preprocessing `cfg` asks for; the evaluator's (training False) sees
    whole games and true rewards. `max_episode_steps` > 0 cuts games after that many agent steps."""
    env = gym.wrappers.AtariPreprocessing(
        env,
        noop_max=cfg.noop_max,
        frame_skip=cfg.frame_skip,
        screen_size=cfg.screen_size,
        grayscale_obs=cfg.grayscale,
        terminal_on_life_loss=False,
        scale_obs=False,
    )
    if max_episode_steps:
        env = gym.wrappers.TimeLimit(env, max_episode_steps=max_episode_steps)
    env = GameReturn(env)
    if training and cfg.episodic_life:
        env = EpisodicLife(env)
    if training and cfg.clip_rewards:
        env = SignReward(env)
    if cfg.fire_reset and has_fire(env):
        env = FireReset(env)
    if cfg.frame_stack > 1:
        env = gym.wrappers.FrameStackObservation(env, cfg.frame_stack)
    return env


def stacks_by_rule(env: gym.Env, stack: int) -> bool:
    """True when `env`'s observations are gymnasium's FrameStackObservation stacks of `stack` frames, padded
    with the first frame at a reset, and nothing wraps it: every stack then follows PROTOCOL.md 2.1.2's rule
    by construction (a rolling queue of frames), so an actor need not check it step by step.

    The queue holds the inner env's frames by reference, so this holds only while that env hands out a new
    array every step: true of `wrap_atari`'s chain (AtariPreprocessing resizes into a fresh array) and of
    `wrap_pixels`' (ResizeObservation does), the only ones whose stacks an actor keeps as frames
    (`EnvSection.frames_per_obs` needs `env.atari` or `env.pixels`)."""
    return type(env) is gym.wrappers.FrameStackObservation and env.stack_size == stack and env.padding_type == "reset"


def atari_kwargs(kwargs: dict[str, Any]) -> dict[str, Any]:
    """gymnasium.make kwargs for the raw ALE env: one frame per step, since AtariPreprocessing skips frames."""
    if kwargs.get("frameskip", 1) != 1:
        raise ValueError(
            f"env.kwargs.frameskip is {kwargs['frameskip']}: with env.atari.enabled the ALE env must "
            "step single frames (env.atari.frame_skip sets the skip)"
        )
    return {**kwargs, "frameskip": 1}
