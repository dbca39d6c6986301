"""On-policy loss terms: PPO's clipped surrogate, the (optionally clipped) value loss, advantage scaling."""

from __future__ import annotations

import torch


def normalized_advantages(advantages: torch.Tensor) -> torch.Tensor:
    """Mean 0, standard deviation 1 (unchanged when there is a single element: no spread to scale by)."""
    if advantages.numel() <= 1:
        return advantages
    return (advantages - advantages.mean()) / (advantages.std() + 1e-8)


def clipped_surrogate(
    logp: torch.Tensor, behaviour_logp: torch.Tensor, advantages: torch.Tensor, clip_ratio: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """PPO's policy loss -E[min(r A, clip(r, 1-eps, 1+eps) A)] with r = pi/mu, and the share of clipped ratios."""
    ratio = torch.exp(logp - behaviour_logp)
    clipped = torch.clamp(ratio, 1.0 - clip_ratio, 1.0 + clip_ratio)
    loss = -torch.min(ratio * advantages, clipped * advantages).mean()
    clip_fraction = ((ratio - 1.0).abs() > clip_ratio).float().mean()
    return loss, clip_fraction


def value_loss(
    values: torch.Tensor, targets: torch.Tensor, old_values: torch.Tensor | None = None, clip: float = 0.0
) -> torch.Tensor:
    """0.5 E[(V - target)^2]; with `clip` > 0 and the values before the update, PPO's pessimistic form:
    0.5 E[max((V - target)^2, (V_old + clip(V - V_old, -clip, clip) - target)^2)]."""
    squared = (values - targets).pow(2)
    if clip > 0 and old_values is not None:
        clipped = old_values + torch.clamp(values - old_values, -clip, clip)
        squared = torch.max(squared, (clipped - targets).pow(2))
    return 0.5 * squared.mean()


def explained_variance(predicted: torch.Tensor, targets: torch.Tensor) -> float:
    """1 - Var[target - V] / Var[target]: 1 is a perfect critic, 0 no better than a constant (nan: targets constant)."""
    var = targets.var() if targets.numel() > 1 else torch.zeros(())
    if float(var) == 0.0:
        return float("nan")
    return float(1.0 - (targets - predicted).var() / var)


def scalar_metrics(**scalars: torch.Tensor) -> dict[str, float]:
    """An update's diagnostics (0-d tensors) as floats, moved off the device in one copy instead of one each."""
    values = torch.stack([t.reshape(()) for t in scalars.values()]).cpu().numpy()
    return {name: float(value) for name, value in zip(scalars, values)}
