"""A policy's spaces learned from one env built only for that (a learner has no envs of its own)."""

from __future__ import annotations

from tandem.daemons.envs.gym_envs import make_env
from tandem.daemons.envs.spaces import PolicySpaces, policy_spaces
from tandem.daemons.envs.worlds import MULTI_AGENT_APIS, env_api, make_world
from tandem.daemons.settings.agents import DEFAULT_POLICY
from tandem.daemons.settings.schema import RunConfig


def probe_policy_spaces(config: RunConfig, policy: str = DEFAULT_POLICY) -> PolicySpaces:
    """`policy`'s observation and action spaces (and action-mask size), from one env it closes again."""
    api = env_api(config.env)
    if api in MULTI_AGENT_APIS:
        world = make_world(config.env, api)
        try:
            return policy_spaces(config, world, first=policy)[policy]
        finally:
            world.close()
    env = make_env(config.env)
    try:
        return PolicySpaces((), env.observation_space, env.action_space, 0)
    finally:
        env.close()
