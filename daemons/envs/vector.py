"""Pre-vectorised envs (`env.vector`): K envs in one vector env (gymnasium, EnvPool, ale-py), stepped in one call.

A vector env here always resets an env in the step that ends its episode (gymnasium's SAME_STEP autoreset):
the step returns the next episode's first observation and puts the last one in info['final_obs'], so
VectorGroup yields exactly what EnvGroup's own loop does (one observation per step, `final_obs` for
truncated steps) and GymStepping cannot tell them apart.
"""

from __future__ import annotations

import os
import signal
import time
from collections import deque
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np

from tandem.daemons.envs.atari import GAME_LENGTH, GAME_RETURN
from tandem.daemons.envs.dict_obs import is_dict_space, key_spaces
from tandem.daemons.envs.gym_envs import EnvBuildError, EnvSetupError, StepResult, make_env
from tandem.daemons.envs.native_vectors import make_ale, make_envpool
from tandem.daemons.envs.spaces import env_actions
from tandem.daemons.runtime import stack_dump
from tandem.daemons.runtime.signals import die_with_parent
from tandem.daemons.settings.schema import EnvSection

VECTOR_API = "vector"  # the api name an actor's stepping is built for when env.vector is set
FINAL_OBS, FINAL_INFO = "final_obs", "final_info"  # gymnasium's SAME_STEP info keys


class WorkerEnv:
    """Builds one env with make_env (env.atari, env.kwargs, max_episode_steps apply); picklable for async workers."""

    def __init__(self, cfg: EnvSection, training: bool):
        self.cfg, self.training, self.parent_pid = cfg, training, os.getpid()

    def __call__(self) -> gym.Env:
        if os.getpid() != self.parent_pid:
            become_worker()
        return make_env(self.cfg, self.training)


def become_worker() -> None:
    """In an AsyncVectorEnv worker (forked from the actor): die with the actor, even when it is SIGKILLed at a
    build deadline while this worker hangs in a constructor, and leave SIGINT to the actor, which closes us."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # the actor's StopFlag handler would keep us alive
    stack_dump.install_in_worker()  # the actor forwards the supervisor's SIGUSR1: where this worker is stuck
    die_with_parent()


def build_vector(cfg: EnvSection, seed: int, enter_stage: Callable[[str], None], training: bool = True) -> Any:
    """The vector env `env.vector` names, built in one supervised stage (a constructor, or a worker's, may hang:
    the supervisor then kills the actor, and async workers die with it)."""
    kind = cfg.vector
    enter_stage(f"build_env {kind} x{cfg.num_envs}")
    try:
        if kind == "envpool":
            return make_envpool(cfg, seed, training)
        if kind == "ale":
            return make_ale(cfg, training)
        env_fns = [WorkerEnv(cfg, training)] * cfg.num_envs
        mode = gym.vector.AutoresetMode.SAME_STEP
        if kind == "sync":
            return gym.vector.SyncVectorEnv(env_fns, copy=False, autoreset_mode=mode)
        if kind == "async":
            # fork: workers start at once, without re-importing; VectorGroup copies each step's obs out of
            # the shared memory before the next step overwrites it.
            return gym.vector.AsyncVectorEnv(env_fns, copy=False, context="fork", autoreset_mode=mode)
    except EnvBuildError:
        raise
    except Exception as exc:  # a user's env, or a worker building it, may raise anything
        raise EnvBuildError(
            f"building env.vector = {kind!r} of {cfg.id!r} failed: {type(exc).__name__}: {exc}"
        ) from exc
    raise EnvBuildError(f"env.vector {kind!r} is not one of 'sync', 'async', 'envpool', 'ale'")


class VectorGroup:
    """A SAME_STEP vector env behind EnvGroup's interface: K envs, one batched step call, episode bookkeeping."""

    def __init__(self, venv: Any, seed: int, return_window: int = 100, games: bool = False):
        # games: whole games are reported in final_info (Atari), as EnvGroup reads them from each env's info
        self.venv, self.games = venv, games
        self.observation_space = venv.single_observation_space
        if is_dict_space(self.observation_space):
            raise EnvSetupError(
                "env.vector steps envs observing one array; this env observes a Dict or Tuple "
                f"({', '.join(key_spaces(self.observation_space))}): set env.vector = '' (the actor's loop takes it)"
            )
        self.action_space = venv.single_action_space
        self.obs_dtype = np.dtype(self.observation_space.dtype or np.float32)
        self.count = venv.num_envs
        self.episode_returns = np.zeros(self.count, np.float64)
        self.episode_lengths = np.zeros(self.count, np.int64)
        self.finished: deque[tuple[float, int]] = deque(maxlen=return_window)
        self.episodes = 0
        self.env_steps = 0
        self.obs = self._as_obs(venv.reset(seed=seed)[0])

    def __len__(self) -> int:
        return self.count

    def _as_obs(self, obs: Any) -> np.ndarray:
        return np.array(obs, dtype=self.obs_dtype, copy=True)  # the vector env reuses its buffer next step

    def step(self, actions: np.ndarray) -> StepResult:
        actions = env_actions(self.action_space, np.asarray(actions))
        obs, rewards, terminated, truncated, info = self.venv.step(actions)
        rewards = np.asarray(rewards, np.float32)
        terminated, truncated = np.asarray(terminated, bool), np.asarray(truncated, bool)
        ended = np.flatnonzero(terminated | truncated)
        self.episode_returns += rewards
        self.episode_lengths += 1
        if self.games:
            episodes = game_episodes(info.get(FINAL_INFO, {}))
        else:
            episodes = [(float(self.episode_returns[k]), int(self.episode_lengths[k])) for k in ended]
        self.episode_returns[ended] = 0.0
        self.episode_lengths[ended] = 0
        self.env_steps += self.count
        self.episodes += len(episodes)
        self.finished.extend(episodes)
        self.obs = self._as_obs(obs)
        return StepResult(self.obs, rewards, terminated, truncated, self._final_obs(info, truncated), episodes)

    def _final_obs(self, info: dict[str, Any], truncated: np.ndarray) -> np.ndarray:
        """One row per truncated env, in env order (a terminated step's last obs is never bootstrapped from)."""
        rows = np.flatnonzero(truncated)
        if len(rows) and not np.all(info.get(f"_{FINAL_OBS}", np.zeros(self.count, bool))[rows]):
            raise RuntimeError("the vector env truncated an episode without info['final_obs'] (not SAME_STEP?)")
        finals = [np.asarray(info[FINAL_OBS][k], self.obs_dtype) for k in rows]
        return np.stack(finals) if finals else np.empty((0, *self.obs.shape[1:]), self.obs_dtype)

    def recent_mean_return(self) -> float | None:
        return float(np.mean([r for r, _ in self.finished])) if self.finished else None

    def close(self, timeout_s: float = 5.0) -> None:
        try:
            if isinstance(self.venv, gym.vector.AsyncVectorEnv):
                close_workers(self.venv, timeout_s)
            else:
                self.venv.close()
        except Exception:  # closing must not hide the reason we are stopping
            pass


def close_workers(venv: gym.vector.AsyncVectorEnv, timeout_s: float) -> None:
    """Ask every worker to close its env, wait up to `timeout_s` in all, then terminate whoever has not
    answered (gymnasium's own close waits for each answer without a timeout: a hung env would hang us)."""
    pipes = [p for p in venv.parent_pipes if p is not None and not p.closed]
    deadline = time.monotonic() + timeout_s
    try:
        for pipe in pipes:
            pipe.send(("close", None))
        for pipe in pipes:
            if pipe.poll(max(0.0, deadline - time.monotonic())):
                pipe.recv()
    except (OSError, EOFError):  # a worker already gone
        pass
    for process in venv.processes:  # a worker that answered is on its way out: let it exit, not be killed
        process.join(max(0.0, deadline - time.monotonic()))
    venv.close(terminate=True)  # terminates the workers still alive, closes the pipes, joins


def game_episodes(final_info: dict[str, Any]) -> list[tuple[float, int]]:
    """(return, length) of each game that ended this step, in env order, from the ended envs' last infos."""
    if GAME_RETURN not in final_info:
        return []
    mask = final_info.get(f"_{GAME_RETURN}", np.ones(len(final_info[GAME_RETURN]), bool))
    return [(float(final_info[GAME_RETURN][k]), int(final_info[GAME_LENGTH][k])) for k in np.flatnonzero(mask)]
