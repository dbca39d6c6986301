"""The on-policy network: a policy head and a value output built from `[model]`, with optional running normalizers."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import gymnasium as gym
import torch
from torch import nn

from tandem.daemons.algorithms.actor_critic_base import ActorCriticBase
from tandem.daemons.algorithms.models import build_q_network, policy_output_gain
from tandem.daemons.algorithms.recurrent import RecurrentActorCritic
from tandem.daemons.envs.entity_spaces import is_entity_policy
from tandem.daemons.settings.schema import ModelSection, RunConfig
from tandem.daemons.settings.setup_errors import SetupError
from tandem.protocol import keyed

if TYPE_CHECKING:
    from tandem.daemons.algorithms.appo.spec import VtraceSection


class ActorCritic(ActorCriticBase):
    """A policy network (distribution parameters) and a value network, each built from the `[model]` section.

    With `algorithm.shared_torso` one network gives both: its last layer has one output more, the value.
    Inputs are normalized as NormalizedInputs says. With `normalize_returns` the value output is in units of
    the value targets' running statistics, which the learner keeps (actors never need values).
    """

    recurrent = False

    def build(self, model_cfg: ModelSection, obs_space: gym.Space, algo_cfg: VtraceSection, mask_size: int) -> None:
        self.shared = algo_cfg.shared_torso
        outputs = self.head.num_outputs
        self.policy = build_q_network(model_cfg, obs_space, outputs + 1 if self.shared else outputs)
        self.value = None if self.shared else build_q_network(model_cfg, obs_space, 1)
        self.set_input_norm(obs_space, algo_cfg, mask_size, [n for n in (self.policy, self.value) if n is not None])
        last = last_linear(self.policy)
        if last is not None:  # only for built-in networks: a user's module keeps its own initialisation
            with torch.no_grad():  # the policy's outputs only (a shared network's value output is the last)
                last.weight[:outputs].mul_(policy_output_gain(model_cfg))
                last.bias[:outputs].zero_()

    def distribution(self, obs: torch.Tensor):
        out = self.policy(self.inputs(obs))
        return self.head.distribution(out[..., :-1] if self.shared else out, obs)

    def greedy(self, obs: torch.Tensor) -> torch.Tensor:
        """The most likely action, as `distribution(obs).mode()` (in the head's form), in fewer operations."""
        out = self.policy(self.inputs(obs))
        return self.head.mode(out[..., :-1] if self.shared else out, obs)

    def values(self, obs: torch.Tensor) -> torch.Tensor:
        """The value output (in normalized units with normalize_returns)."""
        if self.shared:
            return self.policy(self.inputs(obs))[..., -1]
        return self.value(self.inputs(obs)).squeeze(-1)

    def evaluate(self, obs: torch.Tensor, policy_rows: int):
        """The distribution at the first `policy_rows` observations, the value at every one (one pass when shared)."""
        x = self.inputs(obs)  # normalized once for both networks
        first = keyed.take(obs, slice(None, policy_rows))  # (the head reads an action mask there)
        if not self.shared:
            out = self.policy(keyed.take(x, slice(None, policy_rows)))
            return self.head.distribution(out, first), self.value(x).squeeze(-1)
        out = self.policy(x)
        return self.head.distribution(out[:policy_rows, :-1], first), out[:, -1]


def entity_policy_class(config: RunConfig) -> type:
    """The entity policy, or a SetupError naming what it cannot do yet."""
    from tandem.daemons.algorithms.entity_net import EntityActorCritic
    from tandem.daemons.algorithms.entity_recurrent import RecurrentEntityActorCritic

    model = config.model
    if model.core != "none" and model.kind == "mlp":
        raise SetupError(f"model.core = {model.core!r}: the padded MLP baseline has no recurrent core; use 'auto'")
    if model.kind not in ("auto", "mlp"):
        raise SetupError(
            f"model.kind = {model.kind!r}: entity observations train the built-in entity policy ('auto': "
            "attention over the entities) or its padded baseline ('mlp')"
        )
    if model.entity_width % model.entity_heads:
        raise SetupError(
            f"model.entity_width = {model.entity_width} must be a multiple of model.entity_heads = {model.entity_heads}"
        )
    return EntityActorCritic if model.core == "none" else RecurrentEntityActorCritic


def last_linear(net: nn.Module) -> nn.Linear | None:
    """The output layer of a built-in network (MLP or Nature CNN), or None for anything else."""
    for attr in ("layers", "head"):
        seq = getattr(net, attr, None)
        if isinstance(seq, nn.Sequential) and isinstance(seq[-1], nn.Linear):
            return seq[-1]
    return None


def seeded_actor_critic(
    config: RunConfig, obs_space: gym.Space, action_space: gym.Space, mask_size: int, seed: int | None
) -> ActorCritic:
    """The run's network (feed-forward, or with the recurrent core model.core names; the entity policy for entity
    observations), its weights seeded by `seed`."""
    kind = ActorCritic if config.model.core == "none" else RecurrentActorCritic
    if is_entity_policy(action_space):
        kind = entity_policy_class(config)
    if seed is None:
        return kind(config.model, obs_space, action_space, config.algorithm, mask_size)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return kind(config.model, obs_space, action_space, config.algorithm, mask_size)


def network_form_hint(net: Any, saved: Mapping[str, Any]) -> str:
    """Which setting that changes the network's tensors a saved network was trained with, where it differs from
    `net`'s (for the error of a checkpoint that does not fit)."""
    names = [str(k) for k in saved]
    forms = {
        "algorithm.shared_torso": (not any(k.startswith("value.") for k in names), net.shared),
        f"algorithm.normalize_{'images' if net.images else 'obs'}": (
            any(k.startswith("obs_norm.") for k in names),
            net.obs_norm is not None,
        ),
    }
    differ = [
        f"{key} = {str(was).lower()}; this run has {str(now).lower()}"
        for key, (was, now) in forms.items()
        if was != now
    ]
    return f" (it was trained with {', '.join(differ)})" if differ else ""
