"""EnvPool (`env.vector = 'envpool'`, C++ threads stepping K envs) behind gymnasium's SAME_STEP vector interface."""

from __future__ import annotations

from typing import Any

import numpy as np

from daemons.config.schema import EnvSection
from daemons.envs.atari import GAME_LENGTH, GAME_RETURN
from daemons.envs.gym_envs import EnvBuildError


def envpool_task(cfg: EnvSection, training: bool) -> tuple[str, dict[str, Any]]:
    """EnvPool's task id and options for env.id, env.kwargs, env.max_episode_steps and env.atari."""
    if ":" in cfg.id:
        raise EnvBuildError(f"env.vector = 'envpool' steps EnvPool's own tasks; env.id {cfg.id!r} is a callable")
    kwargs = dict(cfg.kwargs)
    if cfg.max_episode_steps:
        kwargs["max_episode_steps"] = cfg.max_episode_steps
    if not cfg.atari.enabled:
        return cfg.id, kwargs
    a = cfg.atari
    kwargs.pop("frameskip", None)  # env.atari.frame_skip is the skip, as for the built-in preprocessing
    # ale-py's v5 default of sticky actions, and no FIRE on reset: the same game as make_env's
    kwargs.setdefault("repeat_action_probability", 0.25)
    kwargs.update(stack_num=a.frame_stack, gray_scale=a.grayscale, frame_skip=a.frame_skip, noop_max=a.noop_max,
                  img_height=a.screen_size, img_width=a.screen_size, use_fire_reset=False,
                  episodic_life=training and a.episodic_life, reward_clip=training and a.clip_rewards)
    return cfg.id.removeprefix("ALE/"), kwargs


def make_envpool(cfg: EnvSection, seed: int, training: bool = True) -> EnvPoolVector:
    try:
        import envpool
    except ImportError as exc:
        raise EnvBuildError("env.vector = 'envpool' needs the envpool package (pip install envpool), "
                            f"which is not importable here: {exc}") from exc
    task, kwargs = envpool_task(cfg, training)
    try:
        # batch_size = num_envs: every step waits for all K (synchronous), like the other vector envs
        pool = envpool.make_gymnasium(task, num_envs=cfg.num_envs, batch_size=cfg.num_envs, seed=seed, **kwargs)
    except Exception as exc:  # unknown task ids and options arrive as assorted exception types
        raise EnvBuildError(f"envpool could not make {task!r} with {kwargs}: {type(exc).__name__}: {exc}") from exc
    return EnvPoolVector(pool, cfg.num_envs, games=cfg.atari.enabled)


def by_env(ids: np.ndarray, *arrays: Any) -> list[np.ndarray]:
    """`arrays` reordered to env-id order (EnvPool answers in the order the envs finished)."""
    order = np.argsort(ids)
    return [np.asarray(a)[order] for a in arrays]


class EnvPoolVector:
    """EnvPool resets an ended env at its next step (the action ignored, reward 0); this issues that step at
    once, for the ended envs only, so a step returns the next episode's first observation as SAME_STEP does.
    (An explicit reset() would start a new game where episodic life only lost a life.)"""

    def __init__(self, pool: Any, num_envs: int, games: bool):
        self.pool, self.num_envs, self.games = pool, num_envs, games
        self.single_observation_space = pool.observation_space
        self.single_action_space = pool.action_space
        self.game_return = np.zeros(num_envs, np.float64)  # Atari: unclipped, over all lives
        self.game_length = np.zeros(num_envs, np.int64)

    def reset(self, seed: int | None = None) -> tuple[np.ndarray, dict[str, Any]]:
        obs, info = self.pool.reset()  # seeded when built
        self.game_return[:], self.game_length[:] = 0.0, 0
        (obs,) = by_env(info["env_id"], obs)
        return obs, {}

    def step(self, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        obs, rewards, terminated, truncated, info = self.pool.step(np.asarray(actions))
        obs, rewards, terminated, truncated = by_env(info["env_id"], obs, rewards, terminated, truncated)
        out: dict[str, Any] = {}
        ended = np.flatnonzero(terminated | truncated)
        if self.games:
            raw, game_over = by_env(info["env_id"], info["reward"], info["terminated"])
            out["final_info"] = self._games(raw, (game_over != 0) | truncated)
        if len(ended):
            final_obs = np.empty(self.num_envs, object)
            for k in ended:
                final_obs[k] = obs[k].copy()
            out["final_obs"], out["_final_obs"] = final_obs, np.isin(np.arange(self.num_envs), ended)
            noop = np.zeros((len(ended), *(self.single_action_space.shape or ())), self.single_action_space.dtype)
            first, _, _, _, reset_info = self.pool.step(noop, env_id=ended.astype(np.int32))
            obs = obs.copy()
            obs[np.asarray(reset_info["env_id"])] = first
        return obs, rewards, terminated, truncated, out

    def _games(self, raw_rewards: np.ndarray, over: np.ndarray) -> dict[str, Any]:
        self.game_return += raw_rewards
        self.game_length += 1
        games = {GAME_RETURN: self.game_return.copy(), GAME_LENGTH: self.game_length.copy(), f"_{GAME_RETURN}": over}
        self.game_return[over], self.game_length[over] = 0.0, 0
        return games

    def close(self) -> None:
        self.pool.close()
