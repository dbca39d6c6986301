"""Policies of a run: the run config each policy's learner and actors see (its overrides merged, checked against its
algorithm); which agents each plays is daemons/settings/agents.py."""

from __future__ import annotations

import dataclasses
from dataclasses import replace

from tandem.daemons.config.algorithm import algorithm_spec, build_algorithm, switched_defaults
from tandem.daemons.settings.agents import PORT_KEYS, policy_section
from tandem.daemons.settings.fields import ConfigError, build
from tandem.daemons.settings.schema import LearnerSection, ModelSection, RunConfig

OVERRIDABLE = {"model": ModelSection, "learner": LearnerSection}  # and [algorithm], whose class is its algorithm's


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
