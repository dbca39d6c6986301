"""Soft Actor-Critic: its learner and its stochastic actor policy, for Box actions (torch; the spec is spec.py).

Twin Q-networks with Polyak-averaged targets, a tanh-squashed Gaussian policy, and the entropy temperature
learned towards a target entropy (Haarnoja et al. 2018, "Soft Actor-Critic Algorithms and Applications").
The learner samples n-step transitions from replay, as Double DQN does.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np
import torch

from tandem.daemons.algorithms.adam import Adam
from tandem.daemons.algorithms.base import UpdateResult
from tandem.daemons.algorithms.gradient_step import gradient_step
from tandem.daemons.algorithms.sac.nets import SquashedGaussianPolicy, TwinQ, box_dims
from tandem.daemons.algorithms.torch_util import (
    SwappableNet,
    check_tensors,
    cpu_copy,
    make_adam,
    module_weights,
    to_tensor,
    torch_device,
)
from tandem.daemons.replay.batch import SampledBatch
from tandem.daemons.settings.schema import RunConfig

ALGORITHM_NAME = "sac"  # what its checkpoints record


@dataclass(frozen=True)
class SACSettings:
    """What SAC needs from the config (the replay ratio, warm-up and n-step live in the learner's settings)."""

    learning_rate: float = 3e-4
    tau: float = 0.005  # Polyak step of the target Q-networks after each update
    init_temperature: float = 1.0  # alpha at the start (SB3: ent_coef = "auto" starts at 1)
    target_entropy: float | None = None  # None: -(action dimensions), the paper's heuristic
    max_grad_norm: float = 0.0  # 0: no clipping (SAC's reference code clips nothing)
    hidden_sizes: tuple[int, ...] = (256, 256)
    activation: str = "relu"


def sac_settings(config: RunConfig) -> SACSettings:
    """What SAC reads of a run's config: its [algorithm] keys and [model]'s layers."""
    a = config.algorithm
    return SACSettings(
        learning_rate=a.learning_rate,
        tau=a.tau,
        init_temperature=a.init_temperature,
        target_entropy=a.target_entropy,
        max_grad_norm=a.max_grad_norm,
        hidden_sizes=tuple(config.model.hidden_sizes),
        activation=config.model.activation,
    )


def obs_features(obs_space: gym.Space) -> int:
    if not isinstance(obs_space, gym.spaces.Box):
        raise ValueError(f"SAC's networks take a Box observation, the env has {obs_space}")
    return int(np.prod(obs_space.shape))


class SAC:
    """The three losses of SAC, one Adam step each per update, on a replay sample of n-step transitions."""

    def __init__(
        self, config: RunConfig, obs_space: gym.Space, action_space: gym.Space, device: str = "cpu", mask_size: int = 0
    ) -> None:
        if mask_size:
            raise ValueError(f"{ALGORITHM_NAME} takes no action masks (they are for Discrete actions)")
        settings, seed = sac_settings(config), config.run.seed
        self.settings = settings
        self.device = torch_device(device)
        self.action_dim = box_dims(action_space)
        self.action_space = action_space
        obs_dim = obs_features(obs_space)
        with torch.random.fork_rng(devices=[]):  # seeded initial weights, torch's global RNG untouched
            if seed is not None:
                torch.manual_seed(seed)
            self.policy = SquashedGaussianPolicy(obs_dim, action_space, settings.hidden_sizes, settings.activation)
            self.critic = TwinQ(obs_dim, self.action_dim, settings.hidden_sizes, settings.activation)
        self.policy.to(self.device)
        self.critic.to(self.device)
        self.target = copy.deepcopy(self.critic).requires_grad_(False)
        self.log_alpha = torch.tensor(math.log(settings.init_temperature), device=self.device, requires_grad=True)
        target = settings.target_entropy
        self.target_entropy = float(-self.action_dim if target is None else target)
        self.generator = torch.Generator(device=self.device)
        self.generator.manual_seed(0 if seed is None else seed)
        self._optimizers: dict[str, Adam] | None = None
        self.updates = 0

    @property
    def optimizers(self) -> dict[str, Adam]:
        """Created on first use (one per loss, as SAC's three objectives are minimised separately)."""
        if self._optimizers is None:
            lr = self.settings.learning_rate
            self._optimizers = {
                "critic": make_adam(list(self.critic.parameters()), lr),
                "policy": make_adam(list(self.policy.parameters()), lr),
                "alpha": make_adam([self.log_alpha], lr),
            }
        return self._optimizers

    def check_batch(self, batch: Any) -> None:
        """ValueError unless a received unroll's actions are finite floats [T, K, A] inside the action bounds, with
        no recurrent state (SAC's networks are feed-forward, PROTOCOL.md 2.1.3)."""
        actions = np.asarray(batch.actions)
        if actions.ndim != 3 or actions.shape[2] != self.action_dim:
            raise ValueError(f"actions must be [T, K, {self.action_dim}], got shape {list(actions.shape)}")
        if getattr(batch, "core_state", None) is not None:
            raise ValueError("core_state was sent, but a SAC policy is feed-forward")
        if actions.dtype.kind != "f" or not np.all(np.isfinite(actions)):
            raise ValueError(f"actions must be finite floats, got {actions.dtype}")
        low, high = (np.asarray(b, np.float64).reshape(-1) for b in (self.action_space.low, self.action_space.high))
        slack = 1e-4 * (high - low)  # float32 rounding of tanh at the bounds
        if actions.size and (np.any(actions < low - slack) or np.any(actions > high + slack)):
            raise ValueError("actions hold values outside the action space's bounds")

    def critic_loss(
        self,
        obs: torch.Tensor,
        actions: torch.Tensor,
        returns: torch.Tensor,
        discounts: torch.Tensor,
        next_obs: torch.Tensor,
        alpha: torch.Tensor,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """0.5 (Q1 - y)^2 + 0.5 (Q2 - y)^2 with y = R + D (min Q_target(s', a') - alpha log pi(a' | s')); and y."""
        with torch.no_grad():
            next_actions, next_logp = self.policy.sample(next_obs, self.generator)
            q1_next, q2_next = self.target(next_obs, next_actions)
            y = returns + discounts * (torch.min(q1_next, q2_next) - alpha * next_logp)
        q1, q2 = self.critic(obs, actions)
        return 0.5 * ((q1 - y) ** 2).mean() + 0.5 * ((q2 - y) ** 2).mean(), y

    def policy_loss(self, obs: torch.Tensor, alpha: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """E[alpha log pi(a|s) - min Q(s, a)] over fresh reparameterized actions; and their log-probabilities."""
        actions, logp = self.policy.sample(obs, self.generator)
        q1, q2 = self.critic(obs, actions)
        return (alpha * logp - torch.min(q1, q2)).mean(), logp

    def alpha_loss(self, logp: torch.Tensor) -> torch.Tensor:
        """-log(alpha) (log pi + target entropy): alpha grows while the entropy is under its target."""
        return -(self.log_alpha * (logp.detach() + self.target_entropy)).mean()

    def update(self, batch: SampledBatch) -> UpdateResult:
        size = int(np.shape(batch.returns)[0])
        dev = self.device
        obs, next_obs = to_tensor(batch.obs, dev, torch.float32), to_tensor(batch.next_obs, dev, torch.float32)
        actions = to_tensor(batch.actions, dev, torch.float32).reshape(size, self.action_dim)
        returns = to_tensor(batch.returns, dev, torch.float32).reshape(size)
        discounts = to_tensor(batch.discounts, dev, torch.float32).reshape(size)
        opt = self.optimizers
        alpha = self.log_alpha.detach().exp()

        critic_loss, y = self.critic_loss(obs, actions, returns, discounts, next_obs, alpha)
        self.step(opt["critic"], critic_loss, self.critic.parameters())

        self.critic.requires_grad_(False)  # the policy's gradient flows through Q into the action only
        policy_loss, logp = self.policy_loss(obs, alpha)
        self.step(opt["policy"], policy_loss, self.policy.parameters())
        self.critic.requires_grad_(True)

        alpha_loss = self.alpha_loss(logp)
        self.step(opt["alpha"], alpha_loss, [self.log_alpha])

        with torch.no_grad():  # Polyak averaging of the targets
            for target, online in zip(self.target.parameters(), self.critic.parameters()):
                target.lerp_(online, self.settings.tau)
        self.updates += 1
        values = (
            torch.stack(
                [
                    critic_loss.detach(),
                    policy_loss.detach(),
                    alpha_loss.detach(),
                    self.log_alpha.detach().exp(),
                    -logp.detach().mean(),
                    y.mean(),
                ]
            )
            .cpu()
            .tolist()
        )
        names = ("critic_loss", "policy_loss", "alpha_loss", "alpha", "entropy", "q_target_mean")
        metrics = dict(zip(names, values))
        metrics["loss"] = metrics["critic_loss"]
        return UpdateResult(metrics=metrics)

    def step(self, optimizer: Adam, loss: torch.Tensor, params: Any) -> None:
        gradient_step(optimizer, loss, params, self.settings.max_grad_norm)

    def weights(self) -> dict[str, np.ndarray]:
        """The acting network: the policy (actors need nothing else)."""
        return module_weights(self.policy)

    def state_dict(self) -> dict[str, Any]:
        return {
            "algorithm": ALGORITHM_NAME,
            "policy": cpu_copy(self.policy.state_dict()),
            "critic": cpu_copy(self.critic.state_dict()),
            "target": cpu_copy(self.target.state_dict()),
            "log_alpha": self.log_alpha.detach().cpu().clone(),
            "optimizers": {k: cpu_copy(o.state_dict()) for k, o in self.optimizers.items()},
            "updates": int(self.updates),
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Resume from `state_dict()` output; the config's learning rate wins over the saved one."""
        if state.get("algorithm") != ALGORITHM_NAME:
            raise ValueError(f"state is for algorithm {state.get('algorithm')!r}, not {ALGORITHM_NAME!r}")
        for part, module in (("policy", self.policy), ("critic", self.critic), ("target", self.target)):
            try:
                check_tensors(module.state_dict(), state[part], numpy=False)
            except (KeyError, ValueError) as exc:
                raise ValueError(f"saved {part} network does not fit this model: {exc}") from exc
        for key, optimizer in self.optimizers.items():
            optimizer.load_state_dict(state["optimizers"][key])
            for group in optimizer.param_groups:
                group["lr"] = self.settings.learning_rate
        self.policy.load_state_dict(state["policy"])
        self.critic.load_state_dict(state["critic"])
        self.target.load_state_dict(state["target"])
        with torch.no_grad():
            self.log_alpha.copy_(torch.as_tensor(state["log_alpha"]))
        self.updates = int(state["updates"])


class SACPolicy:
    """Actor side: samples from the squashed Gaussian (explore), or its mode (act, the evaluator's greedy play)."""

    def __init__(
        self,
        config: RunConfig,
        obs_space: gym.Space,
        action_space: gym.Space,
        seed: int | None = None,
        mask_size: int = 0,
        device: str = "cpu",
    ) -> None:
        if mask_size:
            raise ValueError(f"{ALGORITHM_NAME} takes no action masks (they are for Discrete actions)")
        settings = sac_settings(config)
        self.device = torch_device(device)
        self.action_dim = box_dims(action_space)
        with torch.random.fork_rng(devices=[]):
            if seed is not None:
                torch.manual_seed(seed)
            net = SquashedGaussianPolicy(
                obs_features(obs_space), action_space, settings.hidden_sizes, settings.activation
            )
        self.nets = SwappableNet(net.to(self.device))
        self.generator = torch.Generator(device=self.device)
        self.generator.manual_seed(0 if seed is None else seed)
        self.rng = np.random.default_rng(seed)
        self.has_weights = False

    def explore(self, obs: np.ndarray, epsilons: np.ndarray) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """Sampled actions [K, A] float32; SAC's exploration is its own entropy, so epsilons play no part."""
        with torch.inference_mode():
            actions, _ = self.nets.current.sample(to_tensor(np.asarray(obs), self.device), self.generator)
        return actions.cpu().numpy().astype(np.float32), {}

    def act(self, obs: np.ndarray, epsilons: np.ndarray) -> np.ndarray:
        """The mode, tanh of the mean; with probability epsilons[k] a sampled action instead."""
        obs = np.asarray(obs)
        eps = np.asarray(epsilons, dtype=np.float64)
        with torch.inference_mode():
            x = to_tensor(obs, self.device)
            greedy = self.nets.current.mode(x).cpu().numpy().astype(np.float32)
            sampled = self.rng.random(len(obs)) < eps
            if sampled.any():
                drawn, _ = self.nets.current.sample(x, self.generator)
                greedy = np.where(sampled[:, None], drawn.cpu().numpy().astype(np.float32), greedy)
        return greedy

    def load_weights(self, tensors: Mapping[str, np.ndarray]) -> None:
        self.nets.load(tensors)
        self.has_weights = True
