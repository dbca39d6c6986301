"""Where a loop's time goes (a learner's: waiting for data, preparing, computing updates, publishing weights)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

# wait: nothing to train on (idle, or starved of data); prepare: the next batch taken from the feed (stacks
# rebuilt, replay sampled) and made ready for the update, and received batches decoded and checked when that is
# done inline (learner.intake_thread = false: the receiver thread's work is on its own thread, in no part); compute: the
# update itself; publish: the new version's weights sent. The rest of the loop (checkpoints, metrics, chores) is
# "other".
PARTS = ("wait", "prepare", "compute", "publish")
COUNTER_PREFIX = "time_"  # time_wait, ...: the share of the last window's wall time, 0..1


class TimeSplit:
    """Seconds spent in each part since the last window closed, and each part's share of the window before."""

    def __init__(self, clock=time.perf_counter):
        self.clock = clock
        self.seconds = dict.fromkeys(PARTS, 0.0)
        self.window_start = clock()
        self.shares: dict[str, float] = {}  # empty until the first window closes

    @contextmanager
    def timing(self, part: str) -> Iterator[None]:
        """Counts the time inside the block to `part`."""
        start = self.clock()
        try:
            yield
        finally:
            self.seconds[part] += self.clock() - start

    def close_window(self) -> dict[str, float]:
        """Each part's share of the wall time since the last call (and "other", the rest); starts the next window."""
        now = self.clock()
        elapsed = now - self.window_start
        if elapsed <= 0:
            return self.shares
        shares = {part: min(1.0, seconds / elapsed) for part, seconds in self.seconds.items()}
        shares["other"] = max(0.0, 1.0 - sum(shares.values()))
        self.shares = {COUNTER_PREFIX + part: round(share, 4) for part, share in shares.items()}
        self.seconds = dict.fromkeys(PARTS, 0.0)
        self.window_start = now
        return self.shares
