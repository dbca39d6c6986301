"""The interfaces between the learner loop, the actor loop and an algorithm: learner, policy and feed."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

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

    An algorithm may also have `prepare(payload)`, the batch made ready for `update` (tensors on the device,
    unrolls side by side): the learner calls it as soon as it takes the batch, counts its time as preparing
    rather than computing (the learner's time split), and hands `update` what it returned. Without it,
    `update` gets the payload as the feed gave it. `update` should take either, as APPO's does.

    An update that takes many seconds (epochs of a CNN on a busy CPU) may call `algorithm.progress()` between
    its steps when the learner has set that attribute: the learner then goes on heartbeating, and is not
    taken for hung by the supervisor in the middle of real work. It is optional; a plug-in that never calls
    it only has to finish each update within `supervisor.liveness_timeout_s`.
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

    A policy with a recurrent core (model.core) also takes `state=` [K, S] float32 in both calls, the state each
    env acts from, and writes the state after the step into it; its callers keep it per env and zero it where an
    episode starts. A feed-forward policy is never passed `state`.
    """

    def explore(self, obs: np.ndarray, epsilons: np.ndarray) -> tuple[np.ndarray, dict[str, np.ndarray]]: ...

    def act(self, obs: np.ndarray, epsilons: np.ndarray) -> np.ndarray: ...

    def load_weights(self, tensors: Mapping[str, np.ndarray]) -> None: ...


def explore_with(
    policy: Policy, obs: np.ndarray, epsilons: np.ndarray, state: np.ndarray | None
) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """`policy.explore`, handing a recurrent policy its state [K, S] to advance (None: called as any policy is)."""
    return policy.explore(obs, epsilons) if state is None else policy.explore(obs, epsilons, state=state)


def act_with(policy: Policy, obs: np.ndarray, epsilons: np.ndarray, state: np.ndarray | None) -> np.ndarray:
    """`policy.act`, handing a recurrent policy its state [K, S] to advance (None: called as any policy is)."""
    return policy.act(obs, epsilons) if state is None else policy.act(obs, epsilons, state=state)


@runtime_checkable
class Feed(Protocol):
    """The learner's data between arrival and update, whatever the algorithm (an AlgorithmSpec makes it).
    The receiving side (the intake thread) and the training loop call it like this, under one lock except
    for `prepare`, which holds state of the receiving side only:

        if feed.can_accept():                       # else the batch is dropped and counted
            feed.insert(feed.prepare(batch))        # -> transitions inserted
        payload = feed.next_batch(version)          # None: no update yet (warming up, or waiting for data)
        result = algorithm.update(payload)
        feed.after_update(payload, result)
        lag = feed.lag_of(payload, version)         # versions the trained-on data lags behind, on average

    The attributes say how it is trained on, so the learner never asks which feed it has.
    """

    publish_every: int  # updates between two published weight versions
    consumed_per_update: float  # inserted transitions one update uses up (the insert budget's unit)
    can_prefetch: bool  # the next payload may be drawn one update ahead (learner.prefetch): it need not be fresh
    credit_pacing: bool  # each update takes fresh data: actors may be paced by one update's worth per version
    dropped_stale: int  # data dropped as too old when its turn came (counted in batches_stale)

    def can_accept(self) -> bool: ...

    def prepare(self, batch: Any) -> Any: ...

    def insert(self, prepared: Any) -> int: ...

    def add(self, batch: Any) -> int: ...

    def filling(self) -> bool: ...

    def fill(self) -> float: ...

    def paced_by_credit(self) -> None: ...  # (credit_pacing feeds) the actors follow a credit per version

    def next_batch(self, version: int) -> Any | None: ...

    def after_update(self, payload: Any, result: UpdateResult) -> None: ...

    def lag_of(self, payload: Any, version: int) -> float: ...

    def counters(self) -> dict[str, float]: ...

    def state_dict(self) -> dict[str, Any]: ...

    def load_state_dict(self, state: dict[str, Any]) -> None: ...
