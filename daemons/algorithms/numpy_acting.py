"""A built-in MLP's acting pass in numpy, for the few rows an action server or a small actor infers at once.

At a handful of rows the work of a small MLP is microseconds; torch's per-operation overhead (dispatch, tensor
wrappers, the distribution's dozen small ops) took 0.12-0.2 ms a call on the 2-core VM, as much as a game's
loopback round trip. The same arithmetic in numpy costs a fraction of it. Networks it does not reproduce
exactly (a CNN, a user's module) get None from `NumpyMLP.of` and `NumpyActing.of` and stay on torch.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch
from torch import nn

from tandem.daemons.algorithms.distributions import HALF_LOG_2PI, LOG_STD_MAX, LOG_STD_MIN
from tandem.daemons.algorithms.models import MLPQNetwork

MAX_ROWS = 64  # above this many rows torch's batched kernels (and threads) win over numpy's per-call economy
GUMBEL_LOW, GUMBEL_HIGH = 1e-12, 1.0 - 1e-7  # the uniform draw's clamp, as distributions.Categorical's
MASKED = -1e9  # what a masked action's logit becomes, as ActionHead's


def elu(x: np.ndarray) -> np.ndarray:
    return np.where(x > 0, x, np.expm1(np.minimum(x, 0)))


def relu(x: np.ndarray) -> np.ndarray:
    return np.maximum(x, 0, out=x)


NUMPY_ACTIVATIONS: dict[type, Callable[[np.ndarray], np.ndarray]] = {nn.ReLU: relu, nn.Tanh: np.tanh, nn.ELU: elu}


def mask_illegal(outputs: np.ndarray, obs: np.ndarray, mask_size: int) -> np.ndarray:
    """Outputs with illegal actions (the observation's last `mask_size` entries <= 0.5) far below every legal one."""
    if not mask_size:
        return outputs
    legal = np.asarray(obs).reshape(len(obs), -1)[:, -mask_size:] > 0.5
    return np.where(legal, outputs, np.float32(MASKED))


def log_softmax(x: np.ndarray) -> np.ndarray:
    shifted = x - x.max(axis=-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))


class NumpyMLP:
    """A copy of a built-in MLPQNetwork's layers as numpy arrays; calling it gives the network's outputs [B, n].

    It is a snapshot: built after each weights load, it never shares memory with tensors a later load writes."""

    def __init__(self, mlp: MLPQNetwork):
        self.one_hot, self.one_hot_start = mlp.one_hot, mlp.one_hot_start
        self.layers: list[tuple[np.ndarray, np.ndarray, Callable[[np.ndarray], np.ndarray] | None]] = []
        modules = list(mlp.layers)
        for i, module in enumerate(modules):
            if isinstance(module, nn.Linear):
                after = modules[i + 1] if i + 1 < len(modules) else None
                activation = NUMPY_ACTIVATIONS[type(after)] if after is not None else None
                # transposed once here, so each call is x @ W (contiguous) + b
                weight, bias = module.weight.detach().numpy().T.copy(), module.bias.detach().numpy().copy()
                self.layers.append((weight, bias, activation))

    @classmethod
    def of(cls, mlp: nn.Module) -> NumpyMLP | None:
        """The numpy twin of a built-in MLP in float32 on the CPU; None for any other network."""
        if type(mlp) is not MLPQNetwork:
            return None
        if any(p.device.type != "cpu" or p.dtype != torch.float32 for p in mlp.parameters()):
            return None
        modules = list(mlp.layers)
        form = all(  # Linear, activation, Linear, ..., Linear: the form MLPQNetwork builds
            isinstance(m, nn.Linear) if i % 2 == 0 else type(m) in NUMPY_ACTIVATIONS for i, m in enumerate(modules)
        )
        return cls(mlp) if form and isinstance(modules[-1], nn.Linear) else None

    def __call__(self, x: np.ndarray) -> np.ndarray:
        """x: observations [B, ...] (or [B] indices for a one-hot network), already normalized where that applies."""
        layers = self.layers
        if self.one_hot is not None:
            index = np.asarray(x).reshape(len(x)).astype(np.int64) - self.one_hot_start
            weight, bias, activation = layers[0]
            x = weight[index] + bias  # a one-hot row times W is W's row
            x = activation(x) if activation is not None else x
            layers = layers[1:]
        else:
            x = np.asarray(x, dtype=np.float32).reshape(len(x), -1)
        for weight, bias, activation in layers:
            x = x @ weight
            x += bias
            if activation is not None:
                x = activation(x)
        return x


class NumpyActing:
    """A copy of an ActorCritic's policy path (observation statistics, MLP, action head) as numpy arrays."""

    def __init__(self, net: nn.Module, mlp: NumpyMLP):
        head = net.head
        self.kind, self.mask_size = head.kind, head.mask_size
        self.shared = net.shared
        self.mlp = mlp
        self.norm = None
        if net.obs_norm is not None:
            norm = net.obs_norm
            inv_std = (1.0 / np.sqrt(norm.var.double().numpy() + norm.epsilon)).astype(np.float32).reshape(-1)
            self.norm = (inv_std, (-norm.mean.numpy().reshape(-1) * inv_std).astype(np.float32), float(norm.clip))
        if self.kind == "box":
            self.dim, self.shape = head.dim, head.shape
            self.state_dependent, self.log_std_init = head.state_dependent, head.log_std_init
            self.log_std = None if head.state_dependent else head.log_std.detach().numpy().copy()
        else:
            self.sizes = head.sizes
            self.starts = head.starts.numpy().copy()

    @classmethod
    def of(cls, net: nn.Module) -> NumpyActing | None:
        """The numpy twin of an ActorCritic on the CPU whose policy is the built-in MLP; None for anything else."""
        if not hasattr(net, "head") or getattr(net, "pixel_scale", 1.0) != 1.0:
            return None
        mlp = NumpyMLP.of(getattr(net, "policy", None))
        return None if mlp is None else cls(net, mlp)

    def outputs(self, obs: np.ndarray) -> np.ndarray:
        """The policy network's outputs [B, n] (a shared network's value output left off)."""
        x = obs
        if self.norm is not None:
            inv_std, shift, clip = self.norm
            x = np.asarray(obs, dtype=np.float32).reshape(len(obs), -1) * inv_std + shift
            if clip > 0:
                np.clip(x, -clip, clip, out=x)
        out = self.mlp(x)
        return out[:, :-1] if self.shared else out

    def gaussian(self, outputs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        if self.state_dependent:
            log_std = np.clip(outputs[:, self.dim :] + self.log_std_init, LOG_STD_MIN, LOG_STD_MAX)
            return outputs[:, : self.dim], log_std
        return outputs, np.broadcast_to(self.log_std, outputs.shape)

    def explore(self, obs: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """Sampled wire actions and their log-probabilities (float32 [B]), as StochasticPolicy.explore's torch path."""
        out = self.outputs(obs)
        if self.kind == "box":
            mean, log_std = self.gaussian(out)
            sample = (mean + rng.standard_normal(mean.shape, dtype=np.float32) * np.exp(log_std)).astype(np.float32)
            z = (sample - mean) * np.exp(-log_std)
            logp = (-0.5 * z * z - log_std - np.float32(HALF_LOG_2PI)).sum(-1)
            return sample.reshape(len(obs), *self.shape), logp.astype(np.float32)
        out = mask_illegal(out, obs, self.mask_size)
        picks, logp = [], np.zeros(len(obs), np.float32)
        start = 0
        for size in self.sizes:
            part = log_softmax(out[:, start : start + size])
            start += size
            uniform = np.clip(rng.random(part.shape, dtype=np.float32), GUMBEL_LOW, GUMBEL_HIGH)
            pick = (part - np.log(-np.log(uniform))).argmax(-1)
            logp += part[np.arange(len(obs)), pick]
            picks.append(pick)
        actions = np.stack(picks, axis=-1) + self.starts
        return (actions[:, 0] if self.kind == "discrete" else actions), logp

    def greedy(self, obs: np.ndarray) -> np.ndarray:
        """The most likely wire actions, as StochasticPolicy.act with no epsilon."""
        out = self.outputs(obs)
        if self.kind == "box":
            mean = out[:, : self.dim] if self.state_dependent else out
            return mean.reshape(len(obs), *self.shape).astype(np.float32)
        out = mask_illegal(out, obs, self.mask_size)
        picks, start = [], 0
        for size in self.sizes:
            picks.append(out[:, start : start + size].argmax(-1))
            start += size
        actions = np.stack(picks, axis=-1) + self.starts
        return actions[:, 0] if self.kind == "discrete" else actions


class NumpyTwin:
    """The numpy twin of a policy's current network, rebuilt when it may be stale: after `invalidate()` (a
    weights load writes through numpy, which torch's version counters do not see) and after any in-place
    change torch counts (an optimizer step, `copy_` into a parameter, as tests and notebooks do)."""

    def __init__(self, build: Callable[[nn.Module], NumpyMLP | NumpyActing | None]):
        self.build = build
        self.key: tuple | None = None
        self.tensors: list[torch.Tensor] = []
        self.twin: NumpyMLP | NumpyActing | None = None

    def invalidate(self) -> None:
        self.key = None

    def of(self, net: nn.Module) -> NumpyMLP | NumpyActing | None:
        if self.key is None or self.key[0] != id(net):
            self.tensors = [*net.parameters(), *net.buffers()]
        key = (id(net), *(t._version for t in self.tensors))
        if key != self.key:
            self.twin, self.key = self.build(net), key
        return self.twin
