"""A counter's rate over the last few seconds (longer for a slow counter), from (time, value) samples."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

RATE_WINDOW_S = 5.0  # the usual window
MIN_EVENTS = 3.0  # a slow counter's window stretches until it holds at least this much growth ...
MAX_WINDOW_S = 120.0  # ... but never further back than this
SAMPLE_SPACING_S = 0.25  # samples closer than this replace the newest one: bounded memory at any call rate


@dataclass
class RateMeter:
    """Rate of a monotonically growing counter over about the last `RATE_WINDOW_S` seconds.

    A counter that grows by less than MIN_EVENTS in that time (a learner making one update every 8 s)
    is measured over a longer window, up to MAX_WINDOW_S, so its rate reads 0.13/s rather than
    alternating between 0 and 0.2 from one window to the next.
    """

    samples: deque = field(default_factory=deque)

    def add(self, now: float, value: float) -> None:
        if len(self.samples) >= 2 and now - self.samples[-2][0] < SAMPLE_SPACING_S:
            self.samples[-1] = (now, value)
        else:
            self.samples.append((now, value))
        while len(self.samples) > 2 and self.can_drop_oldest(now, value):
            self.samples.popleft()

    def can_drop_oldest(self, now: float, value: float) -> bool:
        t1, v1 = self.samples[1]
        if now - self.samples[0][0] > MAX_WINDOW_S:
            return True
        return now - t1 >= RATE_WINDOW_S and value - v1 >= MIN_EVENTS

    def rate(self) -> float:
        if len(self.samples) < 2:
            return 0.0
        (t0, v0), (t1, v1) = self.samples[0], self.samples[-1]
        return (v1 - v0) / (t1 - t0) if t1 > t0 else 0.0
