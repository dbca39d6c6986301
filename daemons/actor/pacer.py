"""An actor's pace: a token bucket at its share of its learner's advertised insert budget (explicit clock)."""

from __future__ import annotations

MAX_SLICE_S = 0.05  # the longest single wait: the actor still heartbeats, polls weights and sees the stop flag
MIN_WAIT_S = 1e-4  # a shorter wait is not worth a sleep (and rounding must never leave a wait of ~0 forever)
BURST_S = 0.25  # the bucket holds this many seconds of sending: a short stall is caught up, a long one is not
MIN_TTL_S = 2.0  # advice expires after at least this long without a newer weight version ...
TTL_INTERVALS = 4.0  # ... or this many of the usual intervals between versions, whichever is longer
INTERVAL_SMOOTHING = 0.2


class Pacer:
    """Tokens accrue at the followed rate (transitions/s) up to a burst; sending spends them, possibly into debt.

    `wait_s(now)` says how long to wait before the next unroll may start (0 when the balance is not
    negative), at most `max_slice_s` at a time. A budget of 0, or one older than its time to live (no
    newer version arrived: the learner may be gone, restarting or starved), means no limit, so an actor
    never waits for an absent learner.
    """

    def __init__(self, max_slice_s: float = MAX_SLICE_S, burst_s: float = BURST_S, min_ttl_s: float = MIN_TTL_S):
        self.max_slice_s, self.burst_s, self.min_ttl_s = max_slice_s, burst_s, min_ttl_s
        self.share_per_s = 0.0
        self.advised_at: float | None = None
        self.interval_s: float | None = None  # smoothed time between two pieces of advice (weight versions)
        self.tokens = 0.0
        self.last: float | None = None

    def advise(self, now: float, pace_per_s: float, streams: int) -> None:
        """A new weight version arrived carrying the learner's budget for all `streams` actors (0 = none)."""
        if self.advised_at is not None:
            gap = max(0.0, now - self.advised_at)
            self.interval_s = gap if self.interval_s is None else (
                INTERVAL_SMOOTHING * gap + (1 - INTERVAL_SMOOTHING) * self.interval_s)
        self.advised_at = now
        self.refill(now)  # tokens earned so far accrue at the old rate
        self.share_per_s = pace_per_s / max(1, streams) if pace_per_s > 0 else 0.0

    def ttl_s(self) -> float:
        return max(self.min_ttl_s, TTL_INTERVALS * (self.interval_s or 0.0))

    def rate(self, now: float) -> float:
        """Transitions/s this actor follows now; 0 = no limit."""
        if self.share_per_s <= 0 or self.advised_at is None or now - self.advised_at > self.ttl_s():
            return 0.0
        return self.share_per_s

    def refill(self, now: float) -> None:
        rate = self.rate(now)
        if rate <= 0:
            self.tokens = 0.0  # no limit: no debt carried into the next budget, and no saved-up burst either
        elif self.last is not None:
            self.tokens = min(rate * self.burst_s, self.tokens + rate * max(0.0, now - self.last))
        self.last = now

    def spend(self, now: float, transitions: int) -> None:
        """`transitions` were just sent."""
        self.refill(now)
        if self.rate(now) > 0:
            self.tokens -= transitions

    def wait_s(self, now: float) -> float:
        """How long to wait before acting on (0 = go now), at most one slice."""
        self.refill(now)
        rate = self.rate(now)
        if rate <= 0 or -self.tokens / rate < MIN_WAIT_S:
            return 0.0
        return min(-self.tokens / rate, self.max_slice_s)
