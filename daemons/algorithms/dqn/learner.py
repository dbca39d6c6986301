"""Double DQN with n-step targets (learner side) and its epsilon-greedy, double-buffered policy (actor side).

The torch half of the algorithm: its spec, name and keys are in spec.py, which imports this module only to build.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from tandem.daemons.algorithms.adam import Adam
from tandem.daemons.algorithms.base import UpdateResult
from tandem.daemons.algorithms.gradient_step import gradient_step
from tandem.daemons.algorithms.numpy_acting import MAX_ROWS, NumpyMLP, NumpyTwin, mask_illegal
from tandem.daemons.algorithms.torch_util import (
    SwappableNet,
    check_tensors,
    cpu_copy,
    make_adam,
    module_weights,
    seeded_network,
    to_tensor,
    torch_device,
)
from tandem.daemons.replay.batch import SampledBatch
from tandem.daemons.settings.schema import RunConfig

if TYPE_CHECKING:
    pass


def discrete_actions(action_space: gym.Space) -> tuple[int, int]:
    """(n, start) of a Discrete action space; ValueError for anything else."""
    if not isinstance(action_space, gym.spaces.Discrete):
        raise ValueError(f"Double DQN needs a Discrete action space, the env has {action_space}")
    return int(action_space.n), int(action_space.start)


def masked_q(q: torch.Tensor, obs: torch.Tensor, mask_size: int) -> torch.Tensor:
    """Q-values with illegal actions pushed far below every legal one; the mask is the observation's last
    `mask_size` entries (see multiagent.spaces.ObsAdapter). Finite, so a state with no legal action stays NaN-free."""
    if not mask_size:
        return q
    legal = obs.reshape(obs.shape[0], -1)[:, -mask_size:] > 0.5
    return q.masked_fill(~legal, -1e9)


def check_mask(mask_size: int, num_actions: int) -> int:
    if mask_size not in (0, num_actions):
        raise ValueError(f"an action mask of {mask_size} entries does not fit {num_actions} actions")
    return mask_size


class DoubleDQN:
    """Online and target Q-networks trained with Adam on a Huber loss of n-step double-DQN targets."""

    def __init__(
        self, config: RunConfig, obs_space: gym.Space, action_space: gym.Space, device: str = "cpu", mask_size: int = 0
    ) -> None:
        model_cfg, algo_cfg, seed = config.model, config.algorithm, config.run.seed
        self.num_actions, self.action_start = discrete_actions(action_space)
        self.mask_size = check_mask(mask_size, self.num_actions)
        self.device = torch_device(device)
        self.name = algo_cfg.name  # what checkpoints record, so that a resumed run checks it
        self.learning_rate = float(algo_cfg.learning_rate)
        self.huber_delta = float(algo_cfg.huber_delta)
        self.max_grad_norm = float(algo_cfg.max_grad_norm)
        self.target_update_interval = int(algo_cfg.target_update_interval)
        self.online = seeded_network(model_cfg, obs_space, self.num_actions, seed).to(self.device).train()
        self.target = copy.deepcopy(self.online).eval()
        self.target.requires_grad_(False)
        self._optimizer: Adam | None = None
        self.updates = 0

    @property
    def optimizer(self) -> Adam:
        """Created on first use."""
        if self._optimizer is None:
            self._optimizer = make_adam(list(self.online.parameters()), self.learning_rate)
        return self._optimizer

    def action_indices(self, actions: np.ndarray, batch_size: int) -> np.ndarray:
        """Actions as int64 indices in [0, n), checked on the CPU (a bad index on CUDA would kill the context)."""
        idx = np.asarray(actions).reshape(-1)
        if idx.shape != (batch_size,):
            raise ValueError(
                f"batch.actions has shape {np.shape(actions)}, expected ({batch_size},) or ({batch_size}, 1)"
            )
        if not np.issubdtype(idx.dtype, np.integer):
            raise ValueError(f"batch.actions has dtype {idx.dtype}, expected an integer dtype")
        idx = idx.astype(np.int64) - self.action_start
        if batch_size and (idx.min() < 0 or idx.max() >= self.num_actions):
            raise ValueError(
                f"batch.actions holds values outside the action space "
                f"[{self.action_start}, {self.action_start + self.num_actions})"
            )
        return idx

    def check_batch(self, batch: Any) -> None:
        """ValueError unless a received unroll's actions are integers [T, K] inside the action space, with no
        recurrent state (a Q-network is feed-forward, PROTOCOL.md 2.1.3)."""
        actions = np.asarray(batch.actions)
        if actions.ndim != 2:  # replay keeps one int per row: [T, K, 1] would fail in the insert, not here
            raise ValueError(f"actions must be [T, K] for a Discrete action space, got shape {list(actions.shape)}")
        if getattr(batch, "core_state", None) is not None:
            raise ValueError("core_state was sent, but a Double DQN policy is feed-forward")
        if actions.dtype.kind not in "iu":
            raise ValueError(f"actions must be integers, got {actions.dtype}")
        if actions.size and (
            actions.min() < self.action_start or actions.max() >= self.action_start + self.num_actions
        ):
            raise ValueError(
                f"actions hold values outside [{self.action_start}, {self.action_start + self.num_actions})"
            )

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

        grad_norm = gradient_step(self.optimizer, loss, self.online.parameters(), self.max_grad_norm)
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
        return module_weights(self.online)

    def state_dict(self) -> dict[str, Any]:
        """Everything to resume training, as CPU tensors and plain values (torch.load(weights_only=True) reads it)."""
        return {
            "algorithm": self.name,
            "online": cpu_copy(self.online.state_dict()),
            "target": cpu_copy(self.target.state_dict()),
            "optimizer": cpu_copy(self.optimizer.state_dict()),
            "updates": int(self.updates),
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Resume from `state_dict()` output; the config's learning rate wins over the saved one."""
        if state.get("algorithm") != self.name:
            raise ValueError(f"state is for algorithm {state.get('algorithm')!r}, not {self.name!r}")
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

    def __init__(
        self,
        config: RunConfig,
        obs_space: gym.Space,
        action_space: gym.Space,
        seed: int | None = None,
        mask_size: int = 0,
        device: str = "cpu",
    ) -> None:
        self.num_actions, self.action_start = discrete_actions(action_space)
        self.mask_size = check_mask(mask_size, self.num_actions)
        self.device = torch_device(device)
        self.rng = np.random.default_rng(seed)
        self.nets = SwappableNet(seeded_network(config.model, obs_space, self.num_actions, seed).to(self.device))
        self.twin = NumpyTwin(NumpyMLP.of)
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
            legal = obs.reshape(count, -1)[:, -self.mask_size :] > 0.5
            actions = np.argmax(np.where(legal, self.rng.random((count, self.num_actions)), -1.0), axis=1)
        else:
            actions = self.rng.integers(self.num_actions, size=count, dtype=np.int64)
        if not explore.all():
            fast = self.twin.of(self.nets.current) if count <= MAX_ROWS else None
            if fast is not None:  # a few rows: numpy's pass costs far less than torch's
                greedy = mask_illegal(fast(obs), obs, self.mask_size).argmax(axis=1)
            else:
                net = self.nets.current
                with torch.inference_mode():
                    x = to_tensor(obs, self.device)
                    greedy = masked_q(net(x), x, self.mask_size).argmax(dim=1).cpu().numpy()
            actions = np.where(explore, actions, greedy.astype(np.int64))
        return actions + self.action_start

    def explore(self, obs: np.ndarray, epsilons: np.ndarray) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """What an actor sends: epsilon-greedy actions; DQN needs no per-step extras."""
        return self.act(obs, epsilons), {}

    def load_weights(self, tensors: Mapping[str, np.ndarray]) -> None:
        """Load into the spare network, then swap; ValueError naming the tensor leaves the current weights in use."""
        self.nets.load(tensors)
        self.twin.invalidate()
        self.has_weights = True
