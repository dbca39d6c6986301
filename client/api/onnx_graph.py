"""What an exported ONNX policy computes: a torch module per kind of network, its inputs and outputs named.

Inputs: `obs` (or one `obs.KEY` per key of a Dict observation), in the observation's own dtype (uint8 frames
too: the network scales them); `action_mask` beside them where the env gives one; `state` for a recurrent
policy. Outputs: `action` (the greedy action, as the env takes it: a Discrete's with its start, a Box's clipped
to the bounds), the distribution's parameters (`log_probs` of a categorical, masked; `mean` and `log_std` of a
Gaussian; `q_values` of a Q-network), `value` (an actor-critic's, in the units the network gives it: with
algorithm.normalize_returns, normalized), and `state_out` for a recurrent policy. Observation normalization is
part of the network, so it is folded in.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import nn


class ActorCriticGraph(nn.Module):
    """APPO's and IMPALA's networks, feed-forward or recurrent."""

    def __init__(self, net: nn.Module, keys: list[str] | None, mask_size: int, action_space: Any):
        super().__init__()
        self.net, self.keys, self.mask_size = net, keys, mask_size
        self.recurrent = bool(getattr(net, "recurrent", False))
        head = net.head
        self.kind = head.kind
        if self.kind == "box":
            self.register_buffer("low", torch.as_tensor(np.asarray(action_space.low, np.float32).reshape(-1)))
            self.register_buffer("high", torch.as_tensor(np.asarray(action_space.high, np.float32).reshape(-1)))

    def observation(self, inputs: tuple[torch.Tensor, ...]) -> tuple[Any, tuple[torch.Tensor, ...]]:
        """The network's observation from the graph's inputs, and the inputs left after it."""
        if self.keys is not None:
            return dict(zip(self.keys, inputs[: len(self.keys)])), inputs[len(self.keys) :]
        obs, rest = inputs[0], inputs[1:]
        if self.mask_size:  # the network takes the mask at the end of a flat float observation (ObsAdapter)
            mask, rest = rest[0], rest[1:]
            obs = torch.cat([obs.reshape(obs.shape[0], -1).float(), mask.reshape(mask.shape[0], -1).float()], 1)
        return obs, rest

    def forward(self, *inputs: torch.Tensor) -> tuple[torch.Tensor, ...]:
        net = self.net
        obs, rest = self.observation(inputs)
        if self.recurrent:
            out, state = net.step(obs, rest[0])
            value = net.value_head(state[:, : net.width]).squeeze(-1)
        else:
            x = net.inputs(obs)
            out = net.policy(x)
            value = out[..., -1] if net.shared else net.value(x).squeeze(-1)
            out = out[..., :-1] if net.shared else out
        dist = net.head.distribution(out, obs)
        if self.kind == "box":
            action = torch.maximum(torch.minimum(dist.mean, self.high), self.low)
            outputs = (action.reshape(action.shape[0], *net.head.shape), dist.mean, dist.log_std.expand_as(dist.mean))
        else:
            mode = torch.stack([logp.argmax(dim=-1) for logp in dist.parts], dim=-1)
            outputs = (net.head.to_wire(mode), torch.cat(dist.parts, dim=-1))
        return (*outputs, value, state) if self.recurrent else (*outputs, value)


class QGraph(nn.Module):
    """Double DQN's Q-network: the greedy action and the Q-values (illegal actions at -inf where masked)."""

    def __init__(self, net: nn.Module, mask_size: int, start: int):
        super().__init__()
        self.net, self.mask_size, self.start = net, mask_size, start

    def forward(self, obs: torch.Tensor, *mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        if self.mask_size:
            flat = torch.cat([obs.reshape(obs.shape[0], -1).float(), mask[0].reshape(obs.shape[0], -1).float()], 1)
            q = self.net(flat).masked_fill(mask[0] < 0.5, float("-inf"))
        else:
            q = self.net(obs)
        return q.argmax(dim=-1) + self.start, q


class SquashedGraph(nn.Module):
    """SAC's actor: the greedy action (tanh of the mean, onto the bounds), the mean and log-std before the tanh."""

    def __init__(self, net: nn.Module):
        super().__init__()
        self.net = net

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        mean, log_std = self.net(obs)
        return self.net.squash(mean), mean, log_std


class EntityGraph(nn.Module):
    """The entity policy over every padded row (an ONNX graph has fixed shapes): inputs `obs.KEY`, one per key of
    the padded observation (each type [B, N, F], its `count:TYPE` [B], `global`, the masks); outputs `action`
    (the slot vector, greedy), `value`, and each discrete head's `log_probs.HEAD` (a select head's columns in
    the order its values count the step's present targets)."""

    def __init__(self, net: nn.Module, keys: list[str]):
        super().__init__()
        self.net, self.keys = net, keys
        self.discrete = [h.name for h in net.layout.heads if h.kind != "box"]

    def forward(self, *inputs: torch.Tensor) -> tuple[torch.Tensor, ...]:
        dist, value = self.net.forward_all(dict(zip(self.keys, inputs)))
        return (dist.mode(), value, *dist.logp)
