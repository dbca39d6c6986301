"""[selfplay] against the rest of the config: which policy learns, and what its learner must keep."""

from __future__ import annotations

from tandem.daemons.config.fields import ConfigError
from tandem.daemons.config.policies import policy_config, policy_names
from tandem.daemons.config.schema import RunConfig


def learning_policy(config: RunConfig) -> str:
    """The policy that plays against its own pooled versions: `selfplay.policy`, or the run's first."""
    return config.selfplay.policy or policy_names(config)[0]


def check_selfplay(config: RunConfig) -> None:
    """ConfigError naming the key when self-play cannot run as configured (checked when a config is loaded)."""
    if not config.selfplay.enabled:
        return
    names = policy_names(config)
    policy = learning_policy(config)
    if policy not in names:
        raise ConfigError("selfplay.policy", f"no policy named {policy!r}; the run's policies: {', '.join(names)}")
    pconf = policy_config(config, policy)
    where = f"policies.{policy}." if config.policies else ""
    if pconf.learner.pool_every <= 0:
        raise ConfigError(
            f"{where}learner.pool_every",
            f"self-play draws opponents from the pool of policy {policy!r}: set {where}learner.pool_every > 0 "
            "(every how many versions one is kept)",
        )
    if pconf.model.core != "none":
        raise ConfigError(f"{where}model.core", "self-play opponents are feed-forward for now: set model.core = 'none'")
