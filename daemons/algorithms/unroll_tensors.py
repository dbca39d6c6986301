"""Received unrolls as tensors on the learner's device: stacked side by side, and minibatches of whole columns."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from tandem.daemons.algorithms.distributions import ActionHead
from tandem.daemons.algorithms.torch_util import obs_tensor, to_tensor
from tandem.protocol import TransitionBatch, keyed

BEHAVIOUR_LOGP = "behaviour_logp"  # extra.behaviour_logp: float32 [T, K], log mu(a_t | x_t) of the acting version


@dataclass
class UnrollTensors:
    """Unrolls of one length T side by side as N = sum of their K columns, on the learner's device."""

    obs: torch.Tensor  # [T+1, N, ...], or one such tensor per key of a Dict observation
    actions: torch.Tensor  # [T, N, ...] in the head's form
    rewards: torch.Tensor  # [T, N]
    terminated: torch.Tensor  # [T, N] float
    ended: torch.Tensor  # [T, N] float: terminated or truncated
    behaviour_logp: torch.Tensor  # [T, N]
    finals: torch.Tensor  # [F, ...] last observations of truncated episodes (per key, as obs)
    final_t: torch.Tensor  # [F] row of each final observation
    final_n: torch.Tensor  # [F] column of each final observation
    core_state: torch.Tensor | None = None  # [N, S] the recurrent state each column's first step acted from


@dataclass
class PreparedUnrolls:
    """An update's unrolls made ready: those of one length side by side as one UnrollTensors per length."""

    parts: list[UnrollTensors]


def stack_unrolls(
    unrolls: Sequence[TransitionBatch], head: ActionHead, device: torch.device, reward_scale: float
) -> UnrollTensors:
    """Concatenate unrolls of equal T along K; final observations keep their (t, column) places."""
    obs = keyed.concat([u.obs for u in unrolls], axis=1)
    actions = np.concatenate([u.actions for u in unrolls], axis=1)
    rows, cols, offset = [], [], 0
    for u in unrolls:
        t, k = np.nonzero(u.truncated)  # row-major, the order of final_obs rows
        rows.append(t)
        cols.append(k + offset)
        offset += u.num_envs
    steps, n = actions.shape[:2]
    return UnrollTensors(
        obs=obs_tensor(obs, device),
        actions=head.from_wire(to_tensor(actions.reshape(steps * n, *actions.shape[2:]), device)).reshape(steps, n, -1),
        rewards=to_tensor(np.concatenate([u.rewards for u in unrolls], axis=1), device, torch.float32) * reward_scale,
        terminated=to_tensor(np.concatenate([u.terminated for u in unrolls], axis=1), device, torch.float32),
        ended=to_tensor(np.concatenate([u.terminated | u.truncated for u in unrolls], axis=1), device, torch.float32),
        behaviour_logp=to_tensor(
            np.concatenate([u.extras[BEHAVIOUR_LOGP] for u in unrolls], axis=1), device, torch.float32
        ),
        finals=obs_tensor(keyed.concat([u.final_obs for u in unrolls]), device),
        final_t=torch.as_tensor(np.concatenate(rows), dtype=torch.long, device=device),
        final_n=torch.as_tensor(np.concatenate(cols), dtype=torch.long, device=device),
        core_state=core_states(unrolls, device),
    )


def core_states(unrolls: Sequence[TransitionBatch], device: torch.device) -> torch.Tensor | None:
    """The unrolls' initial recurrent states side by side [N, S], or None for a feed-forward policy's unrolls."""
    if unrolls[0].core_state is None:
        return None
    return to_tensor(np.concatenate([u.core_state for u in unrolls]), device, torch.float32)


def select_columns(data: UnrollTensors, cols: torch.Tensor) -> UnrollTensors:
    """The minibatch of columns `cols` (whole streams, so V-trace still sees each unroll in order)."""
    position = torch.full((data.rewards.shape[1],), -1, dtype=torch.long, device=cols.device)
    position[cols] = torch.arange(len(cols), device=cols.device)
    keep = position[data.final_n] >= 0
    return UnrollTensors(
        obs=keyed.take(data.obs, (slice(None), cols)),
        actions=data.actions[:, cols],
        rewards=data.rewards[:, cols],
        terminated=data.terminated[:, cols],
        ended=data.ended[:, cols],
        behaviour_logp=data.behaviour_logp[:, cols],
        finals=keyed.take(data.finals, keep),
        final_t=data.final_t[keep],
        final_n=position[data.final_n[keep]],
        core_state=None if data.core_state is None else data.core_state[cols],
    )
