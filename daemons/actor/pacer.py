"""An actor's pace: its share of its learner's insert budget, a rate (token bucket) and a credit per version."""

from __future__ import annotations

MAX_SLICE_S = 0.05  # the longest single wait: the actor still heartbeats, polls weights and sees the stop flag
MIN_WAIT_S = 1e-4  # a shorter wait is not worth a sleep (and rounding must never leave a wait of ~0 forever)
BURST_S = 0.25  # the bucket holds this many seconds of sending: a short stall is caught up, a long one is not
MIN_TTL_S = 2.0  # advice expires after at least this long without a newer weight version ...
TTL_INTERVALS = 4.0  # ... or this many of the usual intervals between versions, whichever is longer
INTERVAL_SMOOTHING = 0.2
CREDIT_VERSIONS = 2  # an actor holds at most (and starts with) this many versions' credit: the on-policy queue's depth
CREDIT_MIN_TTL_S = 10.0  # a credit lasts this long without a newer version (or TTL_INTERVALS of them), longer than a
# rate: an actor out of credit waits for the version its data will make, but not forever (another actor that held
# a share may have died: until the next version says so, the learner lacks that share of an update)


class Pacer:
    """Tokens accrue at the followed rate (transitions/s) up to a burst; sending spends them, possibly into debt.

    `wait_s(now)` says how long to wait before the next unroll may start (0 when the balance is not
    negative), at most `max_slice_s` at a time. A budget of 0, or one older than its time to live (no
    newer version arrived: the learner may be gone, restarting or starved), means no limit, so an actor
    never waits for an absent learner.

    A credit (`pace_credit`, transitions per version for all actors) clocks sending by versions instead of
    seconds, which fits a learner whose updates take seconds (a rate measured over a window does not exist
    before its first updates, and swings between them): each new version adds this actor's share, the
    balance is capped at CREDIT_VERSIONS shares (where it starts), and at or below 0 the actor waits.

    A version whose `train_step` is not above the last one's comes from a new incarnation of the learner
    (restarted from a checkpoint, or a replica group's new generation; versions go on rising from the floor,
    but updates restart from the checkpoint's, or stand still for one version): its queue is empty, and what
    this actor sent against the old one went with it. The pacer starts afresh then, full credit and no debt,
    instead of waiting for the old credit to expire while the new learner waits for data.
    """

    def __init__(self, max_slice_s: float = MAX_SLICE_S, burst_s: float = BURST_S, min_ttl_s: float = MIN_TTL_S):
        self.max_slice_s, self.burst_s, self.min_ttl_s = max_slice_s, burst_s, min_ttl_s
        self.share_per_s = 0.0
        self.advised_at: float | None = None
        self.interval_s: float | None = None  # smoothed time between two pieces of advice (weight versions)
        self.tokens = 0.0
        self.last: float | None = None
        self.credit_share = 0  # transitions per version for this actor; 0 = no credit
        self.credit = 0.0  # balance: what may still be sent before the next version
        self.credit_version = -1  # the version whose credit was last added
        self.version = -1  # the last version advised
        self.train_step = -1  # the learner's updates behind it: they fall back when a new learner takes over
        self.resets = 0  # new incarnations of the learner seen, each a fresh start

    def ttl_credit_s(self) -> float:
        return max(CREDIT_MIN_TTL_S, TTL_INTERVALS * (self.interval_s or 0.0))

    def credit_active(self, now: float) -> bool:
        return self.credit_share > 0 and self.advised_at is not None and now - self.advised_at <= self.ttl_credit_s()

    def out_of_credit(self, now: float) -> bool:
        """Waiting for the next version's credit (not for a rate's tokens)."""
        return self.credit_active(now) and self.credit <= 0

    def advise(
        self, now: float, pace_per_s: float, streams: int, credit: int = 0, version: int = -1, train_step: int = -1
    ) -> None:
        """A new weight version arrived carrying the learner's budget for all `streams` actors (0 = none):
        a rate and a credit per version; `version` says how many versions' credit this one adds, and
        `train_step` (the learner's updates behind it; -1 = unknown) whether a new learner made it."""
        if version != self.version and 0 <= train_step <= self.train_step:
            self.forget()
            self.resets += 1
        self.version, self.train_step = version, max(train_step, -1)
        if self.advised_at is not None:
            gap = max(0.0, now - self.advised_at)
            self.interval_s = (
                gap
                if self.interval_s is None
                else (INTERVAL_SMOOTHING * gap + (1 - INTERVAL_SMOOTHING) * self.interval_s)
            )
        was_active = self.credit_active(now)
        self.advised_at = now
        self.refill(now)  # tokens earned so far accrue at the old rate
        self.share_per_s = pace_per_s / max(1, streams) if pace_per_s > 0 else 0.0
        self.add_credit(was_active, credit / max(1, streams) if credit > 0 else 0.0, version)

    def forget(self) -> None:
        """Drop what was advised by a learner that is gone: its rate, its cadence, the debt owed to it."""
        self.share_per_s, self.tokens, self.last = 0.0, 0.0, None
        self.advised_at = self.interval_s = None
        self.credit_share, self.credit, self.credit_version = 0, 0.0, -1

    def add_credit(self, was_active: bool, share: float, version: int) -> None:
        cap = CREDIT_VERSIONS * share
        if share <= 0:
            self.credit = 0.0
        elif not was_active:
            self.credit = cap  # a fresh start (or after none): the learner's queue is this deep
        else:  # versions skipped by the weights client each count; debt is carried, a surplus is not kept past the cap
            versions = max(1, version - self.credit_version) if version >= 0 and self.credit_version >= 0 else 1
            self.credit = min(cap, self.credit + versions * share)
        self.credit_share, self.credit_version = share, version

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
        if self.credit_active(now):
            self.credit -= transitions

    def wait_s(self, now: float) -> float:
        """How long to wait before acting on (0 = go now), at most one slice."""
        self.refill(now)
        if self.out_of_credit(now):
            return self.max_slice_s  # until the next version adds credit (or the credit expires)
        rate = self.rate(now)
        if rate <= 0 or -self.tokens / rate < MIN_WAIT_S:
            return 0.0
        return min(-self.tokens / rate, self.max_slice_s)
