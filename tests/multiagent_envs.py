"""Small PettingZoo envs whose observations say who acts, when and in which episode (for turn-order tests).

Observation of an agent: [agent index, world turn, episode, agent's own turns so far], float32.
Reward of an action: the action itself (0 or 1), to the agent that took it.
Agent a_1 leaves (terminates) at its `leave_at`-th turn of every episode; the others are truncated after
`cycles` world turns.
"""

from __future__ import annotations

import os

import gymnasium as gym
import numpy as np
from pettingzoo import AECEnv, ParallelEnv

AGENTS = ("a_0", "a_1", "b_0")
INDEX = {agent: i for i, agent in enumerate(AGENTS)}
OBS_SPACE = gym.spaces.Box(0.0, 1e9, (4,), np.float32)
ACTION_SPACE = gym.spaces.Discrete(2)


class ThreeAgents:
    """What both forms share: the agents, their spaces, the episode count and an agent's observation."""

    def __init__(self, cycles: int, leave_at: int):
        super().__init__()
        self.possible_agents = list(AGENTS)
        self.cycles, self.leave_at = cycles, leave_at
        self.episode = -1

    def observation_space(self, agent):
        return OBS_SPACE

    def action_space(self, agent):
        return ACTION_SPACE

    def _obs(self, agent):
        return np.array([INDEX[agent], self.turn, self.episode, self.own_turns[agent]], np.float32)


class TurnAEC(ThreeAgents, AECEnv):
    """Three agents taking turns in the order a_0, a_1, b_0 (a_1 dropping out), as AEC."""

    metadata = {"name": "turn_aec_v0", "is_parallelizable": False}

    def __init__(self, cycles: int = 12, leave_at: int = 3):
        super().__init__(cycles, leave_at)

    def reset(self, seed=None, options=None):
        self.agents = list(self.possible_agents)
        self.rewards = {a: 0.0 for a in self.agents}
        self._cumulative_rewards = {a: 0.0 for a in self.agents}
        self.terminations = {a: False for a in self.agents}
        self.truncations = {a: False for a in self.agents}
        self.infos = {a: {} for a in self.agents}
        self.turn, self.episode = 0, self.episode + 1
        self.own_turns = {a: 0 for a in self.agents}
        self.agent_selection = self.agents[0]

    def observe(self, agent):
        return self._obs(agent)

    def step(self, action):
        agent = self.agent_selection
        if self.terminations[agent] or self.truncations[agent]:
            self._was_dead_step(action)
            return
        self._cumulative_rewards[agent] = 0.0
        self.rewards = {a: 0.0 for a in self.agents}
        self.rewards[agent] = float(action)
        self.own_turns[agent] += 1
        self.turn += 1
        if agent == "a_1" and self.own_turns[agent] >= self.leave_at:
            self.terminations[agent] = True
        if self.turn >= self.cycles:
            self.truncations = {a: True for a in self.agents}
        order = self.agents
        self.agent_selection = order[(order.index(agent) + 1) % len(order)]
        self._accumulate_rewards()
        self._deads_step_first()


class TurnParallel(ThreeAgents, ParallelEnv):
    """The same three agents acting together each step, as a parallel env."""

    metadata = {"name": "turn_parallel_v0"}

    def __init__(self, cycles: int = 6, leave_at: int = 3):
        super().__init__(cycles, leave_at)

    def reset(self, seed=None, options=None):
        self.agents = list(self.possible_agents)
        self.turn, self.episode = 0, self.episode + 1
        self.own_turns = {a: 0 for a in self.agents}
        return {a: self._obs(a) for a in self.agents}, {a: {} for a in self.agents}

    def step(self, actions):
        self.turn += 1
        for agent in actions:
            self.own_turns[agent] += 1
        rewards = {a: float(actions[a]) for a in actions}
        terms = {a: a == "a_1" and self.own_turns[a] >= self.leave_at for a in actions}
        truncs = {a: self.turn >= self.cycles for a in actions}
        obs = {a: self._obs(a) for a in actions}
        self.agents = [a for a in self.agents if not (terms[a] or truncs[a])]
        return obs, rewards, terms, truncs, {a: {} for a in actions}


def turn_aec(**kwargs) -> TurnAEC:
    return TurnAEC(**kwargs)


def turn_parallel(**kwargs) -> TurnParallel:
    return TurnParallel(**kwargs)


def unannotated_aec(**kwargs):
    return TurnAEC(**kwargs)


def turn_aec_failing_in(daemon: str, marker: str, **kwargs) -> TurnAEC:
    """turn_aec everywhere; in the daemon named `daemon` (e.g. learner-beta) only its first build works (it
    leaves `marker`), so once that process dies every restart fails."""
    if os.environ.get("TANDEM_DAEMON") == daemon:
        if os.path.exists(marker):
            raise RuntimeError(f"this world cannot be built again in {daemon} (test env)")
        open(marker, "w").close()
    return TurnAEC(**kwargs)
