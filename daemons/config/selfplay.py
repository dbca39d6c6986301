"""[selfplay] against the rest of the config: who learns, whose pools they draw from, which actor plays which."""

from __future__ import annotations

from tandem.daemons.config.policies import policy_config
from tandem.daemons.settings.agents import policy_names
from tandem.daemons.settings.fields import ConfigError
from tandem.daemons.settings.schema import RunConfig


def league_members(config: RunConfig) -> list[str]:
    """The policies that learn by self-play: the league's members in config order, else the one learning policy."""
    if config.selfplay.league:
        return list(config.selfplay.league)
    return [config.selfplay.policy or policy_names(config)[0]]


def learning_policy(config: RunConfig) -> str:
    """The policy the evaluator measures: `selfplay.policy`, else the first league member (or the run's first)."""
    return config.selfplay.policy or league_members(config)[0]


def actor_member(config: RunConfig, index: int) -> str:
    """The learning policy actor `index` plays: league members take `actors` actors each, in config order."""
    league = config.selfplay.league
    if not league:
        return learning_policy(config)
    seen = 0
    for name, member in league.items():
        seen += member.actors
        if index < seen:
            return name
    return list(league)[-1]  # an actor beyond the split (check_selfplay refuses such configs)


def opponent_pools(config: RunConfig, policy: str) -> list[str]:
    """The policies whose pools `policy`'s opponents are drawn from (its own without a league entry saying else)."""
    member = config.selfplay.league.get(policy)
    return list(dict.fromkeys(member.opponents_from)) if member and member.opponents_from else [policy]


def draw_rule(config: RunConfig, policy: str) -> str:
    member = config.selfplay.league.get(policy)
    return member.opponents if member and member.opponents else config.selfplay.opponents


def check_selfplay(config: RunConfig) -> None:
    """ConfigError naming the key when self-play cannot run as configured (checked when a config is loaded)."""
    if not config.selfplay.enabled:
        return
    names = policy_names(config)
    league = config.selfplay.league
    for member in league:
        if member not in names:
            raise ConfigError(
                f"selfplay.league.{member}", f"no policy named {member!r}; the run's policies: {', '.join(names)}"
            )
    if config.selfplay.scripted_share > 0 and not config.selfplay.scripted_opponent:
        raise ConfigError(
            "selfplay.scripted_share",
            f"{config.selfplay.scripted_share:g} of the games against no one: set selfplay.scripted_opponent "
            "('random' or 'module:callable')",
        )
    policy = learning_policy(config)
    if policy not in names:
        raise ConfigError("selfplay.policy", f"no policy named {policy!r}; the run's policies: {', '.join(names)}")
    if league and policy not in league:
        raise ConfigError(
            "selfplay.policy", f"{policy!r} is not in the league; its members: {', '.join(league)} (or leave it empty)"
        )
    if league:
        wanted = sum(m.actors for m in league.values())
        if wanted != config.actors.count:
            split = ", ".join(f"{n}: {m.actors}" for n, m in league.items())
            raise ConfigError(
                "actors.count",
                f"the league's members take {wanted} actors ({split}) but actors.count is {config.actors.count}: "
                "make them equal",
            )
    for member in league_members(config):
        where = f"selfplay.league.{member}.opponents_from" if league else "selfplay"
        # every member keeps a pool: its ratings live there, and the league's others may draw from it
        for source in dict.fromkeys([member, *opponent_pools(config, member)]):
            if source not in names:
                raise ConfigError(where, f"no policy named {source!r}; the run's policies: {', '.join(names)}")
            pconf = policy_config(config, source)
            at = f"policies.{source}." if config.policies else ""
            if pconf.learner.pool_every <= 0:
                why = "learns by self-play" if source == member else f"draws opponents from the pool of {source!r}"
                raise ConfigError(
                    f"{at}learner.pool_every",
                    f"policy {member!r} {why}: set {at}learner.pool_every > 0 (every how many versions one is kept)",
                )
        for source in dict.fromkeys([member, *opponent_pools(config, member)]):
            if policy_config(config, source).model.core != "none":
                at = f"policies.{source}." if config.policies else ""
                raise ConfigError(
                    f"{at}model.core", "self-play opponents are feed-forward for now: set model.core = 'none'"
                )
