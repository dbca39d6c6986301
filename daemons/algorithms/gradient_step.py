"""One optimizer step from a loss: gradients zeroed, backward, clipped, stepped; averaged first in a replica group.

A data-parallel learner's replica group installs a `GradientSync` here (tandem.daemons.learner.replica_group): it
is told which parameters a backward pass is for before it runs, so it can start reducing their gradients while
the pass is still computing the rest (as DistributedDataParallel does), and it returns once every one of them holds
the group's mean. Clipping then sees the averaged gradient, as it would in one learner training on the whole batch.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Protocol

import torch
from torch import nn


class GradientSync(Protocol):
    """What averages a backward pass's gradients across a replica group (at most one per process)."""

    def begin(self, params: list[torch.Tensor]) -> None:
        """Before backward: the gradients of `params` may be reduced as soon as each is ready."""

    def finish(self) -> None:
        """After backward: every gradient of the parameters given to `begin` holds the group's mean."""


SYNCS: list[GradientSync] = []  # the learner's replica group, while it is installed


def gradient_step(
    optimizer: Any, loss: torch.Tensor, params: Iterable[torch.Tensor], max_grad_norm: float
) -> torch.Tensor:
    """Zero the gradients, backpropagate `loss`, average across replicas where a group is installed, clip to
    `max_grad_norm` (no clipping when it is 0 or less), step. Returns the gradient norm before clipping."""
    trained = [p for p in params if p.requires_grad]
    optimizer.zero_grad(set_to_none=True)
    for sync in SYNCS:
        sync.begin(trained)
    loss.backward()
    for sync in SYNCS:
        sync.finish()
    # an infinite bound measures the norm and scales by 1
    norm = nn.utils.clip_grad_norm_(trained, max_grad_norm if max_grad_norm > 0 else float("inf"))
    optimizer.step()
    return norm
