"""The on-policy learner's data: a bounded queue of whole unrolls, trained on in arrival order, lag checked at use."""

from __future__ import annotations

import time
from collections import deque
from typing import Any

import numpy as np

from tandem.protocol import TransitionBatch, stacks

QUEUE_BATCHES = 2  # the queue holds this many updates' worth of transitions (and, paced by credit, the room below)
ROOM_TTL_S = 5.0  # a stream not heard from for this long no longer has room kept for its unroll (as pacing's shares)
ROOM_SWEEP_S = 1.0  # streams gone quiet are looked for at most this often


class UnrollFeed:
    """Each update takes the oldest unrolls until they hold `batch_size` transitions.

    An unroll more than `max_lag` versions behind the learner when its turn comes is dropped (V-trace
    corrects lag, but not without bound); when actors produce faster than the learner trains, the oldest
    queued unroll is dropped so that what is trained on stays fresh. Both are counted. A Feed
    (algorithms/base.py).
    """

    publish_every = 1  # on-policy: every update is a new behaviour policy for the actors
    can_prefetch = False  # the next update should take the freshest unrolls, not ones queued an update ago
    credit_pacing = True  # one update's transitions per version is exactly what the actors should send
    room_for_rounds = False  # set by paced_by_credit: the queue also holds one unroll of every stream heard lately

    def __init__(self, batch_size: int, max_lag: int):
        self.batch_size, self.max_lag = batch_size, max_lag
        self.consumed_per_update = float(batch_size)  # every transition is trained on once
        self.capacity = QUEUE_BATCHES * batch_size
        self.rounds: dict[str, tuple[int, float]] = {}  # stream -> (its largest unroll, when last heard)
        self.room = 0  # their sum, kept as they change: fill() reads it without the feed's lock
        self.swept_at = 0.0
        self.queue: deque[TransitionBatch] = deque()
        self.queued = 0
        self.dropped_full = 0
        self.dropped_stale = 0

    def can_accept(self) -> bool:
        return True  # reading everything keeps the sockets short; the queue drops its oldest instead

    @staticmethod
    def prepare(batch: TransitionBatch) -> TransitionBatch:
        return batch  # an unroll is queued as it came

    def insert(self, batch: TransitionBatch) -> int:
        return self.add(batch)

    def filling(self) -> bool:
        return False  # every update takes fresh unrolls: there is nothing to fill first

    def fill(self) -> float:
        """0: nothing queued; 1: the queue is full and arrivals push out its oldest unrolls."""
        return min(1.0, self.queued / self.limit())

    def paced_by_credit(self) -> None:
        """The actors are paced by a credit per version: keep room for the unroll each of them may send past it.

        An actor with any credit left sends a whole unroll, so the credit can put up to one unroll per actor more
        than QUEUE_BATCHES updates in flight. Dropping that surplus loses its credit for good (no version comes of
        a dropped unroll), and with unrolls larger than an actor's share of an update (three actors of 512
        transitions feeding updates of 512) the credit in circulation ran out: every actor waited for a version no
        data was left to make, and the learner for data, until the credit expired. Without a credit (pacing by
        rate, none, an action server's games) the queue keeps to QUEUE_BATCHES updates, the freshest data."""
        self.room_for_rounds = True

    def limit(self) -> int:
        """Transitions queued past which the oldest unroll goes."""
        return self.capacity + self.room

    def remember(self, batch: TransitionBatch, now: float) -> None:
        """Room for the largest unroll of each stream heard from in the last ROOM_TTL_S."""
        stream = batch.actor_id
        largest, _ = self.rounds.get(stream, (0, now))
        size = max(largest, batch.num_transitions)
        self.rounds[stream] = (size, now)
        self.room += size - largest
        if now - self.swept_at >= ROOM_SWEEP_S:
            self.swept_at = now
            for quiet in [s for s, (_, heard) in self.rounds.items() if now - heard > ROOM_TTL_S]:
                self.room -= self.rounds.pop(quiet)[0]

    def add(self, batch: TransitionBatch) -> int:
        if batch.num_transitions == 0:
            return 0
        if self.room_for_rounds:
            self.remember(batch, time.monotonic())
        self.queue.append(batch)
        self.queued += batch.num_transitions
        limit = self.limit()
        while self.queued - self.queue[0].num_transitions >= limit:
            self.queued -= self.queue.popleft().num_transitions
            self.dropped_full += 1
        return batch.num_transitions

    def next_batch(self, version: int) -> list[TransitionBatch] | None:
        """The unrolls of one update, or None until enough fresh ones are queued."""
        while self.queue and version - self.queue[0].policy_version > self.max_lag:
            self.queued -= self.queue.popleft().num_transitions
            self.dropped_stale += 1
        if self.queued < self.batch_size:
            return None
        taken, count = [], 0
        while count < self.batch_size:
            unroll = self.queue.popleft()
            taken.append(unroll)
            count += unroll.num_transitions
        self.queued -= count
        # Queued unrolls keep frame stacks as frames (PROTOCOL.md 2.1.2); only the ones trained on now are rebuilt,
        # side by side in one array, which the update takes as it is
        return stacks.unpack_side_by_side(taken)

    @staticmethod
    def lag_of(unrolls: list[TransitionBatch], version: int) -> float:
        weights = [u.num_transitions for u in unrolls]
        return float(np.average([version - u.policy_version for u in unrolls], weights=weights))

    def after_update(self, unrolls: list[TransitionBatch], result: Any) -> None:
        pass

    def counters(self) -> dict[str, float]:
        return {
            "replay_size": self.queued,
            "replay_fill": self.queued / self.limit(),
            "unrolls_dropped_full": self.dropped_full,
        }

    def state_dict(self) -> dict[str, Any]:
        return {}  # unrolls are seconds old: a restarted learner waits for fresh ones

    def load_state_dict(self, state: dict[str, Any]) -> None:
        pass
