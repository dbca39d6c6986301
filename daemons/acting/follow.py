"""An actor follows its learners: one silent for a while is looked up again, and followed to its new addresses."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from tandem.daemons.runtime.control_channel import ControlTimeout
from tandem.daemons.runtime.endpoints import LearnerEndpoints, endpoints_of, lookup_args, same_place

log = logging.getLogger(__name__)
LOOKUP_TIMEOUT_S = 1.0  # asked from the acting loop: a supervisor that does not answer costs at most this


class LearnerFollower:
    """Asks the supervisor where a policy's learner is once it has been silent for `actors.relookup_after_s`.

    A learner restarted by systemd, Slurm or Kubernetes may come back on other ports or another host and
    register there; the actor's sockets would otherwise keep dialling the old address for ever. One lookup
    per silent period, so a learner that is only slow costs a request every relookup_after_s.
    """

    def __init__(self, channel: Any, after_s: float, actor: int | None = None):
        self.channel, self.after_s, self.actor = channel, after_s, actor
        self.next_ask: dict[str, float] = {}
        self.counts = {"learner_lookups": 0, "learner_moves": 0}

    def check(self, followed: dict[str, Any], now: float, move: Callable[[str, LearnerEndpoints], None]) -> None:
        """Look up silent policies' learners (`followed`: policy -> FollowedPolicy); `move` follows one that moved."""
        if self.channel is None:
            return  # no supervisor to ask: the config's addresses are all there is
        for policy, follow in followed.items():
            if follow.silent_s(now) < self.after_s or now < self.next_ask.get(policy, 0.0):
                continue
            self.next_ask[policy] = now + self.after_s
            self.counts["learner_lookups"] += 1
            try:
                reply = self.channel.request("lookup", lookup_args(policy, self.actor), timeout_s=LOOKUP_TIMEOUT_S)
            except ControlTimeout:
                continue
            if not reply.ok:
                continue  # not registered again yet: asked again after the next silent period
            found = endpoints_of(reply)
            if not same_place(found, follow.endpoints):
                log.warning("the learner of policy %s moved to %s; following it", policy, found.transitions)
                move(policy, found)
                self.counts["learner_moves"] += 1
            else:  # the same learner: only the count of actors feeding its replica may have changed
                follow.endpoints = found
