"""Policies of a run: which agents each plays, and the run config its learner and actors see for it."""

from __future__ import annotations

import dataclasses
import fnmatch
from dataclasses import replace

from tandem.daemons.config.algorithm import algorithm_spec, build_algorithm, switched_defaults
from tandem.daemons.config.fields import ConfigError, build
from tandem.daemons.config.schema import LearnerSection, ModelSection, PolicySection, RunConfig

DEFAULT_POLICY = "default"
PORT_KEYS = ("transitions_port", "weights_port", "snapshot_port")
OVERRIDABLE = {"model": ModelSection, "learner": LearnerSection}  # and [algorithm], whose class is its algorithm's


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


def policy_config(config: RunConfig, name: str) -> RunConfig:
    """The config as policy `name`'s learner sees it: its overrides merged in, its own learner ports."""
    section = policy_section(config, name)
    merged = {}
    overrides, run_name = section.algorithm, config.algorithm.name
    # A policy with an algorithm of its own starts from that algorithm's defaults, not the run's values.
    switched = overrides.get("name", run_name) != run_name
    if overrides:
        key = f"policies.{name}.algorithm"
        spec = (
            algorithm_spec(overrides["name"], f"{key}.name") if switched else algorithm_spec(run_name, "algorithm.name")
        )
        base = dataclasses.asdict(spec.section() if switched else config.algorithm)
        merged["algorithm"] = build_algorithm(spec, {**base, **overrides}, key)
    for part, cls in OVERRIDABLE.items():
        overrides = getattr(section, part)
        if overrides or (switched and part == "learner"):
            base = dataclasses.asdict(getattr(config, part))
            if switched:
                base.update(switched_defaults(spec, algorithm_spec(run_name, "algorithm.name"), part, cls))
            merged[part] = build(cls, {**base, **overrides}, f"policies.{name}.{part}")
    if config.policies:
        merged["transport"] = replace(config.transport, **{k: getattr(section, k) for k in PORT_KEYS})
    return replace(config, **merged) if merged else config


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


def check_policies(config: RunConfig) -> None:
    """Names usable in process names and paths; every override a valid key and value of its section."""
    for name, section in config.policies.items():
        if not name or any(c in name for c in "/\\ .") or name.startswith("-"):
            raise ConfigError(
                f"policies.{name}", "a policy name must be non-empty, without '/', '\\', '.', spaces or a leading '-'"
            )
        if not section.agents:
            raise ConfigError(f"policies.{name}.agents", "must name at least one agent or pattern")
        policy_config(config, name)  # raises ConfigError naming the bad override


def port_table(config: RunConfig) -> dict[str, int]:
    """Every configured port by its dotted key (for the 'two sockets on one port' check)."""
    t = config.transport
    table = {f"transport.{k}": getattr(t, k) for k in ("control_port", *PORT_KEYS)}
    for name, section in config.policies.items():
        table.update({f"policies.{name}.{k}": getattr(section, k) for k in PORT_KEYS})
    return table
