"""The interfaces between the learner loop, the actor loop and an algorithm module."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np


@dataclass(frozen=True)
class UpdateResult:
    """What one update reports: scalar metrics, and new priorities for the sampled slots (or None)."""

    metrics: Mapping[str, float]
    priorities: np.ndarray | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)


class Algorithm(Protocol):
    """Learner side. The learner loop calls it like this, whatever the algorithm:

        payload = feed.next_batch(version)          # a replay sample, or a list of whole unrolls
        result = algorithm.update(payload)
        feed.after_update(payload, result)          # e.g. new priorities into replay
        publish(WeightBlob.build(policy, version, updates, algorithm.weights()))   # every feed.publish_every
        checkpoint(algorithm.state_dict())          # and on start: algorithm.load_state_dict(saved)

    Every received batch goes through `check_batch` (ValueError: counted as malformed and dropped) before
    it reaches the feed, so `update` never sees actions outside the action space or missing extras.
    """

    def check_batch(self, batch: Any) -> None: ...

    def update(self, payload: Any) -> UpdateResult: ...

    def weights(self) -> dict[str, np.ndarray]: ...

    def state_dict(self) -> dict[str, Any]: ...

    def load_state_dict(self, state: Mapping[str, Any]) -> None: ...


class Policy(Protocol):
    """Actor side. Actors call `explore` (its extras travel as `extra.NAME` arrays of the unroll), the
    evaluator calls `act` (greedy at epsilon 0); new weights are swapped in between unrolls, all or nothing:

        actions, extras = policy.explore(obs_of_all_K_envs, epsilons_of_all_K_envs)
        actions = policy.act(obs, zeros)
        policy.load_weights(new_blob.tensors)
    """

    def explore(self, obs: np.ndarray, epsilons: np.ndarray) -> tuple[np.ndarray, dict[str, np.ndarray]]: ...

    def act(self, obs: np.ndarray, epsilons: np.ndarray) -> np.ndarray: ...

    def load_weights(self, tensors: Mapping[str, np.ndarray]) -> None: ...


# An algorithm module (listed in `tandem.daemons.algorithms.ALGORITHMS`) provides:
#   FEED                                   'replay' or 'unrolls': which data path its learner gets
#   check_action_space(name, action_space) ValueError when it cannot act in that space
#   make_learner(name, config, obs_space, action_space, device, mask_size) -> Algorithm
#   make_policy(name, config, obs_space, action_space, seed, mask_size)    -> Policy
