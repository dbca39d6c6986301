"""The interfaces between the learner loop, the actor loop and an algorithm, and the batch they pass."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from daemons.replay.batch import SampledBatch


@dataclass(frozen=True)
class UpdateResult:
    """What one update reports: scalar metrics, and new priorities for the sampled slots (or None)."""

    metrics: Mapping[str, float]
    priorities: np.ndarray | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)


class Algorithm(Protocol):
    """Learner side. The learner loop calls it like this:

        while running:
            batch = replay.sample(config.batch_size)
            result = algorithm.update(batch)
            if result.priorities is not None:
                replay.update_priorities(batch.indices, result.priorities)
            if updates % publish_interval == 0:
                publish(WeightBlob.build(policy, version, updates, algorithm.weights()))
        checkpoint(algorithm.state_dict())   # and on start: algorithm.load_state_dict(saved)
    """

    def update(self, batch: SampledBatch) -> UpdateResult: ...

    def weights(self) -> dict[str, np.ndarray]: ...

    def state_dict(self) -> dict[str, Any]: ...

    def load_state_dict(self, state: Mapping[str, Any]) -> None: ...


class Policy(Protocol):
    """Actor side. The actor loop calls it like this:

        for step in ...:
            if new_blob and new_blob.version > policy_version:
                policy.load_weights(new_blob.tensors)   # all or nothing, between steps
            actions = policy.act(obs_of_all_K_envs, epsilons_of_all_K_envs)
    """

    def act(self, obs: np.ndarray, epsilons: np.ndarray) -> np.ndarray: ...

    def load_weights(self, tensors: Mapping[str, np.ndarray]) -> None: ...
