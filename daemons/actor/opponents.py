"""An actor's opponents for self-play: pooled versions of a policy, fetched without waiting, and the one to play.

The learner lists the versions it keeps in each weight blob (`pool`, PROTOCOL.md 2.2) and sends one on a
`weight_request` that names it (2.3). For each new episode the actor draws a version by a rule; a version it
holds plays at once, one it does not is asked for and the last good opponent plays meanwhile, so stepping
never waits on a load. A blob that does not load (bad checksum, a network it does not fit, NaN, a refusal, no
answer in time) is counted and leaves the actor on its last good opponent.
"""

from __future__ import annotations

import logging
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable, Sequence
from typing import Any

import numpy as np

from tandem.daemons.acting.link import check_finite
from tandem.daemons.runtime.logs import log_dropped
from tandem.protocol import ControlReply, ProtocolError, WeightBlob, WeightRequest, decode, sockets

log = logging.getLogger(__name__)

RULES = ("latest", "uniform", "prioritized")
REQUEST_TIMEOUT_S = 5.0  # a pooled version not answered within this is counted failed and may be drawn again
# Requests outstanding at once: no more than the snapshot socket queues to one peer (weights_hwm_msgs, 2), past
# which a ROUTER drops a reply without a word (then the request only times out).
MAX_IN_FLIGHT = 2


class OpponentDraw:
    """Which pooled version plays the next episode: the newest, uniform over the pool, or prioritized.

    `prioritized` is prioritized fictitious self-play: a version is drawn in proportion to (1 - w)^2 + 0.05,
    w the learning side's recent win rate against it (0.5 for one not yet played), so the opponents it still
    loses to come up most, and none is ever dropped."""

    def __init__(self, rule: str, seed: int, window: int = 50):
        if rule not in RULES:
            raise ValueError(f"opponent rule {rule!r}; the rules: {', '.join(RULES)}")
        self.rule, self.rng, self.window = rule, np.random.default_rng(seed), window
        self.results: dict[Hashable, list[float]] = {}  # opponent -> recent scores of the learning side (1, 0.5, 0)

    def draw(self, pool: Sequence[Hashable]) -> Any:
        """One of `pool`: versions of one policy in rising order, or (policy, version) pairs of several pools."""
        if not pool:
            return None
        if len(self.results) > 2 * len(pool):  # versions the learners no longer keep: their scores go too
            kept = set(pool)
            self.results = {v: scores for v, scores in self.results.items() if v in kept}
        if self.rule == "latest":  # the newest version; of several pools, the newest of one drawn at random
            newest = latest_of_each(pool)
            return newest[self.rng.integers(len(newest))]
        if self.rule == "uniform":
            return pool[self.rng.integers(len(pool))]
        weights = np.array([(1.0 - self.win_rate(v)) ** 2 + 0.05 for v in pool])
        return pool[self.rng.choice(len(pool), p=weights / weights.sum())]

    def win_rate(self, opponent: Hashable) -> float:
        scores = self.results.get(opponent)
        return float(np.mean(scores)) if scores else 0.5

    def record(self, opponent: Hashable, score: float) -> None:
        """The learning side's score in a game against `opponent`: 1 a win, 0.5 a draw, 0 a loss."""
        scores = self.results.setdefault(opponent, [])
        scores.append(score)
        del scores[: -self.window]


def latest_of_each(pool: Sequence[Hashable]) -> list:
    """The newest of a pool: its last version, or for (policy, version) pairs the newest version of each policy."""
    if not isinstance(pool[0], tuple):
        return [pool[-1]]
    newest: dict[Any, Any] = {}
    for policy, version in pool:
        if policy not in newest or version > newest[policy][1]:
            newest[policy] = (policy, version)
    return list(newest.values())


class OpponentNets:
    """Networks loaded with pooled versions of one policy (at most `size`, least recently used dropped first),
    fetched over a DEALER of their own to the learner's snapshot socket."""

    def __init__(
        self,
        ctx: Any,
        policy_id: str,
        snapshot_endpoint: str,
        requester: str,
        make_net: Callable[[], Any],
        size: int = 8,
        opts: sockets.SocketOptions = sockets.DEFAULT_SOCKET_OPTIONS,
        timeout_s: float = REQUEST_TIMEOUT_S,
    ):
        self.policy_id, self.requester, self.make_net, self.size = policy_id, requester, make_net, size
        self.timeout_s = timeout_s
        self.snapshot_endpoint = snapshot_endpoint
        self.dealer = sockets.snapshot_dealer(ctx, snapshot_endpoint, opts)
        self.nets: OrderedDict[int, Any] = OrderedDict()
        # loads go into this network, never into a held one, so weights that fail to load change nothing held; the
        # network a load pushes out becomes the next spare (building a network costs more than loading one)
        self.spare: Any = None
        self.pending: dict[int, float] = {}  # version -> when its request expires
        self.counts = {
            "opponent_requests": 0,
            "opponent_requests_unsent": 0,
            "opponent_loads": 0,
            "opponent_loads_failed": 0,
        }

    def get(self, version: int) -> Any | None:
        """The network of `version` if held (now the most recently used), else None."""
        net = self.nets.get(version)
        if net is not None:
            self.nets.move_to_end(version)
        return net

    def want(self, version: int, now: float | None = None) -> None:
        """Ask for `version` unless it is held, already asked for, or too many requests are out."""
        if version in self.nets or version in self.pending or len(self.pending) >= MAX_IN_FLIGHT:
            return
        now = time.monotonic() if now is None else now
        if sockets.send_message(self.dealer, WeightRequest(self.policy_id, -1, self.requester, version)):
            self.pending[version] = now + self.timeout_s
            self.counts["opponent_requests"] += 1
        else:  # before the handshake ends (the dealer is IMMEDIATE) or with the learner gone: asked again later
            self.counts["opponent_requests_unsent"] += 1

    def poll(self, now: float | None = None) -> list[int]:
        """Take every answer waiting (never blocks) and expire old requests; the versions loaded now."""
        now = time.monotonic() if now is None else now
        loaded = []
        while (frames := sockets.recv_frames(self.dealer, 0)) is not None:
            version = self.accept(frames)
            if version is not None:
                loaded.append(version)
        for version, expires in list(self.pending.items()):
            if now >= expires:
                del self.pending[version]
                self.failed(version, f"no answer within {self.timeout_s:g} s")
        return loaded

    def accept(self, frames: list) -> int | None:
        try:
            message = decode(frames)
        except ProtocolError as exc:
            self.failed(None, exc)
            return None
        if isinstance(message, ControlReply):  # not_in_pool (trimmed since it was listed), or a refusal
            version = message.data.get("version")
            if type(version) is int:
                self.pending.pop(version, None)
            self.failed(version if type(version) is int else None, f"{message.code}: {message.message}")
            return None
        if not isinstance(message, WeightBlob) or message.policy_id != self.policy_id:
            self.failed(None, f"an unexpected {getattr(message, 'KIND', type(message).__name__)}")
            return None
        self.pending.pop(message.version, None)
        try:
            message.verify_checksum()
            check_finite(message.tensors)
            net, self.spare = self.spare or self.make_net(), None
            try:
                net.load_weights(message.tensors)  # ValueError naming the tensor when it does not fit
            except ValueError:
                self.spare = net  # half loaded, held by no one: the next load overwrites it
                raise
        except (ProtocolError, ValueError) as exc:
            self.failed(message.version, exc)
            return None
        self.nets.pop(message.version, None)
        self.nets[message.version] = net
        while len(self.nets) > self.size:
            _, self.spare = self.nets.popitem(last=False)  # the least recently used
        self.counts["opponent_loads"] += 1
        return message.version

    def failed(self, version: int | None, why: Any) -> None:
        self.counts["opponent_loads_failed"] += 1
        what = f"opponent version {version}" if version is not None else "an opponent's weights"
        log_dropped(log, what, self.counts["opponent_loads_failed"], why)

    def close(self) -> None:
        sockets.close(self.dealer, linger_ms=0)
