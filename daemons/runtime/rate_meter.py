"""A counter's rate over the last few seconds, from (time, value) samples with an explicit clock."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

RATE_WINDOW_S = 5.0


@dataclass
class RateMeter:
    """Rate of a monotonically growing counter over about the last `RATE_WINDOW_S` seconds."""

    samples: deque = field(default_factory=lambda: deque(maxlen=64))

    def add(self, now: float, value: float) -> None:
        self.samples.append((now, value))
        while len(self.samples) > 2 and now - self.samples[0][0] > RATE_WINDOW_S:
            self.samples.popleft()

    def rate(self) -> float:
        if len(self.samples) < 2:
            return 0.0
        (t0, v0), (t1, v1) = self.samples[0], self.samples[-1]
        return (v1 - v0) / (t1 - t0) if t1 > t0 else 0.0
