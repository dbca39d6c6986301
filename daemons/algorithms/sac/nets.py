"""SAC's networks: a tanh-squashed Gaussian policy over a Box, and two Q-networks of (observation, action)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from tandem.daemons.algorithms.net_parts import mlp

LOG_STD_MIN, LOG_STD_MAX = -20.0, 2.0  # as SB3 and the SAC paper's code bound the policy's log-std
EPSILON = 1e-6  # keeps log(1 - tanh(u)^2) finite at the bounds


def box_dims(action_space: gym.Space) -> int:
    """The number of action dimensions; ValueError for anything but a bounded float Box."""
    if not isinstance(action_space, gym.spaces.Box) or not np.issubdtype(action_space.dtype, np.floating):
        raise ValueError(f"needs a float Box action space, the env has {action_space}")
    if len(action_space.shape) != 1:
        raise ValueError(f"needs a one-dimensional Box of actions, the env has shape {action_space.shape}")
    if not (np.all(np.isfinite(action_space.low)) and np.all(np.isfinite(action_space.high))):
        raise ValueError(f"needs a bounded Box (the tanh squash maps onto its bounds), the env has {action_space}")
    return int(np.prod(action_space.shape))


class SquashedGaussianPolicy(nn.Module):
    """obs -> a Gaussian in u-space, squashed by tanh and scaled onto the action bounds.

    `sample` returns the action and its log-probability with the tanh change of variables (SAC's appendix C);
    `mode` is the greedy action, tanh of the mean."""

    def __init__(self, obs_dim: int, action_space: gym.spaces.Box, hidden_sizes: Sequence[int], activation: str):
        super().__init__()
        self.action_dim = box_dims(action_space)
        self.trunk = mlp(obs_dim, 2 * self.action_dim, hidden_sizes, activation)
        low, high = (np.asarray(b, np.float32).reshape(-1) for b in (action_space.low, action_space.high))
        # buffers, not parameters: they travel with the weights and are never trained
        self.register_buffer("scale", torch.as_tensor((high - low) / 2.0))
        self.register_buffer("bias", torch.as_tensor((high + low) / 2.0))

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        out = self.trunk(obs.reshape(obs.shape[0], -1).float())
        mean, log_std = out.split(self.action_dim, dim=1)
        return mean, log_std.clamp(LOG_STD_MIN, LOG_STD_MAX)

    def sample(self, obs: torch.Tensor, generator: torch.Generator | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """A reparameterized action [B, A] and its log-probability [B]."""
        mean, log_std = self(obs)
        std = log_std.exp()
        noise = torch.randn(mean.shape, generator=generator, device=mean.device, dtype=mean.dtype)
        u = mean + std * noise
        return self.squash(u), squashed_log_prob(u, mean, log_std, self.scale)

    def mode(self, obs: torch.Tensor) -> torch.Tensor:
        mean, _ = self(obs)
        return self.squash(mean)

    def squash(self, u: torch.Tensor) -> torch.Tensor:
        return torch.tanh(u) * self.scale + self.bias


def squashed_log_prob(u: torch.Tensor, mean: torch.Tensor, log_std: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """log pi(a | s) for a = tanh(u) * scale + bias, u ~ N(mean, exp(log_std)^2): the Gaussian's density minus
    log |da/du| = log(scale) + log(1 - tanh(u)^2), summed over action dimensions."""
    gaussian = -0.5 * ((u - mean) / log_std.exp()) ** 2 - log_std - 0.5 * math.log(2 * math.pi)
    jacobian = torch.log(scale * (1 - torch.tanh(u) ** 2) + EPSILON)
    return (gaussian - jacobian).sum(dim=1)


class TwinQ(nn.Module):
    """Two independent Q(s, a) networks; SAC trains both and bootstraps from the smaller (clipped double Q)."""

    def __init__(self, obs_dim: int, action_dim: int, hidden_sizes: Sequence[int], activation: str):
        super().__init__()
        self.q1 = mlp(obs_dim + action_dim, 1, hidden_sizes, activation)
        self.q2 = mlp(obs_dim + action_dim, 1, hidden_sizes, activation)

    def forward(self, obs: torch.Tensor, actions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        x = torch.cat([obs.reshape(obs.shape[0], -1).float(), actions.reshape(actions.shape[0], -1).float()], dim=1)
        return self.q1(x).squeeze(1), self.q2(x).squeeze(1)
