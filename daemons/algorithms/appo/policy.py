"""The actor side of APPO and IMPALA: samples from the newest policy and reports log mu(a|x), as V-trace needs;
greedy for the evaluator. Small batches act through a numpy twin of the network (no torch dispatch)."""

from __future__ import annotations

from collections.abc import Mapping

import gymnasium as gym
import numpy as np
import torch

from tandem.daemons.algorithms.actor_critic import seeded_actor_critic
from tandem.daemons.algorithms.numpy_acting import MAX_ROWS, NumpyActing, NumpyTwin
from tandem.daemons.algorithms.torch_util import SwappableNet, obs_tensor, torch_device
from tandem.daemons.algorithms.unroll_tensors import BEHAVIOUR_LOGP
from tandem.daemons.settings.schema import RunConfig
from tandem.protocol import keyed


class StochasticPolicy:
    """Actor side: samples from the newest policy and reports log mu(a|x); the evaluator takes the mode."""

    def __init__(
        self,
        config: RunConfig,
        obs_space: gym.Space,
        action_space: gym.Space,
        seed: int | None,
        mask_size: int = 0,
        device: str = "cpu",
    ):
        self.device = torch_device(device)
        net = seeded_actor_critic(config, obs_space, action_space, mask_size, seed).to(self.device)
        self.nets = SwappableNet(net)
        self.generator = torch.Generator(device=self.device).manual_seed(seed if seed is not None else 0)
        self.rng = np.random.default_rng(seed)
        self.sample_rng = np.random.default_rng((0 if seed is None else seed, 1))  # the numpy path's draws
        self.twin = NumpyTwin(NumpyActing.of)
        self.has_weights = False

    def explore(
        self, obs: np.ndarray, epsilons: np.ndarray, state: np.ndarray | None = None
    ) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """Sampled actions for observations [K, ...] and their log-probabilities (epsilons play no part).
        A recurrent policy acts from `state` [K, S] and leaves the state after the step in it."""
        net = self.nets.current
        if net.recurrent:
            with torch.inference_mode():
                x = obs_tensor(obs, self.device)
                dist, after = net.distribution_step(x, self.state_tensor(state, keyed.row_count(obs)))
                sample = dist.sample(self.generator)
                logp = dist.log_prob(sample)
                actions = net.head.to_wire(sample)
                state[...] = after.cpu().numpy()
            return actions.cpu().numpy(), {BEHAVIOUR_LOGP: logp.float().cpu().numpy()}
        fast = self.twin.of(net) if keyed.row_count(obs) <= MAX_ROWS else None
        if fast is not None:
            actions, logp = fast.explore(obs, self.sample_rng)
            return actions, {BEHAVIOUR_LOGP: logp}
        with torch.inference_mode():
            dist = net.distribution(obs_tensor(obs, self.device))
            sample = dist.sample(self.generator)
            logp = dist.log_prob(sample)
            actions = net.head.to_wire(sample)
        return actions.cpu().numpy(), {BEHAVIOUR_LOGP: logp.float().cpu().numpy()}

    def act(self, obs: np.ndarray, epsilons: np.ndarray, state: np.ndarray | None = None) -> np.ndarray:
        """The most likely action; a sampled one with probability epsilons[k] (0 for a greedy evaluation).
        A recurrent policy acts from `state` [K, S] and leaves the state after the step in it."""
        greedy = not (np.asarray(epsilons) > 0).any()
        net = self.nets.current
        fast = self.twin.of(net) if greedy and not net.recurrent and keyed.row_count(obs) <= MAX_ROWS else None
        if fast is not None:
            return fast.greedy(obs)
        with torch.inference_mode():
            x = obs_tensor(obs, self.device)
            if net.recurrent:
                dist, after = net.distribution_step(x, self.state_tensor(state, keyed.row_count(obs)))
                state[...] = after.cpu().numpy()
            elif greedy:
                return net.head.to_wire(net.greedy(x)).cpu().numpy()
            else:
                dist = net.distribution(x)
            mode = net.head.to_wire(dist.mode()).cpu().numpy()
            if greedy:
                return mode
            use = self.rng.random(len(mode)) < np.asarray(epsilons)
            sampled = net.head.to_wire(dist.sample(self.generator)).cpu().numpy()
        return np.where(use.reshape(-1, *[1] * (mode.ndim - 1)), sampled, mode)

    @property
    def state_size(self) -> int:
        """Floats of recurrent state per env this policy carries (0: feed-forward)."""
        return int(getattr(self.nets.current, "state_size", 0))

    def state_tensor(self, state: np.ndarray | None, rows: int) -> torch.Tensor:
        size = self.state_size
        if state is None or state.shape != (rows, size) or state.dtype != np.float32:
            got = "none" if state is None else f"{state.dtype} {list(state.shape)}"
            raise ValueError(f"a recurrent policy needs its state as float32 [{rows}, {size}], got {got}")
        return torch.from_numpy(state).to(self.device)

    def load_weights(self, tensors: Mapping[str, np.ndarray]) -> None:
        self.nets.load(tensors)
        self.twin.invalidate()
        self.has_weights = True
