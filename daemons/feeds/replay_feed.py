"""The off-policy learner's data: n-step windows into a replay ring, sampled at a held samples-per-insert ratio."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from tandem.daemons.feeds.rate_limiter import RateLimiter
from tandem.daemons.replay import FrameReplay, NStepAccumulator, NStepTransitions, ReplayBuffer, SampledBatch
from tandem.daemons.settings.schema import ReplaySection, RunConfig
from tandem.protocol import TransitionBatch, stacks


def consumed_per_update(config: RunConfig, replay: bool) -> float:
    """Inserted transitions one update uses up: batch / samples_per_insert off-policy, the whole batch on-policy."""
    batch = config.algorithm.batch_size
    return batch / config.learner.samples_per_insert if replay else float(batch)


class ReplayFeed:
    """Received unrolls become n-step transitions in replay; each update samples `algorithm.batch_size` of them.

    A Feed (algorithms/base.py). The algorithm's [algorithm] section is a ReplaySection, which declares the
    keys read here: n_step, prioritized, priority_alpha and priority_beta (Double DQN's and SAC's are).
    """

    can_prefetch = True  # a sample is as good one update early (Ape-X draws with priorities one update old)
    credit_pacing = False  # transitions are sampled many times: actors are paced by rate

    def __init__(self, config: RunConfig, obs_space: gym.Space, action_space: gym.Space):
        if not isinstance(config.algorithm, ReplaySection):
            raise TypeError(
                f"algorithm {config.algorithm.name!r} feeds from ReplayFeed, so its [algorithm] section must subclass "
                f"ReplaySection (tandem.algorithms), not {type(config.algorithm).__name__}"
            )
        self.config = config
        shape = tuple(obs_space.shape or ())
        stack = config.env.frames_per_obs(shape)
        common = dict(
            prioritized=config.algorithm.prioritized, alpha=config.algorithm.priority_alpha, seed=config.run.seed
        )
        action_shape, action_dtype = action_space.shape or (), np.dtype(action_space.dtype or np.int64)
        if stack > 1:  # each frame stored once; the replay runs its own n-step windows over frame numbers
            self.replay = FrameReplay(
                config.learner.replay_capacity,
                shape,
                np.dtype(obs_space.dtype),
                action_shape,
                action_dtype,
                config.algorithm.n_step,
                config.algorithm.gamma,
                **common,
            )
            self.nstep = self.replay.nstep
            # its n-step windows and frame writes are one step, done under the lock
            self._prepare, self._insert = (lambda batch: batch), self.replay.add
        else:
            self.replay = ReplayBuffer(
                config.learner.replay_capacity, shape, np.dtype(obs_space.dtype), action_shape, action_dtype, **common
            )
            self.nstep = NStepAccumulator(config.algorithm.n_step, config.algorithm.gamma)
            self._prepare = lambda batch: self.nstep.add(stacks.unpack(batch))
            self._insert = self.replay.add
        spi, batch = config.learner.samples_per_insert, config.algorithm.batch_size
        self.limiter = RateLimiter(spi, config.learner.replay_min_size, error_buffer=max(4.0 * batch, 2.0 * spi * 256))
        self.publish_every = config.learner.publish_interval_updates
        self.consumed_per_update = consumed_per_update(config, replay=True)

    def can_accept(self) -> bool:
        """False while the learner is more than the limiter's slack behind the target ratio."""
        return self.limiter.can_insert(len(self.replay))

    def filling(self) -> bool:
        """Replay is below its minimum size: take everything (no insert budget yet)."""
        return len(self.replay) < self.limiter.min_size

    def fill(self) -> float:
        """Where the ratio stands: 0 = training waits for data, 1 = arriving batches are thrown away."""
        return self.limiter.fill()

    def paced_by_credit(self) -> None:
        pass  # never asked (credit_pacing is False): replay is paced by rate

    def prepare(self, batch: TransitionBatch) -> NStepTransitions | TransitionBatch:
        """The n-step arithmetic: state of the receiving side only, so it needs no lock against sampling."""
        return self._prepare(batch)

    def insert(self, transitions: NStepTransitions | TransitionBatch) -> int:
        """Into the ring, counted by the limiter; shares state with `next_batch` (the caller holds the lock)."""
        before = len(self.replay)
        added = self._insert(transitions)
        self.limiter.record_insert(added, before)
        return added

    def add(self, batch: TransitionBatch) -> int:
        return self.insert(self.prepare(batch))

    dropped_stale = 0  # lag is checked on arrival only: replay holds transitions for a long time by design

    def next_batch(self, version: int) -> SampledBatch | None:
        """A sample once the ratio allows an update, else None."""
        size, batch_size = len(self.replay), self.config.algorithm.batch_size
        if not self.limiter.can_sample(size, batch_size):
            return None
        self.limiter.record_sample(batch_size)
        return self.replay.sample(batch_size, beta=self.config.algorithm.priority_beta)

    @staticmethod
    def lag_of(sample: SampledBatch, version: int) -> float:
        return float(np.mean(version - sample.versions))

    def after_update(self, sample: SampledBatch, result: Any) -> None:
        if result.priorities is not None and self.config.algorithm.prioritized:
            self.replay.update_priorities(sample.indices, result.priorities)

    def counters(self) -> dict[str, float]:
        counts = {
            "replay_size": len(self.replay),
            "replay_fill": len(self.replay) / self.replay.capacity,
            "nstep_discarded": self.nstep.discarded,
        }
        if isinstance(self.replay, FrameReplay):
            counts.update(
                replay_dropped_overwritten=self.replay.dropped_overwritten,
                replay_batches_unstackable=self.replay.batches_unstackable + self.replay.batches_too_large,
            )
        return counts

    def state_dict(self) -> dict[str, Any]:
        return self.replay.state_dict() if self.config.learner.checkpoint_replay else {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if state:
            self.replay.load_state_dict(state)
