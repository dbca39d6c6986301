"""APPO (PPO's clipped objective on V-trace targets) and IMPALA (V-trace policy gradient): learner and actor policy.

The learner trains on whole unrolls in arrival order. Each batch's actions were chosen by an older version
(the behaviour policy mu); V-trace corrects the value targets and the advantages for that lag with the
importance ratio pi/mu of the current weights, which is why actors send log mu(a|x) with every step.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from daemons.algorithms.base import UpdateResult
from daemons.algorithms.distributions import ActionHead
from daemons.algorithms.models import build_q_network
from daemons.algorithms.torch_util import (SwappableNet, check_tensors, cpu_copy, make_adam, module_weights,
                                          to_tensor, torch_device)
from daemons.algorithms.vtrace import vtrace
from daemons.config.schema import AlgorithmSection, ModelSection, RunConfig
from protocol import TransitionBatch

FEED = "unrolls"  # the learner trains on a queue of fresh unrolls
BEHAVIOUR_LOGP = "behaviour_logp"  # extra.behaviour_logp: float32 [T, K], log mu(a_t | x_t) of the acting version
POLICY_OUTPUT_GAIN = 0.01  # a near-uniform first policy (as PPO implementations initialise it)


class ActorCritic(nn.Module):
    """A policy network (distribution parameters) and a value network, each built from the `[model]` section.

    With `algorithm.shared_torso` one network gives both: its last layer has one output more, the value.
    """

    def __init__(self, model_cfg: ModelSection, obs_space: gym.Space, action_space: gym.Space,
                 algo_cfg: AlgorithmSection, mask_size: int = 0):
        super().__init__()
        self.head = ActionHead(action_space, algo_cfg.log_std_init, algo_cfg.state_dependent_std, mask_size)
        self.shared = algo_cfg.shared_torso
        outputs = self.head.num_outputs
        self.policy = build_q_network(model_cfg, obs_space, outputs + 1 if self.shared else outputs)
        self.value = None if self.shared else build_q_network(model_cfg, obs_space, 1)
        last = last_linear(self.policy)
        if last is not None:  # only for built-in networks: a user's module keeps its own initialisation
            with torch.no_grad():  # the policy's outputs only (a shared network's value output is the last)
                last.weight[:outputs].mul_(POLICY_OUTPUT_GAIN)
                last.bias[:outputs].zero_()

    def distribution(self, obs: torch.Tensor):
        out = self.policy(obs)
        return self.head.distribution(out[..., :-1] if self.shared else out, obs)

    def values(self, obs: torch.Tensor) -> torch.Tensor:
        if self.shared:
            return self.policy(obs)[..., -1]
        return self.value(obs).squeeze(-1)

    def evaluate(self, obs: torch.Tensor, policy_rows: int):
        """The distribution at the first `policy_rows` observations and the value at every one (one pass when shared)."""
        if not self.shared:
            return self.distribution(obs[:policy_rows]), self.values(obs)
        out = self.policy(obs)
        return self.head.distribution(out[:policy_rows, :-1], obs[:policy_rows]), out[:, -1]


def last_linear(net: nn.Module) -> nn.Linear | None:
    """The output layer of a built-in network (MLP or Nature CNN), or None for anything else."""
    for attr in ("layers", "head"):
        seq = getattr(net, attr, None)
        if isinstance(seq, nn.Sequential) and isinstance(seq[-1], nn.Linear):
            return seq[-1]
    return None


def seeded_actor_critic(config: RunConfig, obs_space: gym.Space, action_space: gym.Space, mask_size: int,
                        seed: int | None) -> ActorCritic:
    if seed is None:
        return ActorCritic(config.model, obs_space, action_space, config.algorithm, mask_size)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return ActorCritic(config.model, obs_space, action_space, config.algorithm, mask_size)


@dataclass
class UnrollTensors:
    """Unrolls of one length T side by side as N = sum of their K columns, on the learner's device."""

    obs: torch.Tensor  # [T+1, N, ...]
    actions: torch.Tensor  # [T, N, ...] in the head's form
    rewards: torch.Tensor  # [T, N]
    terminated: torch.Tensor  # [T, N] float
    ended: torch.Tensor  # [T, N] float: terminated or truncated
    behaviour_logp: torch.Tensor  # [T, N]
    finals: torch.Tensor  # [F, ...] last observations of truncated episodes
    final_t: torch.Tensor  # [F] row of each final observation
    final_n: torch.Tensor  # [F] column of each final observation


def stack_unrolls(unrolls: Sequence[TransitionBatch], head: ActionHead, device: torch.device,
                  reward_scale: float) -> UnrollTensors:
    """Concatenate unrolls of equal T along K; final observations keep their (t, column) places."""
    obs = np.concatenate([u.obs for u in unrolls], axis=1)
    actions = np.concatenate([u.actions for u in unrolls], axis=1)
    rows, cols, offset = [], [], 0
    for u in unrolls:
        t, k = np.nonzero(u.truncated)  # row-major, the order of final_obs rows
        rows.append(t)
        cols.append(k + offset)
        offset += u.num_envs
    steps, n = actions.shape[:2]
    return UnrollTensors(
        obs=to_tensor(obs, device),
        actions=head.from_wire(to_tensor(actions.reshape(steps * n, *actions.shape[2:]), device)).reshape(steps, n, -1),
        rewards=to_tensor(np.concatenate([u.rewards for u in unrolls], axis=1), device, torch.float32) * reward_scale,
        terminated=to_tensor(np.concatenate([u.terminated for u in unrolls], axis=1), device, torch.float32),
        ended=to_tensor(np.concatenate([u.terminated | u.truncated for u in unrolls], axis=1), device, torch.float32),
        behaviour_logp=to_tensor(np.concatenate([u.extras[BEHAVIOUR_LOGP] for u in unrolls], axis=1), device,
                                 torch.float32),
        finals=to_tensor(np.concatenate([u.final_obs for u in unrolls]), device),
        final_t=torch.as_tensor(np.concatenate(rows), dtype=torch.long, device=device),
        final_n=torch.as_tensor(np.concatenate(cols), dtype=torch.long, device=device),
    )


def select_columns(data: UnrollTensors, cols: torch.Tensor) -> UnrollTensors:
    """The minibatch of columns `cols` (whole streams, so V-trace still sees each unroll in order)."""
    position = torch.full((data.obs.shape[1],), -1, dtype=torch.long, device=cols.device)
    position[cols] = torch.arange(len(cols), device=cols.device)
    keep = position[data.final_n] >= 0
    return UnrollTensors(
        obs=data.obs[:, cols], actions=data.actions[:, cols], rewards=data.rewards[:, cols],
        terminated=data.terminated[:, cols], ended=data.ended[:, cols], behaviour_logp=data.behaviour_logp[:, cols],
        finals=data.finals[keep], final_t=data.final_t[keep], final_n=position[data.final_n[keep]])


class APPO:
    """Learner side of 'appo' (clipped surrogate) and 'impala' (plain V-trace policy gradient)."""

    def __init__(self, name: str, config: RunConfig, obs_space: gym.Space, action_space: gym.Space,
                 device: str = "cpu", mask_size: int = 0):
        self.name, self.cfg = name, config.algorithm
        self.device = torch_device(device)
        self.net = seeded_actor_critic(config, obs_space, action_space, mask_size, config.run.seed).to(self.device)
        self.net.train()
        self._optimizer: torch.optim.Optimizer | None = None
        self.rng = torch.Generator().manual_seed(config.run.seed)
        self.updates = 0

    @property
    def optimizer(self) -> torch.optim.Optimizer:
        """Created on first use, after the first weights are out (the learner warms torch up before that)."""
        if self._optimizer is None:
            self._optimizer = make_adam(list(self.net.parameters()), self.cfg.learning_rate, eps=1e-5)
        return self._optimizer

    def check_batch(self, batch: TransitionBatch) -> None:
        """ValueError naming what is wrong with a received unroll's actions or behaviour log-probs."""
        self.net.head.check_wire(batch.actions)
        logp = batch.extras.get(BEHAVIOUR_LOGP)
        if logp is None:
            raise ValueError(f"extra.{BEHAVIOUR_LOGP} is missing: {self.name} needs the behaviour log-probability "
                             "of every step")
        if logp.dtype != np.float32 or logp.shape != batch.rewards.shape:
            raise ValueError(f"extra.{BEHAVIOUR_LOGP} must be float32 {list(batch.rewards.shape)}, "
                             f"got {logp.dtype} {list(logp.shape)}")
        if not np.isfinite(logp).all():
            raise ValueError(f"extra.{BEHAVIOUR_LOGP} holds NaN or infinite values")

    def update(self, unrolls: Sequence[TransitionBatch]) -> UpdateResult:
        """`epochs` passes over the unrolls, each in `minibatches` of whole columns; one Adam step per minibatch."""
        cfg = self.cfg
        groups: dict[int, list[TransitionBatch]] = {}
        for u in unrolls:
            groups.setdefault(u.num_steps, []).append(u)
        data = [stack_unrolls(g, self.net.head, self.device, cfg.reward_scale) for g in groups.values()]
        totals: dict[str, float] = {}
        steps = 0
        for _ in range(cfg.epochs):
            for part in data:
                n = part.obs.shape[1]
                order = torch.randperm(n, generator=self.rng).to(self.device)
                for cols in torch.chunk(order, min(cfg.minibatches, n)):
                    metrics = self.step(select_columns(part, cols) if cfg.minibatches > 1 else part)
                    for key, value in metrics.items():
                        totals[key] = totals.get(key, 0.0) + value
                    steps += 1
        self.updates += 1
        return UpdateResult(metrics={key: value / max(steps, 1) for key, value in totals.items()})

    def step(self, d: UnrollTensors) -> dict[str, float]:
        cfg = self.cfg
        steps, n = d.rewards.shape
        # rows: the T x N observations acted on, then obs[T] (bootstrap), then the truncated episodes' last ones
        dist, all_values = self.net.evaluate(torch.cat([d.obs.reshape(-1, *d.obs.shape[2:]), d.finals]), steps * n)
        logp = dist.log_prob(d.actions.reshape(steps * n, -1)).reshape(steps, n)
        entropy = dist.entropy().mean()
        values = all_values[: (steps + 1) * n].reshape(steps + 1, n)
        next_values = values[1:].detach().clone()
        if d.finals.shape[0]:
            next_values[d.final_t, d.final_n] = all_values[(steps + 1) * n:].detach()
        log_rhos = logp.detach() - d.behaviour_logp
        targets = vtrace(log_rhos, d.rewards, values[:-1].detach(), next_values, cfg.gamma * (1.0 - d.terminated),
                         1.0 - d.ended, rho_clip=cfg.vtrace_rho_clip, c_clip=cfg.vtrace_c_clip, lam=cfg.vtrace_lambda)
        advantages = targets.pg_advantages
        if cfg.normalize_advantages and advantages.numel() > 1:
            advantages = (advantages - advantages.mean()) / (advantages.std() + 1e-8)
        if self.name == "appo":
            ratio = torch.exp(logp - d.behaviour_logp)
            clipped = torch.clamp(ratio, 1.0 - cfg.clip_ratio, 1.0 + cfg.clip_ratio)
            policy_loss = -torch.min(ratio * advantages, clipped * advantages).mean()
            clip_fraction = ((ratio - 1.0).abs() > cfg.clip_ratio).float().mean()
        else:  # impala: the clipped importance weight is already inside the advantages
            policy_loss = -(logp * advantages).mean()
            clip_fraction = torch.zeros((), device=self.device)
        value_loss = 0.5 * (targets.vs - values[:-1]).pow(2).mean()
        loss = policy_loss + cfg.value_coef * value_loss - cfg.entropy_coef * entropy

        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        clip = cfg.max_grad_norm if cfg.max_grad_norm > 0 else math.inf
        grad_norm = nn.utils.clip_grad_norm_(self.net.parameters(), clip)
        self.optimizer.step()
        scalars = torch.stack([loss.detach(), policy_loss.detach(), value_loss.detach(), entropy.detach(),
                               grad_norm.detach().float(), log_rhos.exp().mean(), clip_fraction,
                               values.detach().mean()]).cpu().numpy()
        names = ("loss", "policy_loss", "value_loss", "entropy", "grad_norm", "rho_mean", "clip_fraction", "value_mean")
        return {name: float(value) for name, value in zip(names, scalars)}

    def weights(self) -> dict[str, np.ndarray]:
        return module_weights(self.net)

    def state_dict(self) -> dict[str, Any]:
        return {"algorithm": self.name, "net": cpu_copy(self.net.state_dict()),
                "optimizer": cpu_copy(self.optimizer.state_dict()), "updates": int(self.updates)}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Resume from `state_dict()` output; the config's learning rate wins over the saved one."""
        if state.get("algorithm") != self.name:
            raise ValueError(f"state is for algorithm {state.get('algorithm')!r}, not {self.name!r}")
        try:
            check_tensors(self.net.state_dict(), state["net"], numpy=False)
        except (KeyError, ValueError) as exc:
            saved_shared = not any(str(k).startswith("value.") for k in state["net"])
            hint = (f" (it was trained with algorithm.shared_torso = {str(saved_shared).lower()}; this run has "
                    f"{str(self.net.shared).lower()})" if saved_shared != self.net.shared else "")
            raise ValueError(f"saved network does not fit this model{hint}: {exc}") from exc
        self.optimizer.load_state_dict(state["optimizer"])
        for group in self.optimizer.param_groups:
            group["lr"] = self.cfg.learning_rate
        self.net.load_state_dict(state["net"])
        self.updates = int(state["updates"])


class StochasticPolicy:
    """Actor side: samples from the newest policy and reports log mu(a|x); the evaluator takes the mode."""

    def __init__(self, config: RunConfig, obs_space: gym.Space, action_space: gym.Space, seed: int | None,
                 mask_size: int = 0, device: str = "cpu"):
        self.device = torch_device(device)
        net = seeded_actor_critic(config, obs_space, action_space, mask_size, seed).to(self.device)
        self.nets = SwappableNet(net)
        self.generator = torch.Generator(device=self.device).manual_seed(seed if seed is not None else 0)
        self.rng = np.random.default_rng(seed)
        self.has_weights = False

    def explore(self, obs: np.ndarray, epsilons: np.ndarray) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """Sampled actions for observations [K, ...] and their log-probabilities (epsilons play no part)."""
        net = self.nets.current
        with torch.inference_mode():
            dist = net.distribution(to_tensor(obs, self.device))
            sample = dist.sample(self.generator)
            logp = dist.log_prob(sample)
            actions = net.head.to_wire(sample)
        return actions.cpu().numpy(), {BEHAVIOUR_LOGP: logp.float().cpu().numpy()}

    def act(self, obs: np.ndarray, epsilons: np.ndarray) -> np.ndarray:
        """The most likely action; a sampled one with probability epsilons[k] (0 for a greedy evaluation)."""
        net = self.nets.current
        with torch.inference_mode():
            dist = net.distribution(to_tensor(obs, self.device))
            mode = net.head.to_wire(dist.mode()).cpu().numpy()
            if (np.asarray(epsilons) > 0).any():
                use = self.rng.random(len(mode)) < np.asarray(epsilons)
                sampled = net.head.to_wire(dist.sample(self.generator)).cpu().numpy()
                mode = np.where(use.reshape(-1, *[1] * (mode.ndim - 1)), sampled, mode)
        return mode

    def load_weights(self, tensors: Mapping[str, np.ndarray]) -> None:
        self.nets.load(tensors)
        self.has_weights = True


# ---------------------------------------------------------------------- the algorithm module interface

def check_action_space(name: str, action_space: gym.Space) -> None:
    ActionHead(action_space)


def make_learner(name: str, config: RunConfig, obs_space: gym.Space, action_space: gym.Space, device: str,
                 mask_size: int) -> APPO:
    return APPO(name, config, obs_space, action_space, device=device, mask_size=mask_size)


def make_policy(name: str, config: RunConfig, obs_space: gym.Space, action_space: gym.Space, seed: int | None,
                mask_size: int) -> StochasticPolicy:
    return StochasticPolicy(config, obs_space, action_space, seed, mask_size, device=config.actors.device)
