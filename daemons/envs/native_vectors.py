"""Vector envs that step K envs in native threads (EnvPool; ale-py's AtariVectorEnv), behind gymnasium's SAME_STEP
vector interface, with the learner's episodes and the whole games reported as [env.atari] defines them."""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from tandem.daemons.envs.atari import GAME_LENGTH, GAME_RETURN
from tandem.daemons.envs.gym_envs import EnvBuildError, make_env
from tandem.daemons.settings.schema import EnvSection

Step = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]


class GameTally:
    """Unclipped return and length of each env's current game; on the step that ends games, the final_info
    entries VectorGroup reads (as GameReturn puts them in a wrapped env's info)."""

    def __init__(self, num_envs: int):
        self.total = np.zeros(num_envs, np.float64)
        self.length = np.zeros(num_envs, np.int64)

    def step(self, raw_rewards: np.ndarray, over: np.ndarray) -> dict[str, Any]:
        self.total += raw_rewards
        self.length += 1
        games = {GAME_RETURN: self.total.copy(), GAME_LENGTH: self.length.copy(), f"_{GAME_RETURN}": over}
        self.total[over], self.length[over] = 0.0, 0
        return games


def atari_game(cfg: EnvSection) -> str:
    """'ALE/MsPacman-v5' -> 'MsPacman'."""
    if not cfg.atari.enabled or not cfg.id.startswith("ALE/"):
        raise EnvBuildError(
            f"env.vector = {cfg.vector!r} is for Atari: it needs env.atari.enabled and an "
            f"'ALE/Game-v5' env.id (env.id is {cfg.id!r})"
        )
    return cfg.id.removeprefix("ALE/").split("-")[0]


def check_spaces(venv: Any, cfg: EnvSection) -> Any:
    """`venv` when its observations are what the learner expects (it probes make_env's env); else an error."""
    obs, _act = venv.single_observation_space, venv.single_action_space
    if cfg.atari.enabled:  # the learner's, from make_env's wrappers, without building an ALE env here
        a = cfg.atari
        shape = (a.frame_stack,) * (a.frame_stack > 1) + (a.screen_size, a.screen_size) + (3,) * (not a.grayscale)
        dtype = np.dtype(np.uint8)
    else:
        probe = make_env(cfg)
        shape, dtype = probe.observation_space.shape, np.dtype(probe.observation_space.dtype)
        probe.close()
    if tuple(obs.shape) != tuple(shape) or np.dtype(obs.dtype) != dtype:
        venv.close()
        raise EnvBuildError(
            f"env.vector = {cfg.vector!r} gives observations of shape {tuple(obs.shape)} {obs.dtype}, "
            f"but the learner expects {tuple(shape)} {dtype} (what env.vector = '' steps); "
            "use another env.vector or change [env.atari]"
        )
    return venv


# ---------------------------------------------------------------- EnvPool


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
    # ale-py's v5 default of sticky actions, and FIRE on reset only when asked: the same game as make_env's
    # (EnvPool's fire reset follows Baselines' order, after a lost life too, as FireReset does)
    kwargs.setdefault("repeat_action_probability", 0.25)
    kwargs.update(
        stack_num=a.frame_stack,
        gray_scale=a.grayscale,
        frame_skip=a.frame_skip,
        noop_max=a.noop_max,
        img_height=a.screen_size,
        img_width=a.screen_size,
        use_fire_reset=a.fire_reset,
        episodic_life=training and a.episodic_life,
        reward_clip=training and a.clip_rewards,
    )
    return f"{atari_game(cfg)}-v5", kwargs


def make_envpool(cfg: EnvSection, seed: int, training: bool = True) -> EnvPoolVector:
    task, kwargs = envpool_task(cfg, training)
    try:
        import envpool
    except ImportError as exc:
        raise EnvBuildError(
            "env.vector = 'envpool' needs the envpool package (pip install envpool), "
            f"which is not importable here: {exc}"
        ) from exc
    try:
        # batch_size = num_envs: every step waits for all K (synchronous), like the other vector envs
        pool = envpool.make_gymnasium(task, num_envs=cfg.num_envs, batch_size=cfg.num_envs, seed=seed, **kwargs)
    except Exception as exc:  # unknown task ids and options arrive as assorted exception types
        raise EnvBuildError(f"envpool could not make {task!r} with {kwargs}: {type(exc).__name__}: {exc}") from exc
    return check_spaces(EnvPoolVector(pool, cfg.num_envs, games=cfg.atari.enabled), cfg)


def by_env(ids: np.ndarray, *arrays: Any) -> list[np.ndarray]:
    """`arrays` reordered to env-id order (EnvPool answers in the order the envs finished)."""
    order = np.argsort(ids)
    return [np.asarray(a)[order] for a in arrays]


class EnvPoolVector:
    """EnvPool resets an ended env at its next step (the action ignored, reward 0); this issues that step at
    once, for the ended envs only, so a step returns the next episode's first observation as SAME_STEP does.
    (An explicit reset() would start a new game where episodic life only lost a life.)"""

    def __init__(self, pool: Any, num_envs: int, games: bool):
        self.pool, self.num_envs = pool, num_envs
        self.single_observation_space = pool.observation_space
        self.single_action_space = pool.action_space
        self.games = GameTally(num_envs) if games else None

    def reset(self, seed: int | None = None) -> tuple[np.ndarray, dict[str, Any]]:
        obs, info = self.pool.reset()  # seeded when built
        (obs,) = by_env(info["env_id"], obs)
        return obs, {}

    def step(self, actions: np.ndarray) -> Step:
        obs, rewards, terminated, truncated, info = self.pool.step(np.asarray(actions))
        obs, rewards, terminated, truncated = by_env(info["env_id"], obs, rewards, terminated, truncated)
        out: dict[str, Any] = {}
        ended = np.flatnonzero(terminated | truncated)
        if self.games is not None:  # info['reward'] is unclipped, info['terminated'] a real game over
            raw, game_over = by_env(info["env_id"], info["reward"], info["terminated"])
            out["final_info"] = self.games.step(raw, (game_over != 0) | truncated)
        if len(ended):
            final_obs = np.empty(self.num_envs, object)
            for k in ended:
                final_obs[k] = obs[k].copy()
            out["final_obs"], out["_final_obs"] = final_obs, terminated | truncated
            noop = np.zeros((len(ended), *(self.single_action_space.shape or ())), self.single_action_space.dtype)
            first, _, _, _, reset_info = self.pool.step(noop, env_id=ended.astype(np.int32))
            obs = obs.copy()
            obs[np.asarray(reset_info["env_id"])] = first
        return obs, rewards, terminated, truncated, out

    def close(self) -> None:
        self.pool.close()


# ---------------------------------------------------------------- ale-py's AtariVectorEnv


def make_ale(cfg: EnvSection, training: bool = True) -> AleVector:
    """ale-py's native vector env with [env.atari]'s preprocessing done in its C++ threads."""
    try:
        from ale_py.vector_env import AtariVectorEnv
    except ImportError as exc:
        raise EnvBuildError(
            "env.vector = 'ale' needs ale-py >= 0.11 (pip install -U ale-py), which has "
            f"ale_py.vector_env.AtariVectorEnv: {exc}"
        ) from exc
    game = re.sub(r"(?<!^)(?=[A-Z])", "_", atari_game(cfg)).lower()  # 'MsPacman' -> 'ms_pacman', its ROM name
    a, kwargs = cfg.atari, dict(cfg.kwargs)
    kwargs.pop("frameskip", None)
    kwargs.setdefault("repeat_action_probability", 0.25)  # ale-py's v5 default, as make_env's envs have
    if cfg.max_episode_steps:
        kwargs["max_num_frames_per_episode"] = cfg.max_episode_steps * a.frame_skip
    episodic = training and a.episodic_life
    try:
        # life_loss_info: a lost life is a terminated step but the game goes on (its episodic_life restarts
        # the game); rewards come unclipped, so whole-game returns can be reported and clipping done here.
        venv = AtariVectorEnv(
            game,
            cfg.num_envs,
            autoreset_mode="SameStep",
            img_height=a.screen_size,
            img_width=a.screen_size,
            grayscale=a.grayscale,
            stack_num=a.frame_stack,
            frameskip=a.frame_skip,
            noop_max=a.noop_max,
            maxpool=True,
            use_fire_reset=False,
            episodic_life=False,
            life_loss_info=episodic,
            reward_clipping=False,
            **kwargs,
        )
    except Exception as exc:  # unknown games and options arrive as assorted exception types
        raise EnvBuildError(
            f"ale-py's AtariVectorEnv could not make {game!r} with {kwargs}: {type(exc).__name__}: {exc}"
        ) from exc
    return check_spaces(AleVector(venv, clip_rewards=training and a.clip_rewards), cfg)


class AleVector:
    """AtariVectorEnv (SAME_STEP) with sign-clipped rewards and whole games in final_info. A game is over on a
    truncated step, or a terminated one whose reported lives did not drop (the new game's, or a game
    without lives); a terminated step that cost a life only ends the learner's episode."""

    def __init__(self, venv: Any, clip_rewards: bool):
        self.venv, self.clip_rewards = venv, clip_rewards
        self.num_envs = venv.num_envs
        self.single_observation_space = venv.single_observation_space
        self.single_action_space = venv.single_action_space
        self.games = GameTally(self.num_envs)
        self.lives = np.zeros(self.num_envs, np.int64)

    def reset(self, seed: int | None = None) -> tuple[np.ndarray, dict[str, Any]]:
        obs, info = self.venv.reset(seed=seed)
        self.lives = np.asarray(info["lives"], np.int64)
        return obs, {}

    def step(self, actions: np.ndarray) -> Step:
        obs, rewards, terminated, truncated, info = self.venv.step(np.asarray(actions, np.int64))
        lives = np.asarray(info["lives"], np.int64)
        over = truncated | (terminated & (lives >= self.lives))
        self.lives = lives
        raw = np.asarray(rewards, np.float64)
        out = {"final_info": self.games.step(raw, over)}
        if np.any(terminated | truncated):
            out["final_obs"], out["_final_obs"] = info["final_obs"], terminated | truncated
        return obs, np.sign(raw) if self.clip_rewards else raw, terminated, truncated, out

    def close(self) -> None:
        self.venv.close()
