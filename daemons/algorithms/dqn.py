"""Double DQN with n-step targets (learner side) and its epsilon-greedy, double-buffered policy (actor side)."""

from __future__ import annotations

import copy
import math
from collections.abc import Mapping
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from daemons.algorithms.base import UpdateResult
from daemons.replay.batch import SampledBatch
from daemons.config.schema import AlgorithmSection, ModelSection
from daemons.algorithms.models import build_q_network

ALGORITHM_NAME = "double_dqn"


def discrete_actions(action_space: gym.Space) -> tuple[int, int]:
    """(n, start) of a Discrete action space; ValueError for anything else."""
    if not isinstance(action_space, gym.spaces.Discrete):
        raise ValueError(f"{ALGORITHM_NAME} needs a Discrete action space, the env has {action_space}")
    return int(action_space.n), int(action_space.start)


def torch_device(device: str) -> torch.device:
    """Parse a device string, with a clear error when it names CUDA on a machine without it."""
    try:
        parsed = torch.device(device)
    except RuntimeError as exc:
        raise ValueError(f"device {device!r} is not a torch device ({exc})") from exc
    if parsed.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device {device!r}: CUDA is not available in this torch build or on this machine")
    return parsed


def to_tensor(array: Any, device: torch.device, dtype: torch.dtype | None = None) -> torch.Tensor:
    """A tensor on `device`; read-only arrays (views of received frames) are copied rather than shared."""
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


def masked_q(q: torch.Tensor, obs: torch.Tensor, mask_size: int) -> torch.Tensor:
    """Q-values with illegal actions pushed far below every legal one; the mask is the observation's last
    `mask_size` entries (see multiagent.spaces.ObsAdapter). Finite, so a state with no legal action stays NaN-free."""
    if not mask_size:
        return q
    legal = obs.reshape(obs.shape[0], -1)[:, -mask_size:] > 0.5
    return q.masked_fill(~legal, -1e9)


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
        raise ValueError(f"tensor {missing[0]!r} is missing" + (f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""))
    unknown = [name for name in given if name not in expected]
    if unknown:
        raise ValueError(f"tensor {unknown[0]!r} is not in this model")
    for name, ref in expected.items():
        value = given[name]
        kind, want = (np.ndarray, wire_dtype(ref)) if numpy else (torch.Tensor, ref.dtype)
        if not isinstance(value, kind):
            raise ValueError(f"tensor {name!r} is a {type(value).__name__}, expected a {kind.__module__}.{kind.__name__}")
        if value.dtype != want:
            raise ValueError(f"tensor {name!r} has dtype {value.dtype}, expected {want}")
        if tuple(value.shape) != tuple(ref.shape):
            raise ValueError(f"tensor {name!r} has shape {tuple(value.shape)}, expected {tuple(ref.shape)}")


def check_mask(mask_size: int, num_actions: int) -> int:
    if mask_size not in (0, num_actions):
        raise ValueError(f"an action mask of {mask_size} entries does not fit {num_actions} actions")
    return mask_size


class DoubleDQN:
    """Online and target Q-networks trained with Adam on a Huber loss of n-step double-DQN targets."""

    def __init__(self, model_cfg: ModelSection, algo_cfg: AlgorithmSection, obs_space: gym.Space,
                 action_space: gym.Space, device: str = "cpu", seed: int | None = None, mask_size: int = 0) -> None:
        self.num_actions, self.action_start = discrete_actions(action_space)
        self.mask_size = check_mask(mask_size, self.num_actions)
        self.device = torch_device(device)
        self.learning_rate = float(algo_cfg.learning_rate)
        self.huber_delta = float(algo_cfg.huber_delta)
        self.max_grad_norm = float(algo_cfg.max_grad_norm)
        self.target_update_interval = int(algo_cfg.target_update_interval)
        self.online = seeded_network(model_cfg, obs_space, self.num_actions, seed).to(self.device).train()
        self.target = copy.deepcopy(self.online).eval()
        self.target.requires_grad_(False)
        self._optimizer: torch.optim.Optimizer | None = None
        self.updates = 0

    @property
    def optimizer(self) -> torch.optim.Optimizer:
        """Created on first use: torch's first optimizer imports torch._dynamo (about 1.5 s of CPU), and a
        learner publishes its first weights before that so its actors can start acting meanwhile."""
        if self._optimizer is None:
            params = list(self.online.parameters())
            try:  # the fused kernel is several times fewer dispatches per step on CPU and CUDA
                self._optimizer = torch.optim.Adam(params, lr=self.learning_rate, fused=True)
            except (RuntimeError, TypeError, ValueError):
                self._optimizer = torch.optim.Adam(params, lr=self.learning_rate)
        return self._optimizer

    def action_indices(self, actions: np.ndarray, batch_size: int) -> np.ndarray:
        """Actions as int64 indices in [0, n), checked on the CPU (a bad index on CUDA would kill the context)."""
        idx = np.asarray(actions).reshape(-1)
        if idx.shape != (batch_size,):
            raise ValueError(f"batch.actions has shape {np.shape(actions)}, expected ({batch_size},) or ({batch_size}, 1)")
        if not np.issubdtype(idx.dtype, np.integer):
            raise ValueError(f"batch.actions has dtype {idx.dtype}, expected an integer dtype")
        idx = idx.astype(np.int64) - self.action_start
        if batch_size and (idx.min() < 0 or idx.max() >= self.num_actions):
            raise ValueError(f"batch.actions holds values outside the action space "
                             f"[{self.action_start}, {self.action_start + self.num_actions})")
        return idx

    def update(self, batch: SampledBatch) -> UpdateResult:
        """One Adam step on weighted Huber(Q(s, a), R + D * Q_target(s', argmax_a' Q(s', a'))); priorities = |TD|."""
        size = int(np.shape(batch.returns)[0])
        dev = self.device
        actions = to_tensor(self.action_indices(batch.actions, size), dev)
        obs, next_obs = to_tensor(batch.obs, dev), to_tensor(batch.next_obs, dev)
        returns = to_tensor(batch.returns, dev, torch.float32).reshape(size)
        discounts = to_tensor(batch.discounts, dev, torch.float32).reshape(size)
        weights = to_tensor(batch.weights, dev, torch.float32).reshape(size)

        q_taken = self.online(obs).gather(1, actions[:, None]).squeeze(1)
        with torch.no_grad():
            best_next = masked_q(self.online(next_obs), next_obs, self.mask_size).argmax(dim=1, keepdim=True)
            bootstrap = self.target(next_obs).gather(1, best_next).squeeze(1)
            targets = returns + discounts * bootstrap
        td = targets - q_taken.detach()
        losses = nn.functional.huber_loss(q_taken, targets, reduction="none", delta=self.huber_delta)
        loss = (weights * losses).mean()

        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        clip = self.max_grad_norm if self.max_grad_norm > 0 else math.inf  # inf: measure the norm, scale by 1
        grad_norm = nn.utils.clip_grad_norm_(self.online.parameters(), clip)
        self.optimizer.step()
        self.updates += 1
        if self.updates % self.target_update_interval == 0:
            self.sync_target()

        # One device-to-host transfer for the metrics and the priorities.
        scalars = torch.stack([loss.detach(), q_taken.detach().mean(), td.abs().mean(), grad_norm.detach()])
        host = torch.cat([scalars.float(), td.abs().float()]).cpu().numpy()
        names = ("loss", "q_mean", "td_abs_mean", "grad_norm")
        metrics = {name: float(value) for name, value in zip(names, host[:4])}
        return UpdateResult(metrics=metrics, priorities=host[4:].astype(np.float32, copy=True))

    def sync_target(self) -> None:
        """Copy the online network's weights into the target network."""
        self.target.load_state_dict(self.online.state_dict())

    def weights(self) -> dict[str, np.ndarray]:
        """CPU copies of the online network's state dict (float32 for floating tensors), safe to send while training."""
        return {name: tensor.detach().to("cpu", dtype=torch.float32 if tensor.is_floating_point() else tensor.dtype,
                                         copy=True).numpy()
                for name, tensor in self.online.state_dict().items()}

    def state_dict(self) -> dict[str, Any]:
        """Everything to resume training, as CPU tensors and plain values (torch.load(weights_only=True) reads it)."""
        return {
            "algorithm": ALGORITHM_NAME,
            "online": cpu_copy(self.online.state_dict()),
            "target": cpu_copy(self.target.state_dict()),
            "optimizer": cpu_copy(self.optimizer.state_dict()),
            "updates": int(self.updates),
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Resume from `state_dict()` output; the config's learning rate wins over the saved one."""
        if state.get("algorithm") != ALGORITHM_NAME:
            raise ValueError(f"state is for algorithm {state.get('algorithm')!r}, not {ALGORITHM_NAME!r}")
        for part in ("online", "target"):
            try:
                check_tensors(self.online.state_dict(), state[part], numpy=False)
            except (KeyError, ValueError) as exc:
                raise ValueError(f"saved {part} network does not fit this model: {exc}") from exc
        self.optimizer.load_state_dict(state["optimizer"])  # validates group sizes before changing anything
        for group in self.optimizer.param_groups:
            group["lr"] = self.learning_rate
        self.online.load_state_dict(state["online"])
        self.target.load_state_dict(state["target"])
        self.updates = int(state["updates"])


class DQNPolicy:
    """Epsilon-greedy over a Q-network, one forward pass for all K envs, weights swapped in all or nothing."""

    def __init__(self, model_cfg: ModelSection, obs_space: gym.Space, action_space: gym.Space,
                 seed: int | None = None, device: str = "cpu", mask_size: int = 0) -> None:
        self.num_actions, self.action_start = discrete_actions(action_space)
        self.mask_size = check_mask(mask_size, self.num_actions)
        self.device = torch_device(device)
        self.rng = np.random.default_rng(seed)
        self._net = seeded_network(model_cfg, obs_space, self.num_actions, seed).to(self.device).eval()
        self._net.requires_grad_(False)
        self._spare = copy.deepcopy(self._net)
        self.has_weights = False

    def act(self, obs: np.ndarray, epsilons: np.ndarray) -> np.ndarray:
        """Actions [K] int64 for observations [K, ...]: random with probability epsilons[k], greedy otherwise."""
        obs = np.asarray(obs)
        eps = np.asarray(epsilons, dtype=np.float64)
        if obs.ndim == 0 or eps.shape != (obs.shape[0],):
            raise ValueError(f"need observations [K, ...] and epsilons [K], got shapes {obs.shape} and {eps.shape}")
        count = obs.shape[0]
        explore = self.rng.random(count) < eps
        if self.mask_size:  # a uniform legal action: the largest of random keys over the legal ones
            legal = obs.reshape(count, -1)[:, -self.mask_size:] > 0.5
            actions = np.argmax(np.where(legal, self.rng.random((count, self.num_actions)), -1.0), axis=1)
        else:
            actions = self.rng.integers(self.num_actions, size=count, dtype=np.int64)
        if not explore.all():
            net = self._net  # read once: a concurrent load_weights swaps the reference, never the tensors in use
            with torch.inference_mode():
                x = to_tensor(obs, self.device)
                greedy = masked_q(net(x), x, self.mask_size).argmax(dim=1).cpu().numpy()
            actions = np.where(explore, actions, greedy.astype(np.int64))
        return actions + self.action_start

    def load_weights(self, tensors: Mapping[str, np.ndarray]) -> None:
        """Load into the spare network, then swap; ValueError naming the tensor leaves the current weights in use."""
        spare_state = self._spare.state_dict()
        check_tensors(spare_state, tensors, numpy=True)
        with torch.no_grad():
            for name, dst in spare_state.items():
                if dst.device.type == "cpu" and dst.dtype != torch.bfloat16:
                    np.copyto(dst.numpy(), tensors[name], casting="same_kind")
                else:
                    dst.copy_(torch.tensor(np.asarray(tensors[name]), device=dst.device))
        self._net, self._spare = self._spare, self._net
        self.has_weights = True
