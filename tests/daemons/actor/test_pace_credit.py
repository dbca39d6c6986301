"""Pacing by a credit per weight version: a learner whose updates take seconds keeps what its actors send."""

from __future__ import annotations

import numpy as np
import pytest

from tandem.daemons.actor.pacer import CREDIT_VERSIONS, MAX_SLICE_S, Pacer
from tandem.daemons.feeds.unroll_feed import UnrollFeed
from tandem.protocol import TransitionBatch
from tests.protocol.samples import batch_of

STEPS, ENVS, BATCH = 32, 8, 1024  # the Pong APPO example: unrolls of 256 transitions, 1024 per update


def unroll(actor: int, seq: int, version: int, envs: int = ENVS) -> TransitionBatch:
    zeros = np.zeros((STEPS, envs), np.float32)
    obs, final_obs, ends = np.zeros((STEPS + 1, envs, 1), np.float32), np.zeros((0, 1), np.float32), zeros.astype(bool)
    return batch_of(
        obs,
        zeros.astype(np.int64),
        zeros,
        ends,
        ends,
        final_obs,
        actor=f"actor-{actor}",
        incarnation=0,
        seq=seq,
        version=version,
        env_steps=0,
    )


def run(
    actors: int,
    credit: int,
    update_s: float = 5.0,
    unroll_s: float = 0.3,
    seconds: float = 120.0,
    envs: int = ENVS,
    batch: int = BATCH,
    tick_s: float = 0.01,
    jitter: float = 0.0,
) -> dict:
    """Actors that make an unroll of `envs` x STEPS every `unroll_s` unless their pacer says wait, and a real
    UnrollFeed trained on by a learner that takes `update_s` per update of `batch` and publishes a version (with
    `credit`) after each; the learner advertises no rate, as before its first measured window (on an explicit
    clock, in ticks of `tick_s`; `jitter` stretches each unroll and update by up to that share, seeded)."""
    rng = np.random.default_rng(0)
    feed, pacers = UnrollFeed(batch, max_lag=1000), [Pacer() for _ in range(actors)]
    if credit:
        feed.paced_by_credit()  # as the learner does when it grants a credit
    version, busy_until, updating, starved_s, sent = 0, 0.0, False, 0.0, 0
    next_unroll, seqs = [0.0] * actors, [0] * actors
    for p in pacers:
        p.advise(0.0, 0.0, actors, credit, version)
    for tick in range(int(seconds / tick_s)):
        now = tick * tick_s
        for a, p in enumerate(pacers):
            if now >= next_unroll[a] and p.wait_s(now) == 0.0:
                feed.add(unroll(a, seqs[a], version, envs))
                p.spend(now, STEPS * envs)
                seqs[a], sent = seqs[a] + 1, sent + 1
                next_unroll[a] = now + unroll_s * (1 + jitter * rng.random())
        if now >= busy_until:
            if updating:  # an update just ended: publish its version
                version, updating = version + 1, False
                for p in pacers:
                    p.advise(now, 0.0, actors, credit, version)
            if feed.next_batch(version) is not None:
                busy_until, updating = now + update_s * (1 + jitter * rng.random()), True
            else:
                starved_s += tick_s
    return {"dropped": feed.dropped_full / sent, "updates": version, "starved_s": starved_s}


@pytest.mark.parametrize("actors", [1, 2, 3])
def test_a_credit_per_version_keeps_a_slow_learner_from_throwing_unrolls_away(actors):
    """The Atari case: without a credit (and before any rate exists) most unrolls are thrown away; with one,
    almost none, and the learner still trains back to back (it waits for data only at the start)."""
    unpaced, credited = run(actors, credit=0), run(actors, credit=BATCH)
    assert unpaced["dropped"] > 0.4
    assert credited["dropped"] < 0.05
    assert credited["updates"] >= unpaced["updates"] - 1
    assert credited["starved_s"] < 2.0


@pytest.mark.parametrize("actors", [3, 4, 12])
def test_unrolls_larger_than_an_actors_share_never_run_the_credit_out(actors):
    """CartPole APPO with three actors or more: each actor's unroll (16 envs x 32 steps) is a whole update, its
    share of a version a third of one or less. An actor with any credit left sends a whole unroll, so the actors
    can put more in flight than two updates; when the queue threw the surplus away, the credit spent on it never
    came back as a version, and after a few such drops every actor waited for a version no data was left to make
    (the learner starved for 10 s at a time, until the credit expired: 2 updates/s instead of 30)."""
    fast = run(
        actors, credit=512, update_s=0.03, unroll_s=0.03, seconds=20.0, envs=16, batch=512, tick_s=0.001, jitter=0.5
    )
    assert fast["dropped"] == 0
    assert fast["starved_s"] < 1.0
    assert fast["updates"] > 0.8 * 20.0 / (0.03 * 1.5)  # about one update per (jittered) update time


def test_the_credit_is_a_share_per_version_capped_at_the_queue_depth():
    pacer = Pacer()
    pacer.advise(0.0, 0.0, streams=2, credit=1024, version=5)
    assert pacer.credit == CREDIT_VERSIONS * 512  # starts full: the learner's queue is that deep
    pacer.spend(0.1, 256 * 5)  # into debt by 256
    assert pacer.wait_s(0.1) == MAX_SLICE_S
    pacer.advise(5.0, 0.0, streams=2, credit=1024, version=6)
    assert pacer.credit == 256 and pacer.wait_s(5.0) == 0.0
    pacer.advise(10.0, 0.0, streams=2, credit=1024, version=9)  # versions the weights client skipped count too
    assert pacer.credit == CREDIT_VERSIONS * 512


def test_a_credit_expires_when_no_version_comes():
    pacer = Pacer()
    pacer.advise(0.0, 0.0, streams=1, credit=1024, version=0)
    pacer.spend(0.0, 4096)
    assert pacer.wait_s(9.0) == MAX_SLICE_S  # a learner in a long update: wait for its version
    assert pacer.wait_s(11.0) == 0.0  # a learner gone for good holds no actor back
    pacer.advise(40.0, 0.0, streams=1, credit=0, version=1)  # a learner that grants none: no limit
    pacer.spend(40.0, 10_000)
    assert pacer.wait_s(40.0) == 0.0


def test_a_learner_granting_a_credit_advertises_no_rate():
    """The credit keeps the learner's queue two updates deep by design; a rate corrected by that fill would
    throttle the actors below what the learner takes."""
    from tandem.daemons.learner.pace import PaceMeter

    meter = PaceMeter(1.1, credit_per_version=BATCH)
    now = 0.0
    for _ in range(40):  # a measured rate exists: busy updates of 0.1 s
        meter.tick(now, BATCH, starved=False, fill=1.0)
        now += 0.1
    assert meter.rate_per_s and meter.advice(now, filling=False) == (0.0, 1)  # no actor heard: 1 expected
    two = PaceMeter(1.1, credit_per_version=BATCH, expected_streams=2)
    assert two.advice(0.0, filling=False) == (0.0, 2)  # the first version: shared among the configured actors
    two.heard("actor-0", 0.0)
    assert two.advice(1.0, filling=False) == (0.0, 1)  # then among the actors heard from
    for agent in ("a_0", "a_1", "b_0"):  # a multi-agent actor's streams: one actor, one pacer, one share
        two.heard(f"actor-1/0/{agent}", 1.0)
    assert two.advice(1.0, filling=False) == (0.0, 2)
    assert meter.counters()["pace_credit"] == BATCH
    assert PaceMeter(0.0, credit_per_version=BATCH).credit_per_version == 0  # headroom 0: no advice at all


def test_a_new_learner_incarnation_resets_the_credit_at_once():
    """A learner killed while two actors were in debt (an unroll of 512 against shares of 256): the new one's
    versions go on from the floor (above the actor's), but its updates start again from its checkpoint's.
    The actor takes its fresh credit at the new learner's first version instead of waiting for the old one to
    expire (10 s without a version while the new learner waits for data)."""
    pacer = Pacer()
    pacer.advise(0.0, 0.0, streams=2, credit=512, version=40, train_step=300)
    pacer.spend(0.1, 512)
    pacer.spend(0.2, 500)  # in debt by 500: the learner it was owed to is killed now
    assert pacer.out_of_credit(0.3)
    pacer.advise(1.0, 0.0, streams=2, credit=512, version=41, train_step=290)  # restored from an older checkpoint
    assert pacer.credit == CREDIT_VERSIONS * 256 and pacer.wait_s(1.0) == 0.0
    assert pacer.resets == 1
    pacer.spend(1.1, 512)
    pacer.advise(1.5, 0.0, streams=2, credit=512, version=42, train_step=291)  # the new one trains on: no reset
    assert pacer.resets == 1 and pacer.credit == 256


def test_a_learner_restarted_right_after_its_checkpoint_is_new_too():
    """A SIGTERM restart checkpoints on the way out: the new learner's first version has the same updates."""
    pacer = Pacer()
    pacer.advise(0.0, 0.0, streams=1, credit=512, version=7, train_step=70)
    pacer.spend(0.1, 2100)
    pacer.advise(0.2, 0.0, streams=1, credit=512, version=7, train_step=70)  # the same version again: not new
    assert pacer.resets == 0 and pacer.out_of_credit(0.2)
    pacer.advise(2.0, 0.0, streams=1, credit=512, version=8, train_step=70)
    assert pacer.resets == 1 and pacer.credit == CREDIT_VERSIONS * 512


def test_without_a_reset_the_old_debt_holds_the_actor_until_the_credit_expires():
    """What the reset fixes: the same debt and a next version of the same learner leave the actor waiting."""
    pacer = Pacer()
    pacer.advise(0.0, 0.0, streams=2, credit=512, version=40, train_step=300)
    pacer.spend(0.1, 1012)
    pacer.advise(1.0, 0.0, streams=2, credit=512, version=41, train_step=301)
    assert pacer.wait_s(1.0) == MAX_SLICE_S and pacer.resets == 0


@pytest.mark.parametrize(
    "feeders,streams,share",
    [
        (1, 2, 512),  # replica 1's lone actor, replica 0 fed by two: a whole update a version
        (2, 2, 256),
        (3, 2, 256),  # counted before replica 1 registered (every actor sent to replica 0): replica 0's own count
        (0, 2, 256),  # no replicas: the learner's count
        (1, 0, 512),  # replica 0 has heard no actor yet
    ],
)
def test_a_replicas_actor_shares_its_own_replicas_update(feeders, streams, share):
    """Each replica trains on a whole batch of its own, so an actor's share of the credit replica 0 advertises is
    the batch over the actors feeding ITS replica (the supervisor's count at the lookup), never more of them than
    replica 0 has heard."""
    from types import SimpleNamespace

    from tandem.daemons.acting.link import FollowedPolicy
    from tandem.daemons.runtime.endpoints import LearnerEndpoints, endpoints_of

    reply = SimpleNamespace(
        data={"endpoints": {"transitions": "t", "weights": "w", "snapshot": "s"}, "feeders": feeders}
    )
    link = SimpleNamespace(endpoints=endpoints_of(reply))
    pacer = Pacer()
    pacer.advise(0.0, 0.0, FollowedPolicy.sharing(link, streams), credit=512, version=3)
    assert pacer.credit_share == share
    for wrong in (True, -1, 2.0, "2"):  # a count that is not one counts as none
        reply.data["feeders"] = wrong
        assert endpoints_of(reply) == LearnerEndpoints("t", "w", "s")


def test_room_for_unrolls_is_kept_only_under_a_credit_and_only_for_streams_heard_lately():
    """Without a credit (pacing by rate, none, an action server's games) the queue keeps to two updates, the freshest
    data; under one it also holds the largest unroll of each stream heard from in the last ROOM_TTL_S, so a game
    that reconnects under new stream ids, or an actor gone, does not widen it for good."""
    from tandem.daemons.feeds.unroll_feed import ROOM_TTL_S

    plain = UnrollFeed(BATCH, max_lag=1000)
    for seq in range(6):
        plain.add(unroll(seq % 3, seq, 0))
    assert plain.limit() == 2 * BATCH and plain.queued <= 2 * BATCH + STEPS * ENVS
    credited = UnrollFeed(BATCH, max_lag=1000)
    credited.paced_by_credit()
    for actor in range(3):
        credited.remember(unroll(actor, 0, 0), now=100.0)
    credited.remember(unroll(0, 1, 0, envs=2 * ENVS), now=100.5)  # a larger unroll of actor 0: its room grows
    assert credited.limit() == 2 * BATCH + 4 * STEPS * ENVS
    credited.remember(unroll(1, 1, 0), now=100.5 + ROOM_TTL_S + 0.2)  # actors 0 and 2 have gone quiet
    assert credited.limit() == 2 * BATCH + STEPS * ENVS
    assert credited.fill() == 0.0
