"""Double DQN as the config and the daemons see it: its name, its [algorithm] keys and its spec (no torch here)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tandem.daemons.algorithms.factories import replay_spec
from tandem.daemons.settings.schema import AlgorithmSection, ReplaySection, option, redefault

if TYPE_CHECKING:
    from tandem.daemons.algorithms.dqn.learner import DoubleDQN, DQNPolicy

NAME = "double_dqn"


@dataclass
class DQNSection(ReplaySection):
    """[algorithm] of double_dqn: n-step double Q-learning from replay, with epsilon-greedy actors."""

    name: str = redefault(AlgorithmSection, "name", NAME)
    target_update_interval: int = option(250, "Updates between copies of the online net into the target net.", min=1)
    huber_delta: float = option(1.0, "Delta of the Huber loss.", above=0.0)


def check_action_space(action_space: Any) -> None:
    import gymnasium as gym

    if not isinstance(action_space, gym.spaces.Discrete):
        raise ValueError(f"{NAME} needs a Discrete action space, the env has {action_space}")


def torch_classes() -> tuple[type[DoubleDQN], type[DQNPolicy]]:
    """The learner and the policy, imported when one is built (reading a config needs no torch)."""
    from tandem.daemons.algorithms.dqn.learner import DoubleDQN, DQNPolicy

    return DoubleDQN, DQNPolicy


DOUBLE_DQN = replay_spec(
    NAME,
    "Double DQN: n-step targets from a target network, uniform or prioritized replay, Ape-X epsilons.",
    DQNSection,
    check_action_space,
    torch_classes,
    acting_network="online",
    epsilon_greedy=True,
)
