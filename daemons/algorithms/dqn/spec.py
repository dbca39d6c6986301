"""Double DQN as the config and the daemons see it: its name, its [algorithm] keys and its spec (no torch here)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tandem.daemons.algorithms.spec import AlgorithmSpec
from tandem.daemons.settings.fields import ConfigError
from tandem.daemons.settings.schema import AlgorithmSection, ReplaySection, RunConfig, option, redefault

if TYPE_CHECKING:
    from tandem.daemons.algorithms.base import Feed
    from tandem.daemons.algorithms.dqn.learner import DoubleDQN, DQNPolicy

NAME = "double_dqn"


@dataclass
class DQNSection(ReplaySection):
    """[algorithm] of double_dqn: n-step double Q-learning from replay, with epsilon-greedy actors."""

    name: str = redefault(AlgorithmSection, "name", NAME)
    target_update_interval: int = option(250, "Updates between copies of the online net into the target net.", min=1)
    huber_delta: float = option(1.0, "Delta of the Huber loss.", above=0.0)

    def check(self, config: RunConfig, where: str) -> None:
        learner = config.learner
        if learner.replay_min_size > learner.replay_capacity:
            raise ConfigError(
                f"{where}learner.replay_min_size",
                f"{learner.replay_min_size} is more than "
                f"learner.replay_capacity ({learner.replay_capacity}): training would never start",
            )
        if self.batch_size > learner.replay_capacity:
            raise ConfigError(f"{where}algorithm.batch_size", "is larger than learner.replay_capacity")


def check_action_space(action_space: Any) -> None:
    import gymnasium as gym

    if not isinstance(action_space, gym.spaces.Discrete):
        raise ValueError(f"{NAME} needs a Discrete action space, the env has {action_space}")


def make_learner(config: RunConfig, obs_space: Any, action_space: Any, device: str, mask_size: int) -> DoubleDQN:
    from tandem.daemons.algorithms.dqn.learner import DoubleDQN

    return DoubleDQN(config, obs_space, action_space, device=device, mask_size=mask_size)


def make_policy(config: RunConfig, obs_space: Any, action_space: Any, seed: int | None, mask_size: int) -> DQNPolicy:
    from tandem.daemons.algorithms.dqn.learner import DQNPolicy

    return DQNPolicy(config, obs_space, action_space, seed, mask_size, device=config.actors.device)


def make_feed(config: RunConfig, obs_space: Any, action_space: Any) -> Feed:
    """n-step transitions in a replay ring, sampled at learner.samples_per_insert."""
    from tandem.daemons.feeds.replay_feed import ReplayFeed

    return ReplayFeed(config, obs_space, action_space)


DOUBLE_DQN = AlgorithmSpec(
    name=NAME,
    summary="Double DQN: n-step targets from a target network, uniform or prioritized replay, Ape-X epsilons.",
    section=DQNSection,
    check_action_space=check_action_space,
    make_learner=make_learner,
    make_policy=make_policy,
    make_feed=make_feed,
    acting_network="online",
    on_policy=False,
    epsilon_greedy=True,
)
