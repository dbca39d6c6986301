"""Torch helpers every algorithm shares: devices, tensors from received arrays, seeded networks, weight checks."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from tandem.daemons.algorithms.adam import Adam
from tandem.daemons.algorithms.models import build_q_network
from tandem.daemons.settings.schema import ModelSection
from tandem.daemons.settings.setup_errors import SetupError
from tandem.protocol import keyed


def torch_device(device: str) -> torch.device:
    """Parse a device string, with a clear error when it names CUDA on a machine without it."""
    try:
        parsed = torch.device(device)
    except RuntimeError as exc:
        raise SetupError(f"device {device!r} is not a torch device ({exc})") from exc
    if parsed.type == "cuda" and not torch.cuda.is_available():
        raise SetupError(f"device {device!r}: CUDA is not available in this torch build or on this machine")
    return parsed


def obs_tensor(obs: Any, device: torch.device) -> Any:
    """Observations as tensors on `device`: one, or one per key of a Dict observation."""
    return keyed.map_obs(lambda a: to_tensor(a, device), obs)


def cat_obs(parts: list[Any]) -> Any:
    """torch.cat of observation tensors along rows, per key for keyed ones."""
    if keyed.is_keyed(parts[0]):
        return {key: torch.cat([p[key] for p in parts]) for key in parts[0]}
    return torch.cat(parts)


def to_tensor(array: Any, device: torch.device, dtype: torch.dtype | None = None) -> torch.Tensor:
    """A tensor on `device`; read-only arrays (views of received frames) are copied rather than shared.

    A tensor (a batch the learner's prefetcher already moved) is passed through, cast only if need be.
    """
    if isinstance(array, torch.Tensor):
        return array.to(device=device, dtype=dtype, non_blocking=True)
    arr = np.asarray(array)
    if arr.flags.writeable:
        return torch.as_tensor(arr, dtype=dtype, device=device)
    return torch.tensor(arr, dtype=dtype, device=device)


def seeded_network(model_cfg: ModelSection, obs_space: gym.Space, num_actions: int, seed: int | None) -> nn.Module:
    """Build the Q-network; with a seed its initial weights are reproducible and torch's global RNG is untouched."""
    if seed is None:
        return build_q_network(model_cfg, obs_space, num_actions)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return build_q_network(model_cfg, obs_space, num_actions)


def wire_dtype(tensor: torch.Tensor) -> np.dtype:
    """The numpy dtype a tensor travels as: float32 for floating tensors, its own dtype otherwise."""
    if tensor.is_floating_point():
        return np.dtype(np.float32)
    return torch.empty(0, dtype=tensor.dtype).numpy().dtype


def cpu_copy(obj: Any) -> Any:
    """A deep copy of a (nested) state dict with every tensor detached and copied to the CPU."""
    if isinstance(obj, torch.Tensor):
        return obj.detach().to("cpu", copy=True)
    if isinstance(obj, dict):
        return {key: cpu_copy(value) for key, value in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(cpu_copy(value) for value in obj)
    return obj


def check_tensors(expected: Mapping[str, torch.Tensor], given: Mapping[str, Any], *, numpy: bool) -> None:
    """Same names, shapes and dtypes as `expected` (numpy arrays in wire dtype, or tensors); else ValueError."""
    if not isinstance(given, Mapping):
        raise ValueError(f"weights must be a mapping of names to arrays, got {type(given).__name__}")
    missing = [name for name in expected if name not in given]
    if missing:
        raise ValueError(
            f"tensor {missing[0]!r} is missing" + (f" (and {len(missing) - 1} more)" if len(missing) > 1 else "")
        )
    unknown = [name for name in given if name not in expected]
    if unknown:
        raise ValueError(f"tensor {unknown[0]!r} is not in this model")
    for name, ref in expected.items():
        value = given[name]
        kind, want = (np.ndarray, wire_dtype(ref)) if numpy else (torch.Tensor, ref.dtype)
        if not isinstance(value, kind):
            raise ValueError(
                f"tensor {name!r} is a {type(value).__name__}, expected a {kind.__module__}.{kind.__name__}"
            )
        if value.dtype != want:
            raise ValueError(f"tensor {name!r} has dtype {value.dtype}, expected {want}")
        if tuple(value.shape) != tuple(ref.shape):
            raise ValueError(f"tensor {name!r} has shape {tuple(value.shape)}, expected {tuple(ref.shape)}")


def module_weights(module: nn.Module) -> dict[str, np.ndarray]:
    """CPU copies of a module's state dict (float32 for floating tensors), safe to send while training goes on."""
    return {
        name: tensor.detach()
        .to("cpu", dtype=torch.float32 if tensor.is_floating_point() else tensor.dtype, copy=True)
        .numpy()
        for name, tensor in module.state_dict().items()
    }


def make_adam(params: list, learning_rate: float, eps: float = 1e-8) -> Adam:
    """Adam with torch's fused kernel where there is one, and no torch._dynamo import (see algorithms.adam)."""
    return Adam(params, lr=learning_rate, eps=eps)


class SwappableNet:
    """An inference network and a spare: weights load into the spare, then the two swap, all or nothing.

    Readers take `current` once per call, so a concurrent load swaps the reference, never tensors in use."""

    def __init__(self, net: nn.Module) -> None:
        self.current = net.eval()
        self.current.requires_grad_(False)
        self._spare = copy.deepcopy(self.current)

    def load(self, tensors: Mapping[str, np.ndarray]) -> None:
        """ValueError naming the offending tensor leaves the current weights in use."""
        spare_state = self._spare.state_dict()
        check_tensors(spare_state, tensors, numpy=True)
        with torch.no_grad():
            for name, dst in spare_state.items():
                if dst.device.type == "cpu" and dst.dtype != torch.bfloat16:
                    np.copyto(dst.numpy(), tensors[name], casting="same_kind")
                else:
                    dst.copy_(torch.tensor(np.asarray(tensors[name]), device=dst.device))
        self.current, self._spare = self._spare, self.current
