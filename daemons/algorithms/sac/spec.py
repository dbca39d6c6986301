"""SAC as the config and the daemons see it: its name, its [algorithm] keys and its spec (no torch here)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tandem.daemons.algorithms.spec import AlgorithmSpec
from tandem.daemons.settings.fields import ConfigError
from tandem.daemons.settings.schema import AlgorithmSection, ReplaySection, RunConfig, option, redefault

if TYPE_CHECKING:
    from tandem.daemons.algorithms.base import Feed
    from tandem.daemons.algorithms.sac.learner import SAC as SACLearner
    from tandem.daemons.algorithms.sac.learner import SACPolicy

NAME = "sac"


@dataclass
class SACSection(ReplaySection):
    """[algorithm] of sac: Soft Actor-Critic from replay, for bounded Box actions."""

    name: str = redefault(AlgorithmSection, "name", NAME)
    learning_rate: float = redefault(AlgorithmSection, "learning_rate", 3e-4)
    batch_size: int = redefault(AlgorithmSection, "batch_size", 256)
    max_grad_norm: float = redefault(AlgorithmSection, "max_grad_norm", 0.0)
    tau: float = option(
        0.005, "Polyak step of the target Q-networks towards the online ones, after each update.", above=0.0, max=1.0
    )
    init_temperature: float = option(1.0, "The entropy temperature alpha at the start; it is learned.", above=0.0)
    target_entropy: float | None = option(
        None, "The policy entropy alpha is tuned towards; unset: minus the number of action dimensions."
    )
    n_step: int = option(1, "Steps summed into each return before bootstrapping (SAC's own form is 1).", min=1, max=100)
    prioritized: bool = option(False, "Prioritized replay (SAC reports no priorities: leave it off).")
    priority_alpha: float = option(0.6, "How strongly priorities shape sampling (0 is uniform).", min=0.0, max=1.0)
    priority_beta: float = option(0.4, "Importance-sampling correction exponent.", min=0.0, max=1.0)
    uniform_warmup: bool = option(
        True,
        "Actors act uniformly at random in the action space while they hold the untrained weights (version 0, "
        "until the learner's first update is published), as SAC implementations do before learning starts.",
    )

    def uniform_until_trained(self) -> bool:
        return self.uniform_warmup

    def check(self, config: RunConfig, where: str) -> None:
        if self.prioritized:
            raise ConfigError(f"{where}algorithm.prioritized", "sac reports no priorities: replay stays uniform")
        learner = config.learner
        if learner.replay_min_size > learner.replay_capacity:
            raise ConfigError(f"{where}learner.replay_min_size", "is more than learner.replay_capacity")
        if self.batch_size > learner.replay_capacity:
            raise ConfigError(f"{where}algorithm.batch_size", "is larger than learner.replay_capacity")


def check_action_space(action_space: Any) -> None:
    from tandem.daemons.algorithms.sac.nets import box_dims

    try:
        box_dims(action_space)
    except ValueError as exc:
        raise ValueError(f"{NAME} {exc}") from exc


def make_learner(config: RunConfig, obs_space: Any, action_space: Any, device: str, mask_size: int) -> SACLearner:
    from tandem.daemons.algorithms.sac.learner import SAC as Learner

    return Learner(config, obs_space, action_space, device=device, mask_size=mask_size)


def make_policy(config: RunConfig, obs_space: Any, action_space: Any, seed: int | None, mask_size: int) -> SACPolicy:
    from tandem.daemons.algorithms.sac.learner import SACPolicy as Policy

    return Policy(config, obs_space, action_space, seed, mask_size, device=config.actors.device)


def make_feed(config: RunConfig, obs_space: Any, action_space: Any) -> Feed:
    """Transitions in a replay ring (n-step with algorithm.n_step), sampled at learner.samples_per_insert."""
    from tandem.daemons.feeds.replay_feed import ReplayFeed

    return ReplayFeed(config, obs_space, action_space)


SAC = AlgorithmSpec(
    name=NAME,
    summary="Soft Actor-Critic: twin Q with Polyak targets, a tanh-squashed Gaussian policy, a learned temperature.",
    section=SACSection,
    check_action_space=check_action_space,
    make_learner=make_learner,
    make_policy=make_policy,
    make_feed=make_feed,
    acting_network="policy",
    on_policy=False,
    # one update of 256 per env step, as SB3's train_freq = gradient_steps = 1; start after 1000 transitions
    defaults={"learner": {"samples_per_insert": 256.0, "replay_min_size": 1000}},
)
