"""SAC as the config and the daemons see it: its name, its [algorithm] keys and its spec (no torch here)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tandem.daemons.algorithms.factories import replay_spec
from tandem.daemons.settings.fields import ConfigError
from tandem.daemons.settings.schema import AlgorithmSection, ReplaySection, RunConfig, option, redefault

if TYPE_CHECKING:
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
        super().check(config, where)


def check_action_space(action_space: Any) -> None:
    from tandem.daemons.algorithms.sac.nets import box_dims

    try:
        box_dims(action_space)
    except ValueError as exc:
        raise ValueError(f"{NAME} {exc}") from exc


def torch_classes() -> tuple[type[SACLearner], type[SACPolicy]]:
    """The learner and the policy, imported when one is built (reading a config needs no torch)."""
    from tandem.daemons.algorithms.sac.learner import SAC as SACLearner
    from tandem.daemons.algorithms.sac.learner import SACPolicy

    return SACLearner, SACPolicy


SAC = replay_spec(
    NAME,
    "Soft Actor-Critic: twin Q with Polyak targets, a tanh-squashed Gaussian policy, a learned temperature.",
    SACSection,
    check_action_space,
    torch_classes,
    acting_network="policy",
    # one update of 256 per env step, as SB3's train_freq = gradient_steps = 1; start after 1000 transitions
    defaults={"learner": {"samples_per_insert": 256.0, "replay_min_size": 1000}},
)
