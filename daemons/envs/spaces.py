"""Each policy's observation and action space, and the adapter that turns an agent's observation into one array."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np

from tandem.daemons.settings.agents import assign_agents, policy_names
from tandem.daemons.settings.schema import RunConfig


class ObsAdapter:
    """Box observations pass as they are; Dict(observation=Box, action_mask=...) becomes float32
    [observation..., action_mask...], so the mask travels inside the observation to replay and to the
    learner, which masks illegal next actions with the same last `mask_size` entries."""

    def __init__(self, space: gym.Space, who: str):
        self.mask_size = 0
        if isinstance(space, gym.spaces.Box):
            self.space = space
        elif isinstance(space, gym.spaces.Dict) and set(space.spaces) == {"observation", "action_mask"}:
            inner, mask = space["observation"], space["action_mask"]
            if not isinstance(inner, gym.spaces.Box) or not isinstance(mask, (gym.spaces.Box, gym.spaces.MultiBinary)):
                raise ValueError(f"{who}: observation and action_mask must be Box spaces, got {space}")
            self.mask_size = int(np.prod(mask.shape))
            size = int(np.prod(inner.shape)) + self.mask_size
            self.space = gym.spaces.Box(-np.inf, np.inf, (size,), np.float32)
        else:
            raise ValueError(
                f"{who}: observation space {space} is not supported "
                "(a Box, or a Dict of 'observation' and 'action_mask')"
            )
        self.dtype = np.dtype(self.space.dtype or np.float32)

    def __call__(self, obs: Any) -> np.ndarray:
        if self.mask_size:
            return np.concatenate(
                [
                    np.asarray(obs["observation"], np.float32).reshape(-1),
                    np.asarray(obs["action_mask"], np.float32).reshape(-1),
                ]
            )
        return np.asarray(obs, dtype=self.dtype)


def env_actions(space: gym.Space, actions: np.ndarray) -> np.ndarray:
    """Actions as an env takes them: a float Box's clipped to its bounds (a Gaussian policy's sample is not;
    the unclipped sample is what travels, so its log-probability stays exact), anything else unchanged."""
    if isinstance(space, gym.spaces.Box) and np.issubdtype(space.dtype, np.floating):
        return np.clip(actions, space.low, space.high).astype(space.dtype, copy=False)
    return actions


@dataclass(frozen=True)
class PolicySpaces:
    """What a policy's network sees and does, the same for every agent it plays."""

    agents: tuple[str, ...]
    observation_space: gym.Space  # after the adapter
    action_space: gym.Space
    mask_size: int  # > 0: the observation ends with this many action-mask entries


def policy_spaces(config: RunConfig, world: Any, first: str | None = None) -> dict[str, PolicySpaces]:
    """policy -> its spaces, from one PettingZoo env; ValueError when agents of one policy differ. `first`: the
    policy whose agent patterns are tried first (a self-play league's member, which plays every seat it matches;
    the league's other members then play none here, which is theirs to do in their own actors)."""
    agents = list(world.possible_agents)
    table = assign_agents(config, agents, first)
    members = set(config.selfplay.league) if config.selfplay.enabled else set()
    if first in members and first not in table.values():
        raise ValueError(
            f"league member {first!r} plays none of the env's agents ({', '.join(agents)}); fix its agents patterns"
        )
    idle = [p for p in policy_names(config) if p not in table.values() and p not in members]
    if idle:
        raise ValueError(
            f"policy {idle[0]!r} plays none of the env's agents ({', '.join(agents)}); "
            "fix its agents patterns or remove it"
        )
    out = {}
    for policy in dict.fromkeys(table.values()):
        mine = [a for a in agents if table[a] == policy]
        first = mine[0]
        obs_space, act_space = world.observation_space(first), world.action_space(first)
        for other in mine[1:]:
            if world.observation_space(other) != obs_space or world.action_space(other) != act_space:
                raise ValueError(
                    f"policy {policy!r} plays agents {first!r} and {other!r}, whose spaces differ "
                    f"({obs_space}, {act_space} vs {world.observation_space(other)}, "
                    f"{world.action_space(other)}); give them separate policies"
                )
        adapter = ObsAdapter(obs_space, f"agent {first!r}")
        out[policy] = PolicySpaces(tuple(mine), adapter.space, act_space, adapter.mask_size)
    return out
