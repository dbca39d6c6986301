"""Holds sampled-per-inserted transitions near a target ratio, as Reverb's SampleToInsertRatio does."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class RateLimiter:
    """Counts transitions inserted and sampled once replay holds `min_size`, and gates both sides.

    With `diff = samples_per_insert * inserted - sampled`, training is allowed while `diff >= -error_buffer`
    (it may not run ahead of the data) and receiving while `diff <= error_buffer` (a fast actor cannot
    leave the learner arbitrarily behind: the learner stops reading, its socket fills, and the actor's
    bounded backlog drops its oldest batches, counted). Transitions before `min_size` are not counted,
    nor any before the first sample: what arrives while the learner cannot train yet (its first optimizer
    step imports for seconds) is part of the initial fill, not data to throw away for the ratio.
    """

    samples_per_insert: float
    min_size: int
    error_buffer: float
    inserted: int = 0
    sampled: int = 0

    def diff(self) -> float:
        return self.samples_per_insert * self.inserted - self.sampled

    def fill(self) -> float:
        """The ratio's position in its slack: 0 when sampling must wait for data, 1 when inserts are refused."""
        return min(1.0, max(0.0, (self.diff() + self.error_buffer) / (2.0 * self.error_buffer)))

    def can_insert(self, replay_size: int) -> bool:
        return replay_size < self.min_size or self.sampled == 0 or self.diff() <= self.error_buffer

    def can_sample(self, replay_size: int, batch_size: int) -> bool:
        return replay_size >= self.min_size and self.diff() - batch_size >= -self.error_buffer

    def record_insert(self, count: int, replay_size_before: int) -> None:
        """`count` transitions went in; only those beyond `min_size`, once training began, count toward the ratio."""
        if self.sampled:
            self.inserted += max(0, replay_size_before + count - max(replay_size_before, self.min_size))

    def record_sample(self, count: int) -> None:
        self.sampled += count
