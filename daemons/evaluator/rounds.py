"""One evaluation round: every env plays a fixed number of episodes with the current weights, greedily.

A round player exposes `spaces` and `play_round(choose, seed, stopped, tick) -> {agent: [returns]}` (agent
None for a gymnasium env), or None when stopped midway; the evaluator daemon is the same for both.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from tandem.daemons.acting.stepping import WorldStepping
from tandem.daemons.config.selfplay import learning_policy
from tandem.daemons.envs.dict_obs import DictObs, is_dict_space
from tandem.daemons.envs.fixed_players import Opponent, fixed_player
from tandem.daemons.envs.gym_envs import close_all
from tandem.daemons.envs.rollout import Chooser
from tandem.daemons.envs.seats import SelfPlaySeats
from tandem.daemons.envs.spaces import PolicySpaces, env_actions
from tandem.daemons.envs.worlds import MULTI_AGENT_APIS
from tandem.daemons.settings.agents import DEFAULT_POLICY
from tandem.daemons.settings.schema import RunConfig
from tandem.protocol import keyed

ROUND_SEED_OFFSET = 77_000  # an evaluation round's resets are seeded apart from the actors' (run.seed + actor index)
POLICY_SEED_OFFSET = 999  # and its policies' own generators apart from both


def round_seed(config: RunConfig, rounds_played: int) -> int:
    """The seed of the evaluator's round after `rounds_played` rounds: each round's envs reset from seeds of their
    own, the same in an async run and in a serial one."""
    return config.run.seed + ROUND_SEED_OFFSET + rounds_played * min(config.eval.num_envs, config.eval.window_episodes)


def evaluator_policy_seed(config: RunConfig, index: int) -> int:
    """The seed of the evaluator's policy `index` (its n-th followed policy)."""
    return config.run.seed + POLICY_SEED_OFFSET + index


Returns = dict[str | None, list[float]]


def episode_quotas(episodes: int, num_envs: int) -> np.ndarray:
    """Episodes each env plays in a round; fixed up front so short episodes are not over-counted."""
    quotas = np.full(num_envs, episodes // num_envs)
    quotas[: episodes % num_envs] += 1
    return quotas


class GymRounds:
    """K gymnasium envs; each plays its quota of the round's episodes from a seeded reset."""

    def __init__(self, envs: list[Any], window_episodes: int, state_size: int = 0):
        self.envs, self.window_episodes = envs, window_episodes
        self.spaces = {DEFAULT_POLICY: PolicySpaces((), envs[0].observation_space, envs[0].action_space, 0)}
        self.state_size = state_size  # a recurrent policy's state per env (0: feed-forward)
        space = envs[0].observation_space
        self.as_obs = DictObs(space) if is_dict_space(space) else np.asarray  # a Dict one: an array per key

    def play_round(
        self, choose: Chooser, seed: int, stopped: Callable[[], bool], tick: Callable[[], Any]
    ) -> Returns | None:
        envs = self.envs
        quotas = episode_quotas(self.window_episodes, len(envs))
        obs = [self.as_obs(env.reset(seed=seed + k)[0]) for k, env in enumerate(envs)]
        running = np.zeros(len(envs))
        returns: list[float] = []
        states = np.zeros((len(envs), self.state_size), np.float32) if self.state_size else None
        while (active := np.flatnonzero(quotas > 0)).size:
            if stopped():
                return None
            batch = keyed.stack([obs[k] for k in active])
            if states is None:
                actions, _ = choose(DEFAULT_POLICY, batch, active)
            else:  # the active envs' states, advanced by the choice and put back
                state = states[active]
                actions, _ = choose(DEFAULT_POLICY, batch, active, state=state)
                states[active] = state
            actions = env_actions(self.spaces[DEFAULT_POLICY].action_space, np.asarray(actions))
            for action, k in zip(actions, active):
                ob, reward, terminated, truncated, _ = envs[k].step(action.item() if np.ndim(action) == 0 else action)
                running[k] += reward
                if terminated or truncated:
                    returns.append(float(running[k]))
                    running[k] = 0.0
                    quotas[k] -= 1
                    ob, _ = envs[k].reset()
                    if states is not None:
                        states[k] = 0.0
                obs[k] = self.as_obs(ob)
            tick()
        return {None: returns}

    def close(self) -> None:
        close_all(self.envs)


class WorldRounds:
    """K PettingZoo worlds, all reset at the round's start; the round is `window_episodes` world episodes."""

    def __init__(self, worlds: list[Any], api: str, config: RunConfig, seed: int, opponent: Opponent | None = None):
        self.window_episodes = config.eval.window_episodes
        first = learning_policy(config) if config.selfplay.enabled else None
        self.stepping = WorldStepping(worlds, api, config, "evaluator", seed, incarnation=0, record=False, first=first)
        self.spaces = self.stepping.spaces
        self.scores: list[float] | None = None  # self-play: the learning side's score in each game of the round
        if config.selfplay.enabled or opponent is not None:
            self.seat_against_fixed(config, seed, opponent)

    def seat_against_fixed(self, config: RunConfig, seed: int, opponent: Opponent | None) -> None:
        """Self-play's evaluation: the learning policy in one seat, `opponent` (by default
        `selfplay.eval_opponent`) in the others."""
        policy = learning_policy(config)
        spaces = self.spaces[policy]
        actions = int(getattr(spaces.action_space, "n", 0))
        if opponent is None:
            opponent = fixed_player(config.selfplay.eval_opponent, spaces.mask_size, actions, seed)
        self.scores = []
        seats = SelfPlaySeats(
            policy, len(self.stepping), seed, lambda: None, lambda _, score: self.scores.append(score)
        )
        self.stepping.rollout.seat(seats, lambda _, obs: opponent(obs))

    def play_round(
        self, choose: Chooser, seed: int, stopped: Callable[[], bool], tick: Callable[[], Any]
    ) -> Returns | None:
        stepping = self.stepping
        stepping.restart(seed)
        target = stepping.episodes + self.window_episodes
        returns: Returns = {}
        if self.scores is not None:
            self.scores.clear()
        while stepping.episodes < target:
            if stopped():
                return None
            stepping.tick(choose, {})
            for agent, ret, _ in stepping.new_episodes:
                returns.setdefault(agent, []).append(ret)
            stepping.new_episodes.clear()
            tick()
        if self.scores is not None:  # the return of a self-play round is the win rate against the fixed opponent
            return {None: list(self.scores)}
        return returns

    def close(self) -> None:
        self.stepping.close()


def make_rounds(
    envs: list[Any], api: str, config: RunConfig, opponent: Opponent | None = None
) -> GymRounds | WorldRounds:
    """The evaluator's rounds; `opponent` (a multi-agent world's) plays every seat but the learning policy's."""
    if api in MULTI_AGENT_APIS:
        return WorldRounds(envs, api, config, seed=config.run.seed + ROUND_SEED_OFFSET, opponent=opponent)
    return GymRounds(envs, config.eval.window_episodes, config.model.core_state_size())


def round_counters(
    returns: Returns, spaces: dict[str, PolicySpaces], versions: dict[str, int], env_steps: dict[str, int] | None = None
) -> dict[str, float]:
    """What a finished round reports: the mean return (of each agent's mean), per agent and per policy, and the env
    steps behind the versions it played (`eval_env_steps`, the fewest of any policy; absent when unknown)."""
    agent_means = {agent: float(np.mean(values)) for agent, values in returns.items() if values}
    everything = [r for values in returns.values() for r in values]
    counters = {
        "eval_return": float(np.mean(list(agent_means.values()))),
        "eval_version": min(versions.values()),
        "eval_return_min": float(np.min(everything)),
    }
    if env_steps and min(env_steps.values()) > 0:
        counters["eval_env_steps"] = min(env_steps.values())
    named = {agent: value for agent, value in agent_means.items() if agent is not None}
    if named:
        counters.update({f"eval_return.{agent}": value for agent, value in named.items()})
        for policy, s in spaces.items():
            mine = [named[a] for a in s.agents if a in named]
            if mine:
                counters[f"eval_return.{policy}"] = float(np.mean(mine))
            counters[f"eval_version.{policy}"] = versions[policy]
    return counters
