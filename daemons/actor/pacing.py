"""An actor held to its learners' insert budgets: a Pacer per policy, advised by each new weight version."""

from __future__ import annotations

import time
from typing import Any

from tandem.daemons.actor.pacer import Pacer
from tandem.protocol import TransitionBatch, sockets


class Pacing:
    """Each learner advertises its own budget with its versions; the actor waits for the one it is most ahead of.

    Not `following` (actors.follow_pace off, or an action server, whose games set their own pace): nothing
    is advised, so nothing is ever waited for, and the counters say so (no limit, no time waited).
    """

    def __init__(self, following: bool):
        self.following = following
        self.pacers: dict[str, Pacer] = {}  # one per policy, made when first needed (a fresh one sets no limit)
        self.paced_s = 0.0

    def pacer(self, policy: str) -> Pacer:
        return self.pacers.setdefault(policy, Pacer())

    def advise(self, policy: str, link: Any) -> None:
        """`link` holds a new version: its budget becomes the policy's pace."""
        if self.following:
            self.pacer(policy).advise(time.monotonic(), *link.followed.pace)

    def spend(self, batch: TransitionBatch) -> None:
        """`batch` was just pushed: its transitions are spent."""
        self.pacer(batch.policy_id).spend(time.monotonic(), batch.num_transitions)

    def wait(self, weight_sockets: list) -> bool:
        """Ahead of a learner's budget: wait one short slice and say so (True); else False at once."""
        now = time.monotonic()
        wait_s = max((pacer.wait_s(now) for pacer in self.pacers.values()), default=0.0)
        if wait_s <= 0:
            return False
        start = time.monotonic()
        if any(pacer.out_of_credit(now) for pacer in self.pacers.values()):
            # Woken early by a weight version, which adds credit (a slow learner's updates take seconds, a fast
            # one's milliseconds; neither should wait a whole slice for it).
            sockets.poll(weight_sockets, int(wait_s * 1000) + 1)
        else:
            time.sleep(wait_s)  # a rate's wait is exact
        self.paced_s += time.monotonic() - start
        return True

    def counters(self, now: float) -> dict[str, float]:
        """Time spent waiting for the learners' pace, the transitions/s followed now (0 = no limit), the
        transitions a version adds to this actor's credit (0 = none), and how often a new incarnation of a learner
        made the pace start afresh."""
        return {
            "paced_s": round(self.paced_s, 3),
            "pace_per_s": round(sum((p.rate(now) for p in self.pacers.values()), 0.0), 1),
            "pace_credit_share": round(sum(p.credit_share for p in self.pacers.values()), 1),
            "pace_resets": sum(p.resets for p in self.pacers.values()),
        }
