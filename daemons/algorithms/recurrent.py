"""The recurrent actor-critic: an encoder, an LSTM or GRU core carrying one state per env, a policy and a value head.

A state is one float32 row per env: [h] for a GRU, [h, c] for an LSTM (`state_size` wide). Actors carry it from
step to step and zero it where an episode starts; every unroll travels with the state its first step acted
from (PROTOCOL.md 2.1.3), and the learner runs the core over the unroll from there, zeroing it again wherever
an episode starts inside the unroll. Both sides step the same cell, so the learner sees what the actor saw.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import gymnasium as gym
import torch
from torch import nn

from tandem.daemons.algorithms.actor_critic_base import ActorCriticBase
from tandem.daemons.algorithms.models import build_q_network, policy_output_gain
from tandem.daemons.algorithms.net_parts import ACTIVATIONS
from tandem.daemons.settings.schema import ModelSection
from tandem.protocol import keyed

if TYPE_CHECKING:
    from tandem.daemons.algorithms.appo.spec import VtraceSection
    from tandem.daemons.algorithms.unroll_tensors import UnrollTensors

CELLS = {"lstm": nn.LSTMCell, "gru": nn.GRUCell}


class RecurrentActorCritic(ActorCriticBase):
    """encoder (the `[model]` network, its last layer `core_size` wide, then the activation) -> core -> heads.

    The policy and the value share the encoder and the core (one state per env), as Sample Factory's and
    cleanRL's recurrent agents do, so `algorithm.shared_torso` plays no part.
    """

    recurrent = True
    shared = True

    def build(self, model_cfg: ModelSection, obs_space: gym.Space, algo_cfg: VtraceSection, mask_size: int) -> None:
        self.kind, width = model_cfg.core, model_cfg.core_size
        self.width, self.state_size = width, model_cfg.core_state_size()
        network = build_q_network(model_cfg, obs_space, width)
        self.encoder = nn.Sequential(network, ACTIVATIONS[model_cfg.activation]())
        self.core = CELLS[self.kind](width, width)
        self.policy_head = nn.Linear(width, self.head.num_outputs)
        self.value_head = nn.Linear(width, 1)
        self.set_input_norm(obs_space, algo_cfg, mask_size, [network])
        with torch.no_grad():  # cleanRL's recurrent PPO: orthogonal core, zero biases; a near-uniform first policy
            for name, param in self.core.named_parameters():
                nn.init.orthogonal_(param) if name.startswith("weight") else nn.init.zeros_(param)
            nn.init.orthogonal_(self.policy_head.weight, gain=policy_output_gain(model_cfg))
            nn.init.orthogonal_(self.value_head.weight, gain=1.0)
            nn.init.zeros_(self.policy_head.bias)
            nn.init.zeros_(self.value_head.bias)

    def features(self, obs: torch.Tensor) -> torch.Tensor:
        """The encoder's output for observations [B, ...]: what the core takes."""
        return self.encoder(self.inputs(obs))

    def cell(self, x: torch.Tensor, state: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """One core step: (output h [B, width], the new state [B, state_size])."""
        return core_step(self.core, self.kind, self.width, x, state)

    def step(self, obs: torch.Tensor, state: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """An actor's step for envs [B]: (policy outputs [B, n], the state after it [B, state_size])."""
        h, state = self.cell(self.features(obs), state.to(self.policy_head.weight.dtype))
        return self.policy_head(h), state

    def distribution_step(self, obs: torch.Tensor, state: torch.Tensor):
        """(the action distribution at obs, the state after the step)."""
        out, state = self.step(obs, state)
        return self.head.distribution(out, obs), state

    def greedy_step(self, obs: torch.Tensor, state: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        out, state = self.step(obs, state)
        return self.head.mode(out, obs), state

    def sequence(self, x: torch.Tensor, state: torch.Tensor, resets: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The core over features x [R, N, width] from `state` [N, S], zeroed before row r where resets[r] is 1:
        (outputs [R, N, width], the state after each row [R, N, S])."""
        outputs, states = [], []
        for r in range(x.shape[0]):
            state = state * (1.0 - resets[r]).unsqueeze(1)
            h, state = self.cell(x[r], state)
            outputs.append(h)
            states.append(state)
        return torch.stack(outputs), torch.stack(states)

    def evaluate_unroll(self, d: UnrollTensors, bootstrap: bool = True):
        """Over unrolls [T, N] from their initial states: (the distribution at the T x N acted-on rows, t-major;
        the value at every row). With `bootstrap` the values also cover obs[T] and then each truncated
        episode's last observation (after the step that ended it), in the order `ActorCritic.evaluate` gives."""
        steps, n = d.rewards.shape
        rows = steps + 1 if bootstrap else steps
        obs = keyed.flat(keyed.take(d.obs, slice(None, rows)))
        x = self.features(obs).reshape(rows, n, -1)
        resets = torch.zeros(rows, n, device=x.device)
        resets[1:] = d.ended[: rows - 1]  # obs[t+1] starts a new episode where step t ended one
        h, states = self.sequence(x, d.core_state.to(x.dtype), resets)
        h = h.reshape(rows * n, -1)
        dist = self.head.distribution(self.policy_head(h[: steps * n]), keyed.take(obs, slice(None, steps * n)))
        values = self.value_head(h).squeeze(-1)
        if bootstrap and keyed.row_count(
            d.finals
        ):  # the step into a final observation, from the state before the reset
            final_h, _ = self.cell(self.features(d.finals), states[d.final_t, d.final_n])
            values = torch.cat([values, self.value_head(final_h).squeeze(-1)])
        return dist, values


def core_step(core: nn.Module, kind: str, width: int, x: torch.Tensor, state: torch.Tensor):
    """One step of an LSTM or GRU cell on a flat state ([h, c] for an LSTM): (output h, the new state)."""
    if kind == "lstm":
        h, c = core(x, (state[:, :width], state[:, width:]))
        return h, torch.cat([h, c], dim=1)
    h = core(x, state)
    return h, h


def check_core_state(batch, size: int) -> None:
    """ValueError naming what is wrong with an unroll's initial state for a network whose state is `size` floats
    wide (0: feed-forward). The framing has already checked its dtype, [K, S] form and finite values."""
    state = batch.core_state
    if size == 0:
        if state is not None:
            raise ValueError("core_state was sent, but this policy is feed-forward (model.core = 'none')")
        return
    if state is None:
        raise ValueError(
            f"core_state is missing: this policy's recurrent core needs each unroll's initial state [K, {size}]"
        )
    if state.shape != (batch.num_envs, size):
        raise ValueError(f"core_state must be float32 [K={batch.num_envs}, {size}], got {list(state.shape)}")
