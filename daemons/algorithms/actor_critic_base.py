"""What both on-policy networks start from: the action head over the env's actions, and normalized inputs."""

from __future__ import annotations

from typing import TYPE_CHECKING

import gymnasium as gym

from tandem.daemons.algorithms.distributions import ActionHead
from tandem.daemons.algorithms.input_norm import NormalizedInputs
from tandem.daemons.settings.schema import ModelSection

if TYPE_CHECKING:
    from tandem.daemons.algorithms.appo.spec import VtraceSection


class ActorCriticBase(NormalizedInputs):
    """An actor-critic over `action_space`: its action head as the algorithm's keys shape it, then the networks
    `build` adds (feed-forward in ActorCritic, around a recurrent core in RecurrentActorCritic)."""

    def __init__(
        self,
        model_cfg: ModelSection,
        obs_space: gym.Space,
        action_space: gym.Space,
        algo_cfg: VtraceSection,
        mask_size: int = 0,
    ):
        super().__init__()
        self.head = ActionHead(action_space, algo_cfg.log_std_init, algo_cfg.state_dependent_std, mask_size)
        self.build(model_cfg, obs_space, algo_cfg, mask_size)

    def build(self, model_cfg: ModelSection, obs_space: gym.Space, algo_cfg: VtraceSection, mask_size: int) -> None:
        """The networks after the head (`self.head.num_outputs` policy outputs), and their input normalization."""
        raise NotImplementedError
