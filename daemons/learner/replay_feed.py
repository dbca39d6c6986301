"""The off-policy learner's data: n-step windows into a replay ring, sampled at a held samples-per-insert ratio."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from daemons.config.schema import RunConfig
from daemons.learner.rate_limiter import RateLimiter
from daemons.replay import NStepAccumulator, ReplayBuffer, SampledBatch
from protocol import TransitionBatch


class ReplayFeed:
    """Received unrolls become n-step transitions in replay; each update samples `algorithm.batch_size` of them."""

    def __init__(self, config: RunConfig, obs_space: gym.Space, action_space: gym.Space):
        self.config = config
        self.replay = ReplayBuffer(
            config.learner.replay_capacity, obs_space.shape, np.dtype(obs_space.dtype), action_space.shape or (),
            np.dtype(action_space.dtype or np.int64), prioritized=config.algorithm.prioritized,
            alpha=config.algorithm.priority_alpha, seed=config.run.seed,
        )
        self.nstep = NStepAccumulator(config.algorithm.n_step, config.algorithm.gamma)
        spi, batch = config.learner.samples_per_insert, config.algorithm.batch_size
        self.limiter = RateLimiter(spi, config.learner.replay_min_size, error_buffer=max(4.0 * batch, 2.0 * spi * 256))
        self.publish_every = config.learner.publish_interval_updates

    def can_accept(self) -> bool:
        """False while the learner is more than the limiter's slack behind the target ratio."""
        return self.limiter.can_insert(len(self.replay))

    def filling(self) -> bool:
        """Replay is below its minimum size: take everything (no insert budget yet)."""
        return len(self.replay) < self.limiter.min_size

    def fill(self) -> float:
        """Where the ratio stands: 0 = training waits for data, 1 = arriving batches are thrown away."""
        return self.limiter.fill()

    def add(self, batch: TransitionBatch) -> int:
        before = len(self.replay)
        added = self.replay.add(self.nstep.add(batch))
        self.limiter.record_insert(added, before)
        return added

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
        return {"replay_size": len(self.replay), "replay_fill": len(self.replay) / self.replay.capacity,
                "nstep_discarded": self.nstep.discarded}

    def state_dict(self) -> dict[str, Any]:
        return self.replay.state_dict() if self.config.learner.checkpoint_replay else {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if state:
            self.replay.load_state_dict(state)
