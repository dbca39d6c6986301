"""V-trace targets and policy-gradient advantages (Espeholt et al. 2018) over [T, N] unrolls with episode ends."""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class VTraceReturns:
    vs: torch.Tensor  # [T, N] value targets
    pg_advantages: torch.Tensor  # [T, N], already weighted by the clipped importance ratio


@torch.no_grad()
def vtrace(
    log_rhos: torch.Tensor,
    rewards: torch.Tensor,
    values: torch.Tensor,
    next_values: torch.Tensor,
    discounts: torch.Tensor,
    continues: torch.Tensor,
    rho_clip: float = 1.0,
    c_clip: float = 1.0,
    pg_rho_clip: float | None = None,
    lam: float = 1.0,
) -> VTraceReturns:
    """V-trace for T steps of N streams.

    log_rhos: log pi(a_t|x_t) - log mu(a_t|x_t). values: V(x_t). next_values: V of the state after step t
    (the next row's state, the truncated episode's last observation, or the state after the unroll).
    discounts: gamma, 0 where the episode terminated. continues: 1 where step t+1 is in the same episode
    (0 at any episode end), so traces never cross into the next episode.
    """
    rhos = torch.exp(log_rhos)
    clipped_rhos = torch.clamp(rhos, max=rho_clip)
    cs = lam * torch.clamp(rhos, max=c_clip)
    deltas = clipped_rhos * (rewards + discounts * next_values - values)
    carry = discounts * continues * cs
    corrections = torch.empty_like(deltas)
    acc = torch.zeros_like(deltas[0])
    for t in range(deltas.shape[0] - 1, -1, -1):  # vs_t - V(x_t) = delta_t + gamma c_t (vs_{t+1} - V(x_{t+1}))
        acc = deltas[t] + carry[t] * acc
        corrections[t] = acc
    vs = values + corrections
    # The target after step t: vs_{t+1} inside an episode, else the bootstrap value (0 weight if terminated).
    vs_next = next_values.clone()
    if vs.shape[0] > 1:
        inside = continues[:-1] > 0
        vs_next[:-1] = torch.where(inside, vs[1:], next_values[:-1])
    pg_rhos = torch.clamp(rhos, max=rho_clip if pg_rho_clip is None else pg_rho_clip)
    pg_advantages = pg_rhos * (rewards + discounts * vs_next - values)
    return VTraceReturns(vs=vs, pg_advantages=pg_advantages)
