"""When a learner checkpoints: every so many seconds or updates, whichever comes first, within a share of its time."""

from __future__ import annotations

import math

FIRST_CHECKPOINT_S = 10.0  # the first checkpoint after start, whatever learner.checkpoint_interval_s says
MAX_WRITE_SHARE = 0.05  # checkpoints by updates take at most this share of the learner's time (the loop waits)


class CheckpointCadence:
    """Due every `interval_s`, or after `every_updates` updates (0: by time only), whichever comes first.

    A kill loses what was trained since the last checkpoint: at most `every_updates` updates, or
    `interval_s` of training. The learner's loop stops while it writes, so a checkpoint by updates waits
    until the time since the last one is at least its write time / MAX_WRITE_SHARE: a learner fast enough,
    or a checkpoint big enough (the replay with learner.checkpoint_replay), to checkpoint more often would
    spend more than that share of its time writing. A failed write counts as a write here, so a full disk
    is tried again at the cadence, not on every pass.
    """

    def __init__(self, interval_s: float, every_updates: int = 0):
        self.interval_s, self.every_updates = interval_s, every_updates
        self.next_due = math.inf  # by time
        self.last_at: float | None = None
        self.last_updates = 0
        self.write_s = 0.0  # what the last write took

    def start(self, now: float, updates: int) -> None:
        """The loop starts (from a checkpoint with `updates`): the first one comes soon, and by updates from here."""
        self.next_due = now + min(FIRST_CHECKPOINT_S, self.interval_s)
        self.last_updates = updates

    def due(self, now: float, updates: int) -> bool:
        if now >= self.next_due:
            return True
        if self.every_updates <= 0 or updates - self.last_updates < self.every_updates:
            return False
        return self.last_at is None or now - self.last_at >= self.write_s / MAX_WRITE_SHARE

    def written(self, now: float, updates: int, write_s: float) -> None:
        """A checkpoint was written (or tried) at `now`, with `updates`, in `write_s` seconds."""
        self.last_at, self.last_updates, self.write_s = now, updates, write_s
        self.next_due = now + self.interval_s
