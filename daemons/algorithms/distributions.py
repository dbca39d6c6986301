"""Action distributions of a stochastic policy: categorical (Discrete, MultiDiscrete) and diagonal Gaussian (Box)."""

from __future__ import annotations

import math

import gymnasium as gym
import numpy as np
import torch
from torch import nn

LOG_STD_MIN, LOG_STD_MAX = -5.0, 2.0  # keeps a state-dependent std from collapsing or exploding
HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)
POLICY_OUTPUT_GAIN = (
    0.01  # a built-in network's policy outputs start this small: a near-uniform first policy (as PPO's)
)


class Categorical:
    """One or more independent categoricals over split logits; log-probs and entropies summed over the parts."""

    def __init__(self, logits: torch.Tensor, sizes: list[int]):
        self.parts = [torch.log_softmax(part, dim=-1) for part in torch.split(logits, sizes, dim=-1)]

    def sample(self, generator: torch.Generator | None = None) -> torch.Tensor:
        """Gumbel-max: one uniform draw per logit, no torch.distributions overhead. [B, parts] int64."""
        picks = []
        for logp in self.parts:
            uniform = torch.rand(logp.shape, generator=generator, device=logp.device).clamp_(1e-12, 1.0 - 1e-7)
            picks.append((logp - torch.log(-torch.log(uniform))).argmax(dim=-1))
        return torch.stack(picks, dim=-1)

    def mode(self) -> torch.Tensor:
        return torch.stack([logp.argmax(dim=-1) for logp in self.parts], dim=-1)

    def log_prob(self, indices: torch.Tensor) -> torch.Tensor:
        """indices [B, parts] (0-based) -> [B]."""
        return sum(logp.gather(-1, indices[:, i : i + 1]).squeeze(-1) for i, logp in enumerate(self.parts))

    def entropy(self) -> torch.Tensor:
        # exp(-1e9) is 0, so masked actions add nothing; where() keeps 0 * -inf out of the sum
        return sum(
            -(torch.where(logp > -1e8, logp.exp() * logp, torch.zeros_like(logp))).sum(-1) for logp in self.parts
        )


class DiagGaussian:
    """Independent normals per action dimension; log-probs of the unclipped sample, summed over dimensions."""

    def __init__(self, mean: torch.Tensor, log_std: torch.Tensor):
        self.mean, self.log_std = mean, log_std.expand_as(mean)

    def sample(self, generator: torch.Generator | None = None) -> torch.Tensor:
        noise = torch.randn(self.mean.shape, generator=generator, device=self.mean.device)
        return self.mean + noise * self.log_std.exp()

    def mode(self) -> torch.Tensor:
        return self.mean

    def log_prob(self, actions: torch.Tensor) -> torch.Tensor:
        z = (actions - self.mean) * torch.exp(-self.log_std)
        return (-0.5 * z * z - self.log_std - HALF_LOG_2PI).sum(-1)

    def entropy(self) -> torch.Tensor:
        return (0.5 + HALF_LOG_2PI + self.log_std).sum(-1)


class ActionHead(nn.Module):
    """Turns a network's outputs into a distribution over an action space, and actions to and from the wire.

    Wire actions: Discrete [B] and MultiDiscrete [B, d] integers with the space's own start values; Box
    [B, *shape] float32, the unclipped sample (the env step clips to the bounds)."""

    def __init__(
        self, action_space: gym.Space, log_std_init: float = 0.0, state_dependent_std: bool = False, mask_size: int = 0
    ):
        super().__init__()
        self.space = action_space
        self.mask_size = mask_size
        if isinstance(action_space, gym.spaces.Discrete):
            self.kind, self.sizes = "discrete", [int(action_space.n)]
            self.register_buffer("starts", torch.tensor([int(action_space.start)]), persistent=False)
        elif isinstance(action_space, gym.spaces.MultiDiscrete):
            if action_space.nvec.ndim != 1:
                raise ValueError(
                    f"a MultiDiscrete action space must be one-dimensional, got nvec shape {action_space.nvec.shape}"
                )
            self.kind, self.sizes = "multi_discrete", [int(n) for n in action_space.nvec]
            self.register_buffer("starts", torch.as_tensor(np.asarray(action_space.start, np.int64)), persistent=False)
        elif isinstance(action_space, gym.spaces.Box) and np.issubdtype(action_space.dtype, np.floating):
            self.kind = "box"
            self.shape = tuple(action_space.shape)
            self.dim = int(np.prod(self.shape))
            self.state_dependent = state_dependent_std
            if not state_dependent_std:
                self.log_std = nn.Parameter(torch.full((self.dim,), float(log_std_init)))
            self.log_std_init = float(log_std_init)
        else:
            raise ValueError(f"needs a Discrete, MultiDiscrete or float Box action space, the env has {action_space}")
        if mask_size and (self.kind != "discrete" or mask_size != self.sizes[0]):
            raise ValueError(f"an action mask of {mask_size} entries does not fit the action space {action_space}")

    @property
    def num_outputs(self) -> int:
        """Network outputs this head reads: logits, or means (and log-stds when they depend on the state)."""
        if self.kind == "box":
            return self.dim * (2 if self.state_dependent else 1)
        return sum(self.sizes)

    def distribution(self, outputs: torch.Tensor, obs: torch.Tensor | None = None) -> Categorical | DiagGaussian:
        if self.kind == "box":
            if self.state_dependent:
                mean, log_std = outputs[:, : self.dim], outputs[:, self.dim :] + self.log_std_init
                return DiagGaussian(mean, log_std.clamp(LOG_STD_MIN, LOG_STD_MAX))
            return DiagGaussian(outputs, self.log_std)
        if self.mask_size and obs is not None:
            legal = obs.reshape(obs.shape[0], -1)[:, -self.mask_size :] > 0.5
            outputs = outputs.masked_fill(~legal, -1e9)
        return Categorical(outputs, self.sizes)

    def mode(self, outputs: torch.Tensor, obs: torch.Tensor | None = None) -> torch.Tensor:
        """The most likely action straight from the outputs, as `distribution(outputs, obs).mode()` gives it,
        without the log-softmax: an evaluator steps greedily thousands of times a round."""
        if self.kind == "box":
            return outputs[:, : self.dim] if self.state_dependent else outputs
        if self.mask_size and obs is not None:
            legal = obs.reshape(obs.shape[0], -1)[:, -self.mask_size :] > 0.5
            outputs = outputs.masked_fill(~legal, -1e9)
        if len(self.sizes) == 1:
            return outputs.argmax(dim=-1, keepdim=True)
        return torch.stack([part.argmax(dim=-1) for part in torch.split(outputs, self.sizes, dim=-1)], dim=-1)

    def to_wire(self, sample: torch.Tensor) -> torch.Tensor:
        """A distribution's sample or mode as the actions an actor sends."""
        if self.kind == "box":
            return sample.reshape(sample.shape[0], *self.shape).float()
        actions = sample + self.starts
        return actions[:, 0] if self.kind == "discrete" else actions

    def from_wire(self, actions: torch.Tensor) -> torch.Tensor:
        """Received actions [B, ...] in the form `log_prob` takes."""
        if self.kind == "box":
            return actions.reshape(actions.shape[0], self.dim).float()
        return actions.reshape(actions.shape[0], -1).long() - self.starts

    def check_wire(self, actions: np.ndarray, where: str = "actions", lead: tuple[int, ...] | None = None) -> None:
        """ValueError unless received actions [*lead, *action_shape] have this space's dtype kind and range (any
        leading axes when `lead` is None; an unroll's are [T, K], and a trailing axis of 1 is not the same)."""
        shape = tuple(self.space.shape or ())
        if lead is not None and tuple(actions.shape) != (*lead, *shape):
            raise ValueError(f"{where} must be {list((*lead, *shape))}, got {list(actions.shape)}")
        if tuple(actions.shape[actions.ndim - len(shape) :]) != shape:
            raise ValueError(f"{where} must end with the action shape {list(shape)}, got {list(actions.shape)}")
        if self.kind == "box":
            if actions.dtype.kind != "f":
                raise ValueError(f"{where} must be floats for a Box action space, got {actions.dtype}")
            if not np.isfinite(actions).all():
                raise ValueError(f"{where} holds NaN or infinite values")
            return
        if actions.dtype.kind not in "iu":
            raise ValueError(f"{where} must be integers for a {self.kind} action space, got {actions.dtype}")
        low = self.starts.cpu().numpy()
        high = low + np.asarray(self.sizes)
        if actions.size and ((actions < low).any() or (actions >= high).any()):
            raise ValueError(f"{where} holds values outside the action space {self.space}")
