"""The learner's receiver thread on real ipc sockets: order per stream, clean stop, counts under load, loud death."""

from __future__ import annotations

import dataclasses
import tempfile
import threading
import time

import pytest
import zmq

from tandem.daemons.config import load_config
from tandem.daemons.feeds.unroll_feed import UnrollFeed
from tandem.daemons.learner.daemon import Learner
from tandem.daemons.learner.intake import Intake, IntakeDied
from tandem.daemons.runtime.signals import StopFlag
from tandem.protocol import TransitionBatch, sockets
from tests.protocol import samples
from tests.system.harness import ROOT

WAIT_S = 20.0


def wait_until(predicate, what: str, timeout_s: float = WAIT_S) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.01)


@pytest.fixture
def wire():
    """A learner-side PULL and an actor-side PUSH on ipc:// in a short temporary directory."""
    ctx = sockets.new_context()
    with tempfile.TemporaryDirectory(prefix="ti-", dir="/tmp") as tmp:
        pull = sockets.transitions_pull(ctx, f"ipc://{tmp}/t")
        push = sockets.transitions_push(ctx, sockets.bound_endpoint(pull))
        yield pull, push
        sockets.close_context(ctx, 0)


def send(push, batch: TransitionBatch) -> None:
    assert sockets.send_frames(push, batch.to_frames(), timeout_ms=int(WAIT_S * 1000))


def unroll(actor: str, seq: int, version: int = 0) -> TransitionBatch:
    return dataclasses.replace(
        samples.unroll(steps=4, envs=2, seq=seq), actor_id=actor, seq=seq, policy_version=version
    )


def make_intake(feed, counts: dict, check=lambda batch: None) -> Intake:
    return Intake(feed, threading.Lock(), "default", check, max_lag=100, current_version=lambda: 0, counts=counts)


def test_the_thread_hands_batches_over_in_order_per_stream_and_stops_cleanly(wire):
    pull, push = wire
    feed = UnrollFeed(batch_size=10_000, max_lag=100)  # large: nothing is dropped for room
    counts: dict = {}
    intake = make_intake(feed, counts)
    intake.start(pull)
    sent = 40
    for seq in range(sent):
        for actor in ("actor-a", "actor-b"):
            send(push, unroll(actor, seq))
    wait_until(lambda: counts["batches_received"] == 2 * sent, "every batch to be handled")
    with intake.lock:
        queued = list(feed.queue)
    for actor in ("actor-a", "actor-b"):
        assert [b.seq for b in queued if b.actor_id == actor] == list(range(sent))
    assert counts["transitions_inserted"] == 2 * sent * 8
    assert intake.stop(timeout_s=WAIT_S)
    assert not intake.thread.is_alive()
    assert pull.closed  # the thread closed the socket it owned
    intake.check()  # a thread asked to stop is not a dead one


def test_a_malformed_batch_is_counted_as_malformed_while_the_limiter_refuses(tmp_path, wire):
    pull, push = wire
    config = load_config(ROOT / "examples" / "cartpole.toml", [f"run.dir='{tmp_path}'", "learner.replay_min_size=1"])
    learner = Learner(config, "default", StopFlag(), control_endpoint=None)
    learner.build()
    try:
        learner.intake.handle([bytes(f) for f in unroll("actor-0", 0).to_frames()])
        assert learner.progress.counts["transitions_inserted"] > 0
        # training has started and inserts are far ahead of sampling: the limiter refuses every insert now
        learner.training.feed.limiter.sampled, learner.training.feed.limiter.inserted = 1, 10**9
        assert not learner.training.feed.can_accept()
        learner.intake.start(pull)
        push.send_multipart([b"\x00junk"])  # no valid header
        wrong_shape = samples.unroll(steps=4, envs=2, obs_shape=(5,), seq=1)
        send(push, dataclasses.replace(wrong_shape, policy_version=0))  # frames well, does not fit the policy
        send(push, unroll("actor-0", 2))  # good, but over the ratio
        wait_until(
            lambda: learner.progress.counts["batches_malformed"] + learner.progress.counts["batches_over_ratio"] == 3,
            "three batches to be handled",
        )
        assert learner.progress.counts["batches_malformed"] == 2
        assert learner.progress.counts["batches_over_ratio"] == 1
        assert learner.intake.stop(timeout_s=WAIT_S)
    finally:
        learner.intake.stop(timeout_s=WAIT_S)
        learner.metrics.close()
        sockets.close_context(learner.runtime.ctx, 0)


class BrokenFeed(UnrollFeed):
    def insert(self, batch):
        raise RuntimeError("a bug in the feed")


def test_a_batch_the_feed_cannot_insert_costs_that_batch_not_the_thread(wire):
    """A peer's batch never ends the learner: one that passed the checks and still fails its insert is counted."""
    pull, push = wire
    counts: dict = {}
    intake = make_intake(BrokenFeed(batch_size=100, max_lag=100), counts)
    intake.start(pull)
    for seq in range(3):
        send(push, unroll("actor-0", seq))
    wait_until(lambda: counts["malformed_insert"] == 3, "three batches to be counted")
    assert counts["batches_malformed"] == 3 and counts["intake_errors"] == 0
    assert intake.thread.is_alive()
    intake.check()
    assert intake.stop(timeout_s=WAIT_S)


def test_an_error_of_the_thread_itself_is_counted_and_fails_the_learner_loudly(wire):
    pull, _ = wire
    counts: dict = {}
    intake = make_intake(UnrollFeed(batch_size=100, max_lag=100), counts)
    pull.close(linger=0)  # its socket gone: nothing a batch did, so the learner exits and is restarted
    intake.start(pull)
    wait_until(lambda: not intake.thread.is_alive(), "the thread to end")
    assert counts["intake_errors"] == 1
    with pytest.raises(IntakeDied, match="receive failed"):
        intake.check()


def test_the_learner_loop_trains_with_the_receiver_thread_and_stops_it(tmp_path):
    """The real loop: batches go in on the thread, updates happen on the main thread, and stop joins both."""
    config = load_config(
        ROOT / "examples" / "cartpole.toml",
        [f"run.dir='{tmp_path}'", "learner.replay_min_size=64", "algorithm.batch_size=32", "learner.prefetch=true"],
    )
    stop = StopFlag()
    learner = Learner(config, "default", stop, control_endpoint=None)
    learner.build()
    learner.binding.bind()
    ctx = zmq.Context()
    actor = sockets.transitions_push(ctx, learner.binding.endpoints["transitions"])
    runner = threading.Thread(target=learner.loop, daemon=True)
    runner.start()
    try:
        for seq in range(200):
            if learner.progress.counts["updates"] >= 5:
                break
            sockets.send_frames(
                actor, unroll("actor-0", seq, version=learner.progress.version).to_frames(), timeout_ms=1000
            )
            time.sleep(0.005)
        wait_until(lambda: learner.progress.counts["updates"] >= 5, "five updates")
        assert learner.intake.thread.is_alive() and learner.training.prefetcher is not None
    finally:
        stop.requested = True
        runner.join(WAIT_S)
        ctx.destroy(linger=0)
    assert not runner.is_alive()
    assert not learner.intake.thread.is_alive() and not learner.training.prefetcher.thread.is_alive()
    learner.metrics.close()
    sockets.close_context(learner.runtime.ctx, 0)
