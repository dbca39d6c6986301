"""Which policies a run has and which plays each agent: names and patterns only, no algorithm (envs ask this;
merging a policy's overrides into its config, which needs its algorithm, is daemons/config/policies.py)."""

from __future__ import annotations

import fnmatch

from tandem.daemons.settings.fields import ConfigError
from tandem.daemons.settings.schema import PolicySection, RunConfig

DEFAULT_POLICY = "default"
PORT_KEYS = ("transitions_port", "weights_port", "snapshot_port")


def policy_names(config: RunConfig) -> list[str]:
    """The run's policies in config order; a run without [policies] has the one policy 'default'."""
    return list(config.policies) or [DEFAULT_POLICY]


def policy_section(config: RunConfig, name: str) -> PolicySection:
    if not config.policies and name == DEFAULT_POLICY:
        return PolicySection()
    if name not in config.policies:
        raise ConfigError(
            "policies", f"no policy named {name!r}; the run's policies: {', '.join(policy_names(config))}"
        )
    return config.policies[name]


def policy_of(config: RunConfig, agent: str, first: str | None = None) -> str | None:
    """The first policy whose agent patterns match `agent` (policy `first` tried before the others), or None."""
    names = policy_names(config)
    for name in [first, *names] if first in names else names:
        if any(fnmatch.fnmatchcase(agent, pattern) for pattern in policy_section(config, name).agents):
            return name
    return None


def assign_agents(config: RunConfig, agents: list[str], first: str | None = None) -> dict[str, str]:
    """agent -> policy for every agent of an env; ConfigError naming an agent no policy plays. `first`: a policy
    whose patterns are tried before the others' (a league member takes every seat it matches in its actors)."""
    table = {}
    for agent in agents:
        policy = policy_of(config, agent, first)
        if policy is None:
            patterns = "; ".join(f"{n}: {policy_section(config, n).agents}" for n in policy_names(config))
            raise ConfigError("policies", f"no policy plays agent {agent!r} (patterns: {patterns})")
        table[agent] = policy
    return table


def port_table(config: RunConfig) -> dict[str, int]:
    """Every configured port by its dotted key (for the 'two sockets on one port' check)."""
    t = config.transport
    table = {f"transport.{k}": getattr(t, k) for k in ("control_port", *PORT_KEYS)}
    for name, section in config.policies.items():
        table.update({f"policies.{name}.{k}": getattr(section, k) for k in PORT_KEYS})
    return table
