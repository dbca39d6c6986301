"""Running mean and variance (Chan et al.'s update) as module buffers: they checkpoint and travel with the weights."""

from __future__ import annotations

import torch
from torch import nn

EPSILON = 1e-8  # added to the variance before its square root: a constant input must not divide by 0
START_COUNT = 1e-4  # the prior's weight: the first batch all but replaces mean 0 and variance 1


class RunningMeanStd(nn.Module):
    """Mean and variance over every row seen so far, per feature of `shape`.

    `update(x)` folds in a batch [B, *shape]; `normalize` maps to mean 0 and variance 1, `denormalize`
    back. The statistics are buffers: they are part of the state dict (checkpoints, published weights),
    not parameters (no gradient reaches them, the optimizer never sees them).
    """

    def __init__(self, shape: tuple[int, ...] = (1,), clip: float = 0.0, epsilon: float = EPSILON):
        super().__init__()
        self.clip = clip  # > 0: normalized values are clamped to [-clip, clip] (outliers of a new state)
        self.epsilon = epsilon
        self.register_buffer("mean", torch.zeros(shape))
        self.register_buffer("var", torch.ones(shape))
        # shape (1,), not (): a weight blob carries arrays of at least one dimension
        self.register_buffer("count", torch.full((1,), START_COUNT, dtype=torch.float64))

    @torch.no_grad()
    def update(self, x: torch.Tensor) -> None:
        x = x.reshape(-1, *self.mean.shape).to(self.mean.dtype)
        batch_count = x.shape[0]
        if batch_count == 0:
            return
        batch_mean = x.mean(dim=0)
        batch_var = x.var(dim=0, unbiased=False)
        total = self.count + batch_count
        delta = batch_mean - self.mean
        count, share = float(self.count), float(batch_count / total)
        self.mean.add_(delta * share)
        m2 = self.var * count + batch_var * batch_count + delta.pow(2) * count * share
        self.var.copy_(m2 / float(total))
        self.count.copy_(total)

    def normalize(self, x: torch.Tensor, pre_scale: float = 1.0) -> torch.Tensor:
        """(x * pre_scale - mean) / std, clipped: `pre_scale` puts raw inputs into the statistics' units (pixels
        into [0, 1]) in the same pass. One multiply-add over x and an in-place clamp: on a batch of images the
        passes over x are the cost, the per-feature factors (computed here each call) are not."""
        inv_std = torch.rsqrt(self.var + self.epsilon)
        out = torch.addcmul(-self.mean * inv_std, x, inv_std * pre_scale)
        return out.clamp_(-self.clip, self.clip) if self.clip > 0 else out

    def denormalize(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.sqrt(self.var + self.epsilon) + self.mean
