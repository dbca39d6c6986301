"""APPO (PPO's clipped objective on V-trace targets) and IMPALA (V-trace policy gradient): the learner (the actor's
policy is policy.py).

The learner trains on whole unrolls in arrival order. Each batch's actions were chosen by an older version
(the behaviour policy mu); V-trace corrects the value targets and the advantages for that lag with the
importance ratio pi/mu of the current weights, which is why actors send log mu(a|x) with every step.

The torch half of both algorithms: their specs, names and keys are in spec.py, which imports this module only
to build.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import gymnasium as gym
import numpy as np
import torch

from tandem.daemons.algorithms.actor_critic import seeded_actor_critic
from tandem.daemons.algorithms.adam import Adam
from tandem.daemons.algorithms.appo.losses import (
    clipped_surrogate,
    explained_variance,
    normalized_advantages,
    scalar_metrics,
    value_loss,
)
from tandem.daemons.algorithms.appo.minibatches import FlatSteps, RowBuffers, minibatch_rows
from tandem.daemons.algorithms.appo.training_state import load_training_state, training_state
from tandem.daemons.algorithms.appo.vtrace import vtrace
from tandem.daemons.algorithms.base import UpdateResult
from tandem.daemons.algorithms.gradient_step import gradient_step
from tandem.daemons.algorithms.recurrent import check_core_state
from tandem.daemons.algorithms.running_norm import RunningMeanStd
from tandem.daemons.algorithms.torch_util import (
    make_adam,
    module_weights,
    torch_device,
)
from tandem.daemons.algorithms.unroll_tensors import (
    BEHAVIOUR_LOGP,
    PreparedUnrolls,
    UnrollTensors,
    select_columns,
    stack_unrolls,
)
from tandem.daemons.settings.schema import RunConfig
from tandem.protocol import TransitionBatch, keyed

if TYPE_CHECKING:
    from tandem.daemons.algorithms.appo.spec import APPOSection

log = logging.getLogger(__name__)


class APPO:
    """Learner side of APPO (`clipped`: PPO's clipped surrogate) and IMPALA (plain V-trace policy gradient)."""

    def __init__(
        self,
        config: RunConfig,
        obs_space: gym.Space,
        action_space: gym.Space,
        device: str = "cpu",
        mask_size: int = 0,
        clipped: bool = True,
    ):
        # the name is what checkpoints record, so that a resumed run checks it
        self.name, self.clipped = config.algorithm.name, clipped
        self.cfg: APPOSection = config.algorithm  # IMPALA's lacks clip_ratio and clip_anchor: read only when clipped
        self.device = torch_device(device)
        self.net = seeded_actor_critic(config, obs_space, action_space, mask_size, config.run.seed).to(self.device)
        self.net.train()
        # normalize_returns: the value output's units, the running statistics of the value targets (learner only)
        self.value_norm = RunningMeanStd((1,)).to(self.device) if self.cfg.normalize_returns else None
        self._optimizer: Adam | None = None
        self.rng = torch.Generator().manual_seed(config.run.seed)
        self.row_buffers = RowBuffers()  # each minibatch's steps gathered into the last one's tensors
        self.updates = 0
        # Called between the minibatch steps of an update when set (the learner's heartbeat; see Algorithm)
        self.progress: Callable[[], object] | None = None

    @property
    def optimizer(self) -> Adam:
        """Created on first use."""
        if self._optimizer is None:
            self._optimizer = make_adam(list(self.net.parameters()), self.cfg.learning_rate, eps=self.cfg.adam_eps)
        return self._optimizer

    def learning_rate(self) -> float:
        """The configured rate, decayed linearly by the steps already trained when learning_rate_decay_steps > 0."""
        return self.decayed(self.cfg.learning_rate, self.cfg.learning_rate_decay_steps)

    def entropy_coef(self) -> float:
        """The entropy bonus's weight, decayed linearly by the steps already trained when entropy_decay_steps > 0."""
        return self.decayed(self.cfg.entropy_coef, self.cfg.entropy_decay_steps)

    def decayed(self, start: float, over_steps: int) -> float:
        if not over_steps:
            return start
        trained = self.updates * self.cfg.batch_size  # an update's batch is batch_size steps, so resumes agree
        return start * max(0.0, 1.0 - trained / over_steps)

    def set_learning_rate(self) -> None:
        for group in self.optimizer.param_groups:
            group["lr"] = self.learning_rate()

    def check_batch(self, batch: TransitionBatch) -> None:
        """ValueError naming what is wrong with a received unroll's actions or behaviour log-probs."""
        self.net.head.check_wire(batch.actions, lead=batch.rewards.shape)  # [T, K, *shape]: unrolls concatenate
        fits = getattr(self.net, "check_actions", None)  # an entity policy's actions must fit their observations
        if fits is not None:
            fits(batch.obs, batch.actions)
        logp = batch.extras.get(BEHAVIOUR_LOGP)
        if logp is None:
            raise ValueError(
                f"extra.{BEHAVIOUR_LOGP} is missing: {self.name} needs the behaviour log-probability of every step"
            )
        if logp.dtype != np.float32 or logp.shape != batch.rewards.shape:
            raise ValueError(
                f"extra.{BEHAVIOUR_LOGP} must be float32 {list(batch.rewards.shape)}, "
                f"got {logp.dtype} {list(logp.shape)}"
            )
        if not np.isfinite(logp).all():
            raise ValueError(f"extra.{BEHAVIOUR_LOGP} holds NaN or infinite values")
        check_core_state(batch, getattr(self.net, "state_size", 0))

    def prepare(self, unrolls: Sequence[TransitionBatch]) -> PreparedUnrolls:
        """The unrolls as tensors on the device, those of one length side by side: what `update` trains on (the
        learner calls this apart, so that its time counts as preparing, not as the update's compute)."""
        groups: dict[int, list[TransitionBatch]] = {}
        for u in unrolls:
            groups.setdefault(u.num_steps, []).append(u)
        head, scale = self.net.head, self.cfg.reward_scale
        return PreparedUnrolls([stack_unrolls(g, head, self.device, scale) for g in groups.values()])

    def update(self, unrolls: Sequence[TransitionBatch] | PreparedUnrolls) -> UpdateResult:
        """`epochs` passes over the unrolls, each in `minibatches`; one Adam step per minibatch.

        targets = 'per_minibatch': V-trace runs again before every step, with the weights of that step, on
        minibatches of whole columns. 'per_update': it runs once, with the weights the update starts from,
        and minibatches are drawn from the flat steps (whole columns, or single steps with minibatch_by)."""
        cfg = self.cfg
        if cfg.learning_rate_decay_steps:
            self.set_learning_rate()
        data = (unrolls if isinstance(unrolls, PreparedUnrolls) else self.prepare(unrolls)).parts
        for part in data:  # statistics first: the targets below see the inputs the steps will
            if self.net.obs_norm is not None:
                self.net.update_obs_norm(keyed.map_obs(lambda x: x[:-1].reshape(-1, *x.shape[2:]), part.obs))
        totals: dict[str, float] = {}
        steps = 0

        def add(metrics: Mapping[str, float]) -> None:
            nonlocal steps
            for key, value in metrics.items():
                totals[key] = totals.get(key, 0.0) + value
            steps += 1
            if self.progress is not None:
                self.progress()

        if cfg.targets == "per_update" and self.net.recurrent:  # minibatches of whole columns, run in order
            flat, explained = self.targets_once(data)
            for _ in range(cfg.epochs):
                for part, cols, rows in self.column_minibatches(data):
                    add(self.sequence_step(select_columns(part, cols), flat.take(rows)))
        elif cfg.targets == "per_update":
            flat, explained = self.targets_once(data)
            for _ in range(cfg.epochs):
                for rows in minibatch_rows(flat, cfg.minibatches, cfg.minibatch_by, self.rng):
                    add(self.flat_step(flat.take(rows, self.row_buffers)))
        else:
            explained = []
            for _ in range(cfg.epochs):
                for part in data:
                    n = part.rewards.shape[1]
                    order = torch.randperm(n, generator=self.rng).to(self.device)
                    for cols in torch.chunk(order, min(cfg.minibatches, n)):
                        metrics = self.step(select_columns(part, cols) if cfg.minibatches > 1 else part)
                        explained.append(metrics.pop("explained_variance"))
                        add(metrics)
        result = {key: value / max(steps, 1) for key, value in totals.items()}
        if cfg.entropy_decay_steps:
            result["entropy_coef"] = self.entropy_coef()  # this update's: it counts the updates before it
        self.updates += 1
        if cfg.learning_rate_decay_steps:
            result["learning_rate"] = self.optimizer.param_groups[0]["lr"]
        if self.value_norm is not None:
            result["return_std"] = float(self.value_norm.var.sqrt())
        finite = [v for v in explained if math.isfinite(v)]
        if finite:
            result["explained_variance"] = float(np.mean(finite))
        return UpdateResult(metrics=result)

    def returns(self, values: torch.Tensor) -> torch.Tensor:
        """Value outputs in the units of returns."""
        return values if self.value_norm is None else self.value_norm.denormalize(values)

    def vtrace_targets(self, d: UnrollTensors, all_values: torch.Tensor, logp: torch.Tensor):
        """V-trace over [T, N] from value outputs at every row (obs[0..T], then the truncated episodes' last ones)."""
        cfg = self.cfg
        steps, n = d.rewards.shape
        real = self.returns(all_values.detach())
        values = real[: (steps + 1) * n].reshape(steps + 1, n)
        next_values = values[1:].clone()
        if keyed.row_count(d.finals):
            next_values[d.final_t, d.final_n] = real[(steps + 1) * n :]
        log_rhos = logp.detach() - d.behaviour_logp
        return log_rhos, vtrace(
            log_rhos,
            d.rewards,
            values[:-1],
            next_values,
            cfg.gamma * (1.0 - d.terminated),
            1.0 - d.ended,
            rho_clip=cfg.vtrace_rho_clip,
            c_clip=cfg.vtrace_c_clip,
            lam=cfg.vtrace_lambda,
        )

    def evaluate_unrolls(self, d: UnrollTensors):
        """(distribution at the T x N acted-on rows, log-probs [T, N], value outputs at every row)."""
        steps, n = d.rewards.shape
        if self.net.recurrent:  # the core runs over each column from its initial state
            dist, all_values = self.net.evaluate_unroll(d)
        else:  # the few truncated episodes' last observations apart: no copy of every observation to join them
            dist, values = self.net.evaluate(keyed.flat(d.obs), steps * n)
            all_values = torch.cat([values, self.net.values(d.finals)]) if keyed.row_count(d.finals) else values
        logp = dist.log_prob(d.actions.reshape(steps * n, -1)).reshape(steps, n)
        return dist, logp, all_values

    @torch.no_grad()
    def targets_once(self, data: list[UnrollTensors]) -> tuple[FlatSteps, list[float]]:
        """Every step of the update with its V-trace advantage and value target from the starting weights."""
        parts, offset = [], 0
        for d in data:
            steps, n = d.rewards.shape
            _, logp, all_values = self.evaluate_unrolls(d)
            _, targets = self.vtrace_targets(d, all_values, logp)
            parts.append((d, targets, all_values[: steps * n], logp.reshape(-1), offset))
            offset += n
        norm = self.value_norm
        if norm is not None:  # statistics of this update's targets, then targets in the value output's units
            norm.update(torch.cat([t.vs.reshape(-1) for _, t, _, _, _ in parts]))
        flats, explained = [], []
        for d, targets, old_values, start_logp, offset in parts:
            steps, n = d.rewards.shape
            vs = targets.vs.reshape(-1)
            explained.append(explained_variance(self.returns(old_values), vs))
            flats.append(
                FlatSteps(
                    obs=keyed.flat(keyed.take(d.obs, slice(None, -1))),
                    actions=d.actions.reshape(steps * n, -1),
                    behaviour_logp=d.behaviour_logp.reshape(-1),
                    start_logp=start_logp,
                    advantages=targets.pg_advantages.reshape(-1),
                    targets=vs if norm is None else norm.normalize(vs),
                    old_values=old_values,
                    streams=(torch.arange(n, device=self.device) + offset).repeat(steps),
                )
            )
        return FlatSteps.concat(flats), explained

    def column_minibatches(self, data: list[UnrollTensors]):
        """(part, columns, their rows in the update's FlatSteps, t-major) for `minibatches` groups of whole columns
        of each part: a recurrent core runs over them from their initial states, in order."""
        base = 0
        for part in data:
            steps, n = part.rewards.shape
            order = torch.randperm(n, generator=self.rng).to(self.device)
            for cols in torch.chunk(order, min(self.cfg.minibatches, n)):
                rows = torch.arange(steps, device=self.device).unsqueeze(1) * n + cols.unsqueeze(0)
                yield part, cols, base + rows.reshape(-1)
            base += steps * n

    def sequence_step(self, d: UnrollTensors, b: FlatSteps) -> dict[str, float]:
        """One Adam step on whole columns `d` (a recurrent core), with their targets `b` from the update's start."""
        dist, values = self.net.evaluate_unroll(d, bootstrap=False)
        return self.flat_loss(dist, values, b)

    def flat_step(self, b: FlatSteps) -> dict[str, float]:
        """One Adam step on steps whose targets were computed at the update's start."""
        dist, values = self.net.evaluate(b.obs, b.size)
        return self.flat_loss(dist, values, b)

    def flat_loss(self, dist, values: torch.Tensor, b: FlatSteps) -> dict[str, float]:
        """The step of `flat_step` once the network has given its distribution and values at b's rows."""
        logp = dist.log_prob(b.actions)
        # 'proximal': the clip's trust region is around the policy the update started from (decoupled PPO); the
        # acting version's lag is already weighted into the V-trace advantages, so it is not counted twice
        behaviour = self.clipped and self.cfg.clip_anchor == "behaviour"  # IMPALA has no clip: its KL is proximal
        anchor = b.behaviour_logp if behaviour else b.start_logp
        return self.optimize(
            logp,
            dist.entropy().mean(),
            anchor,
            b.advantages,
            values,
            b.targets,
            b.old_values,
            logp.detach() - b.behaviour_logp,
        )

    def step(self, d: UnrollTensors) -> dict[str, float]:
        """One Adam step with V-trace recomputed from this step's weights (targets = 'per_minibatch')."""
        dist, logp, all_values = self.evaluate_unrolls(d)
        steps, n = d.rewards.shape
        log_rhos, targets = self.vtrace_targets(d, all_values, logp)
        values = all_values[: steps * n]
        vs = targets.vs.reshape(-1)
        norm = self.value_norm
        if norm is not None:
            norm.update(vs)
            vs = norm.normalize(vs)
        metrics = self.optimize(
            logp.reshape(-1),
            dist.entropy().mean(),
            d.behaviour_logp.reshape(-1),
            targets.pg_advantages.reshape(-1),
            values,
            vs,
            None,
            log_rhos.reshape(-1),
        )
        metrics["explained_variance"] = explained_variance(values.detach(), vs)
        return metrics

    def optimize(
        self,
        logp: torch.Tensor,
        entropy: torch.Tensor,
        anchor_logp: torch.Tensor,
        advantages: torch.Tensor,
        values: torch.Tensor,
        targets: torch.Tensor,
        old_values: torch.Tensor | None,
        log_rhos: torch.Tensor,
    ) -> dict[str, float]:
        """The loss of one minibatch (flat steps), one optimizer step, and its diagnostics."""
        cfg = self.cfg
        if cfg.normalize_advantages:
            advantages = normalized_advantages(advantages)
        if self.clipped:
            policy_loss, clip_fraction = clipped_surrogate(logp, anchor_logp, advantages, cfg.clip_ratio)
        else:  # IMPALA: the clipped importance weight is already inside the advantages
            policy_loss = -(logp * advantages).mean()
            clip_fraction = torch.zeros((), device=self.device)
        v_loss = value_loss(values, targets, old_values, cfg.value_clip)
        loss = policy_loss + cfg.value_coef * v_loss - self.entropy_coef() * entropy

        grad_norm = gradient_step(self.optimizer, loss, self.net.parameters(), cfg.max_grad_norm)
        log_ratio = logp.detach() - anchor_logp
        approx_kl = (log_ratio.exp() - 1.0 - log_ratio).mean()  # Schulman's k3 estimator of KL(anchor || pi)
        return scalar_metrics(
            loss=loss.detach(),
            policy_loss=policy_loss.detach(),
            value_loss=v_loss.detach(),
            entropy=entropy.detach(),
            grad_norm=grad_norm.detach().float(),
            rho_mean=log_rhos.exp().mean(),
            clip_fraction=clip_fraction,
            approx_kl=approx_kl,
            value_mean=self.returns(values.detach()).mean(),
        )

    def weights(self) -> dict[str, np.ndarray]:
        return module_weights(self.net)

    def state_dict(self) -> dict[str, Any]:
        return training_state(self)

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Resume from `state_dict()` output; the config's learning rate (and decay) wins over the saved one."""
        load_training_state(self, state)
