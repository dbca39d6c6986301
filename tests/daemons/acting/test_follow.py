"""An actor looks a silent learner up again: it follows one that moved, and only takes a new count of feeders from
one that did not (a replica's actors share its credit among that many)."""

from __future__ import annotations

from types import SimpleNamespace

from tandem.daemons.acting.follow import LearnerFollower
from tandem.daemons.runtime.endpoints import LearnerEndpoints


class Channel:
    """Answers every lookup with `answer` (the supervisor, for a unit test of the follower's logic)."""

    def __init__(self, answer: dict):
        self.answer, self.asked = answer, 0

    def request(self, kind: str, args: dict, timeout_s: float):
        self.asked += 1
        return SimpleNamespace(ok=True, data=self.answer)


def answer(transitions: str, feeders: int) -> dict:
    return {"endpoints": {"transitions": transitions, "weights": "w", "snapshot": "s"}, "feeders": feeders}


def test_a_new_count_of_feeders_is_taken_without_a_move_and_new_addresses_are_followed():
    follow = SimpleNamespace(endpoints=LearnerEndpoints("t1", "w", "s", feeders=2), silent_s=lambda now: 60.0)
    moves = []
    channel = Channel(answer("t1", 1))  # replica 1 lost: this actor's replica is now fed by one actor, itself
    follower = LearnerFollower(channel, after_s=5.0, actor=0)
    follower.check({"default": follow}, 100.0, lambda policy, found: moves.append(found))
    assert moves == [] and follow.endpoints.feeders == 1 and follower.counts["learner_moves"] == 0
    channel.answer = answer("t2", 1)
    follower.check({"default": follow}, 106.0, lambda policy, found: moves.append(found))
    assert moves == [LearnerEndpoints("t2", "w", "s", feeders=1)] and follower.counts["learner_moves"] == 1
    assert channel.asked == 2
