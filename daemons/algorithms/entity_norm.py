"""Entity features as running statistics scale them: per feature of each entity type, over the entities present.

RogueNet (EntityGym's policy) scales every entity's features this way; without it a feature measured in
hundreds (Minefield's positions run from -100 to 100) swamps the embedding. The statistics are buffers of the
network, so they travel with the published weights and an export, like `algorithm.normalize_obs` for vectors.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import numpy as np
import torch
from torch import nn

from tandem.daemons.algorithms.input_norm import OBS_CLIP
from tandem.daemons.algorithms.running_norm import RunningMeanStd

GLOBAL_KEY = "global"
log = logging.getLogger(__name__)


class EntityFeatureNorm(nn.ModuleDict):
    """One RunningMeanStd per entity type (its `features`, keyed by the type's index) and one for the global
    features; padding rows never reach the statistics."""

    def __init__(self, features: list[int], global_size: int):
        norms = {str(i): RunningMeanStd((n,), clip=OBS_CLIP) for i, n in enumerate(features) if n}
        if global_size:
            norms[GLOBAL_KEY] = RunningMeanStd((global_size,), clip=OBS_CLIP)
        super().__init__(norms)

    def scaled(self, key: str, x: torch.Tensor) -> torch.Tensor:
        """x [..., features] in the statistics' units (as it is where the key keeps none: a type with no features)."""
        return self[key].normalize(x) if key in self else x

    @torch.no_grad()
    def fold(self, key: str, rows: torch.Tensor) -> None:
        """Folds rows [R, features] (present entities only) into the key's statistics."""
        if key in self and rows.shape[0]:
            self[key].update(rows)


def with_fresh_statistics(net: nn.Module | None, saved: Mapping[str, Any]) -> Mapping[str, Any]:
    """`saved` (a checkpoint's network tensors, torch or numpy) with fresh statistics added where `net` scales entity
    features and the checkpoint has none: before 2026-11-29 `algorithm.normalize_obs` was ignored by the entity
    policy, so a run that set it saved no statistics. They start afresh (mean 0, variance 1), with a warning."""
    norm = getattr(net, "obs_norm", None)
    if not isinstance(norm, EntityFeatureNorm) or any(str(key).startswith("obs_norm.") for key in saved):
        return saved
    log.warning(
        "the checkpoint has no entity feature statistics (it was saved before algorithm.normalize_obs scaled "
        "entity features): they start afresh, and the policy sees its features scaled from now on"
    )
    if any(isinstance(value, np.ndarray) for value in saved.values()):  # weights in their wire form: float32 arrays
        fresh = {f"obs_norm.{key}": value.float().numpy() for key, value in norm.state_dict().items()}
    else:
        fresh = {f"obs_norm.{key}": value for key, value in norm.state_dict().items()}
    return {**saved, **fresh}
