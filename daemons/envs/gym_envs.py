"""Builds environments from config and steps K of them together, resetting each the moment its episode ends."""

from __future__ import annotations

import importlib
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym
import numpy as np

from tandem.daemons.envs.atari import GAME_LENGTH, GAME_RETURN, atari_kwargs, register_ale, wrap_atari
from tandem.daemons.envs.dict_obs import DictObs, is_dict_space
from tandem.daemons.envs.entity_env import EntityEnv
from tandem.daemons.envs.entity_spaces import is_entity_declaration
from tandem.daemons.envs.pixels import image_problem, wrap_pixels
from tandem.daemons.envs.spaces import env_actions
from tandem.daemons.settings.plugins import import_callable, not_found_hint
from tandem.daemons.settings.schema import EnvSection
from tandem.daemons.settings.setup_errors import SetupError
from tandem.protocol import keyed


class EnvBuildError(RuntimeError):
    """The env could not be built; the message says which env id or callable and why."""


class EnvSetupError(EnvBuildError, SetupError):
    """The env cannot be built from this config at any try: an unknown id, a module that does not import, a
    factory that returns something other than an env (so no restart is tried: see SetupError)."""


# gymnasium's errors for an id it cannot resolve: the same at every start
UNKNOWN_ID_ERRORS = (
    gym.error.NameNotFound,
    gym.error.NamespaceNotFound,
    gym.error.VersionNotFound,
    gym.error.DeprecatedEnv,
    gym.error.UnregisteredEnv,
)


def resolve_callable(spec: str) -> Callable[..., Any]:
    """'package.module:attr' -> the object; EnvBuildError naming what is missing."""
    try:
        return import_callable(spec, "env.id")
    except ValueError as exc:
        raise EnvSetupError(str(exc)) from exc


def has_attribute(spec: str) -> bool:
    """True when 'module:attr' names an attribute of an importable module (then it is our callable form)."""
    module_name, _, attr = spec.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise EnvSetupError(
            f"env.id {spec!r}: cannot import module {module_name!r} ({exc}){not_found_hint(exc, module_name)}"
        ) from exc
    return hasattr(module, attr.split(".")[0])


def pettingzoo_hint(env: object) -> str:
    """A hint to set env.api when a factory returned a PettingZoo env that env_api could not foresee."""
    kinds = [c.__name__ for c in type(env).__mro__]
    if "AECEnv" in kinds:
        return "; it is a PettingZoo AEC env: set env.api = 'aec' (or annotate the factory's return type)"
    if "ParallelEnv" in kinds:
        return "; it is a PettingZoo parallel env: set env.api = 'parallel' (or annotate the factory's return type)"
    return ""


ENTITY_GYM_PREFIX = "entitygym/"  # env.id of an EntityGym environment (tandem.daemons.envs.entity_gym_env)


def entity_gym_env(name: str, kwargs: dict) -> gym.Env:
    """An EntityGym environment; a missing entity-gym or an unknown name is a setup mistake, named."""
    from tandem.daemons.envs.entity_gym_env import EntityGymEnv

    try:
        return EntityGymEnv(name, **kwargs)
    except (ImportError, ValueError, AttributeError) as exc:
        raise EnvSetupError(str(exc)) from exc


def make_env(cfg: EnvSection, training: bool = True) -> gym.Env:
    """One env from `env.id` (a gymnasium id, or 'module:callable') and `env.kwargs`, with the Atari
    preprocessing of `env.atari` or the image preprocessing of `env.pixels` when enabled (`training` False:
    the evaluator's whole games, true rewards)."""
    atari = cfg.atari.enabled
    try:
        kwargs = cfg.kwargs
        if atari:
            if not cfg.id.startswith("ALE/") and ":" not in cfg.id:
                raise EnvSetupError(f"env.atari is enabled but {cfg.id!r} is not an ALE env (use an 'ALE/Game-v5' id)")
            register_ale()
            kwargs = atari_kwargs(kwargs)
        if cfg.id.startswith(ENTITY_GYM_PREFIX):
            env = entity_gym_env(cfg.id[len(ENTITY_GYM_PREFIX) :], kwargs)
        elif ":" in cfg.id and has_attribute(cfg.id):
            env = resolve_callable(cfg.id)(**kwargs)
        else:  # a gymnasium id, possibly gymnasium's own 'module:EnvId-v0' form
            env = gym.make(cfg.id, **kwargs)
        if atari:
            if not hasattr(env.unwrapped, "ale"):
                raise EnvSetupError("env.atari is enabled but the env is not an ALE env (use an 'ALE/Game-v5' id)")
            return wrap_atari(env, cfg.atari, training, cfg.max_episode_steps)
    except EnvBuildError:
        raise
    except UNKNOWN_ID_ERRORS as exc:
        raise EnvSetupError(f"env.id {cfg.id!r}: {exc}") from exc
    except Exception as exc:  # a user's env may raise anything while being built
        raise EnvBuildError(f"building env {cfg.id!r} failed: {type(exc).__name__}: {exc}") from exc
    if not isinstance(env, gym.Env):
        raise EnvSetupError(f"{cfg.id!r} returned {type(env).__name__}, not a gymnasium.Env{pettingzoo_hint(env)}")
    if cfg.pixels.enabled:
        return pixel_env(env, cfg, training)
    if is_entity_declaration(env):  # padded to env.max_entities, actions as slots
        try:
            env = EntityEnv(env, cfg.max_entities)
        except ValueError as exc:
            close_all([env])
            raise EnvSetupError(f"env.id {cfg.id!r}: {exc}") from exc
    if cfg.max_episode_steps:
        env = gym.wrappers.TimeLimit(env, max_episode_steps=cfg.max_episode_steps)
    return env


def pixel_env(env: gym.Env, cfg: EnvSection, training: bool) -> gym.Env:
    """`env` in `[env.pixels]`' wrappers; an observation that is no image is a setup mistake, named by its key
    (image_problem checks what gymnasium's wrappers would refuse, so wrapping itself does not fail)."""
    problem = image_problem(env.observation_space, cfg.pixels)
    if problem:
        close_all([env])  # a native emulator holds its resources until closed
        raise EnvSetupError(f"{problem} (env.id {cfg.id!r})")
    return wrap_pixels(env, cfg.pixels, training, cfg.max_episode_steps)


@dataclass
class StepResult:
    """What K envs did in one step; `final_obs` has one row per truncated env (in env order)."""

    obs: np.ndarray  # [K, *obs_shape]: next observation, already the reset one where an episode ended
    rewards: np.ndarray  # [K] float32
    terminated: np.ndarray  # [K] bool
    truncated: np.ndarray  # [K] bool
    final_obs: np.ndarray  # [num truncated, *obs_shape]
    episodes: list[tuple[float, int]] = field(default_factory=list)  # (return, length) of those that ended


class EnvGroup:
    """K envs stepped in one call; an episode that ends is reset in the same step (one obs per step)."""

    def __init__(self, envs: list[gym.Env], seed: int, return_window: int = 100, games: bool = False):
        # games: the envs report whole games in info (Atari wrappers), where an episode that ends for the
        # learner (a lost life) is not a game; returns and episode counts are then the games'.
        self.envs, self.games = envs, games
        self.observation_space = envs[0].observation_space
        self.action_space = envs[0].action_space
        self.obs_dtype = np.dtype(self.observation_space.dtype or np.float32)
        # a Dict observation travels as one array per key (PROTOCOL.md 2.1.4)
        self.as_dict = DictObs(self.observation_space) if is_dict_space(self.observation_space) else None
        self.episode_returns = np.zeros(len(envs), np.float64)
        self.episode_lengths = np.zeros(len(envs), np.int64)
        self.finished: deque[tuple[float, int]] = deque(maxlen=return_window)  # (return, length) of recent episodes
        self.episodes = 0
        self.env_steps = 0
        self.obs = keyed.stack([self._as_obs(env.reset(seed=seed + k)[0]) for k, env in enumerate(envs)])

    def __len__(self) -> int:
        return len(self.envs)

    def _as_obs(self, obs: Any) -> Any:
        if self.as_dict is not None:
            return self.as_dict(obs)
        return np.asarray(obs, dtype=self.obs_dtype)

    def step(self, actions: np.ndarray) -> StepResult:
        count = len(self.envs)
        rows = []
        rewards = np.zeros(count, np.float32)
        terminated = np.zeros(count, bool)
        truncated = np.zeros(count, bool)
        finals, episodes = [], []
        actions = env_actions(self.action_space, np.asarray(actions))
        for k, env in enumerate(self.envs):
            obs, reward, term, trunc, info = env.step(actions[k].item() if actions[k].ndim == 0 else actions[k])
            rewards[k], terminated[k], truncated[k] = reward, term, trunc
            self.episode_returns[k] += reward
            self.episode_lengths[k] += 1
            if self.games and GAME_RETURN in info:
                episodes.append((float(info[GAME_RETURN]), int(info[GAME_LENGTH])))
            if term or trunc:
                if trunc:
                    finals.append(self._as_obs(obs))
                if not self.games:
                    episodes.append((float(self.episode_returns[k]), int(self.episode_lengths[k])))
                self.episode_returns[k] = 0.0
                self.episode_lengths[k] = 0
                obs, _ = env.reset()
            rows.append(self._as_obs(obs))
        next_obs = keyed.stack(rows)
        self.env_steps += count
        self.episodes += len(episodes)
        self.finished.extend(episodes)
        self.obs = next_obs
        final_obs = keyed.stack(finals) if finals else keyed.empty_rows(self.obs, 0)
        return StepResult(next_obs, rewards, terminated, truncated, final_obs, episodes)

    def recent_mean_return(self) -> float | None:
        return float(np.mean([r for r, _ in self.finished])) if self.finished else None

    def close(self) -> None:
        close_all(self.envs)


def build_each(count: int, build_one: Callable[[], Any], enter_stage: Callable[[str], None]) -> list[Any]:
    """`count` envs (or worlds), each built in its own stage `build_env k/count` (a constructor may hang);
    on any failure the ones already built are closed."""
    envs: list[Any] = []
    try:
        for k in range(count):
            enter_stage(f"build_env {k + 1}/{count}")
            envs.append(build_one())
    except BaseException:
        close_all(envs)
        raise
    return envs


def close_all(envs: list[Any]) -> None:
    """Close every env; closing must not hide the reason we are stopping."""
    for env in envs:
        try:
            env.close()
        except Exception:  # a user's env may raise anything while closing
            pass
