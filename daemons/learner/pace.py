"""The learner's insert budget: the transitions/s it consumes while training, with headroom, for its actors."""

from __future__ import annotations

WINDOW_S = 2.0  # the consumption rate is measured over windows of about this length
SMOOTHING = 0.5  # weight of the newest window in the running estimate
STREAM_TTL_S = 5.0  # an actor not heard from for this long no longer takes a share
STARVED_SHARE_MAX = 0.8  # starved of data for more than this share of a window: advertise no limit
FIRST_UPDATES_SKIPPED = 3  # the first updates build optimizer state and kernels: far slower than the rest
FILL_TARGET = 0.4  # the budget is corrected toward keeping the learner's buffer this full on average ...
FILL_GAIN = 1.0  # ... by this much per unit of fill: x1.4 when empty, x0.4 when full


class PaceMeter:
    """Measures the learner's consumption rate and turns it into the budget it advertises.

    The learner calls `tick` once per pass of its loop. A pass that trained counts as busy time; one that
    wanted to train but had no data counts as starved; anything else (warm-up, and the first few updates,
    which are many times slower than the rest) counts as neither. The
    rate is consumed transitions per busy second, so it measures what the learner could take, not what
    it was given: pacing actors down frees CPU, the learner trains faster, and the budget rises.

    The budget is `headroom` times that rate, corrected by how full the learner's buffer was on average
    (`fill`: 0 = about to starve, 1 = throwing data away; a proportional controller on the buffer, as
    queue-based congestion control does): times 1.4 when empty, 0.4 when full, 1 at 40%. With a
    headroom of 1.1 it settles near 50% full, below where data is thrown away, and an actor slower than
    its share makes the buffer run low, which raises the budget for the others. The budget is 0 (no
    limit) while there is no estimate, while replay fills, or when the learner was starved for most of
    the last window: advice never holds a learner back.
    """

    def __init__(
        self,
        headroom: float,
        window_s: float = WINDOW_S,
        stream_ttl_s: float = STREAM_TTL_S,
        credit_per_version: int = 0,
        expected_streams: int = 1,
    ):
        self.headroom, self.window_s, self.stream_ttl_s = headroom, window_s, stream_ttl_s
        # Transitions all actors may send against each version (0: none): on-policy, what one update takes.
        # Unlike the rate it needs no measurement, so it holds from the first version and whatever an update lasts.
        self.credit_per_version = credit_per_version if headroom > 0 else 0
        # Shared among this many actors until any is heard from (the first versions: each actor starting with
        # the whole credit would overfill the queue with two actors or more).
        self.expected_streams = max(1, expected_streams)
        self.last_tick: float | None = None
        self.window_start = 0.0
        self.busy_s = self.starved_s = self.consumed = self.fill_s = 0.0
        self.updates_seen = 0
        self.rate_per_s: float | None = None  # smoothed consumption rate; None before the first window with updates
        self.starved_share = 0.0
        self.fill = FILL_TARGET  # the buffer's mean fill over the last window
        self.streams: dict[str, float] = {}  # actor id -> when it was last heard from
        self.advertised = (0.0, 0)

    def tick(self, now: float, consumed: float, starved: bool, fill: float = FILL_TARGET) -> None:
        """A pass of the loop ended at `now`: it consumed `consumed` transitions (0 when it did not train),
        and its buffer is `fill` full (0: nothing to train on, 1: arrivals are thrown away)."""
        if self.last_tick is None:
            self.last_tick = self.window_start = now
            return
        elapsed, self.last_tick = max(0.0, now - self.last_tick), now
        self.fill_s += min(1.0, max(0.0, fill)) * elapsed
        if consumed > 0:
            self.updates_seen += 1
            if self.updates_seen > FIRST_UPDATES_SKIPPED:
                self.busy_s += elapsed
                self.consumed += consumed
        elif starved:
            self.starved_s += elapsed
        if now - self.window_start >= self.window_s:
            self.close_window(now)

    def close_window(self, now: float) -> None:
        if self.busy_s > 0:
            rate = self.consumed / self.busy_s
            self.rate_per_s = rate if self.rate_per_s is None else SMOOTHING * rate + (1 - SMOOTHING) * self.rate_per_s
        length = max(now - self.window_start, 1e-9)
        self.starved_share, self.fill = self.starved_s / length, self.fill_s / length
        self.window_start, self.busy_s, self.starved_s, self.consumed, self.fill_s = now, 0.0, 0.0, 0.0, 0.0

    def heard(self, actor_id: str, now: float) -> None:
        """A batch from `actor_id` was taken in. Shares are per actor process, which paces all its streams
        together: a multi-agent actor's streams are named `ACTOR/WORLD/AGENT`, counted once as ACTOR."""
        self.streams[actor_id.split("/", 1)[0]] = now

    def stream_count(self, now: float) -> int:
        # `heard` runs on the receiver thread: iterate over a copy and tolerate a key gone meanwhile.
        for actor_id, seen in list(self.streams.items()):
            if now - seen > self.stream_ttl_s:
                self.streams.pop(actor_id, None)
        return len(self.streams)

    def advice(self, now: float, filling: bool) -> tuple[float, int]:
        """(transitions/s for all actors together, actors heard from lately) to publish; (0.0, n) = no limit."""
        streams = self.stream_count(now)
        if self.credit_per_version > 0:
            # A credit clocks the actors by versions: a rate on top would be corrected down by the queue the
            # credit keeps full (two updates deep, by design) and starve the learner.
            self.advertised = (0.0, streams or self.expected_streams)
        elif (
            filling
            or self.headroom <= 0
            or self.rate_per_s is None
            or self.rate_per_s <= 0
            or self.starved_share > STARVED_SHARE_MAX
        ):
            self.advertised = (0.0, streams)
        else:
            correction = 1.0 + FILL_GAIN * (FILL_TARGET - self.fill)
            self.advertised = (self.headroom * self.rate_per_s * correction, streams)
        return self.advertised

    def counters(self) -> dict[str, float]:
        return {
            "pace_per_s": round(self.advertised[0], 1),
            "pace_streams": self.advertised[1],
            "pace_capacity_per_s": round(self.rate_per_s or 0.0, 1),
            "pace_starved_share": round(self.starved_share, 3),
            "pace_fill": round(self.fill, 3),
            "pace_credit": self.credit_per_version,
        }
