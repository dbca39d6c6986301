"""Real ZeroMQ sockets on loopback (ipc and tcp) carrying real batches and blobs."""

from __future__ import annotations

import time

import numpy as np
import pytest

from tandem.protocol import ProtocolError, TransitionBatch, TransportError, WeightBlob, WeightRequest, decode, sockets
from tandem.protocol.sockets import SocketOptions
from tests.protocol import samples

TIMEOUT_MS = 5000


def recv_message(sock, timeout_ms=TIMEOUT_MS):
    frames = sockets.recv_frames(sock, timeout_ms)
    assert frames is not None, "nothing arrived in time"
    return decode(frames)


def test_transitions_push_to_pull(zmq_ctx, endpoint_factory):
    pull = sockets.transitions_pull(zmq_ctx, endpoint_factory())
    push = sockets.transitions_push(zmq_ctx, sockets.bound_endpoint(pull))
    sent = [samples.unroll(steps=16, envs=8, ends=[(3, 1, "truncated")], seq=i) for i in range(5)]
    for batch in sent:
        assert sockets.send_message(push, batch, timeout_ms=TIMEOUT_MS)
    got = [recv_message(pull) for _ in sent]
    assert [b.seq for b in got] == [0, 1, 2, 3, 4]
    assert all(isinstance(b, TransitionBatch) for b in got)
    assert np.array_equal(got[2].obs, sent[2].obs) and np.array_equal(got[2].final_obs, sent[2].final_obs)


def test_large_image_batch_goes_zero_copy_and_arrives_intact(zmq_ctx, endpoint_factory):
    pull = sockets.transitions_pull(zmq_ctx, endpoint_factory())
    push = sockets.transitions_push(zmq_ctx, sockets.bound_endpoint(pull))
    batch = samples.unroll(steps=8, envs=4, obs_shape=(4, 84, 84), obs_dtype="|u1")
    tracker = sockets.send_frames(push, batch.to_frames(), timeout_ms=TIMEOUT_MS, track=True)
    got = recv_message(pull)
    tracker.wait(5)
    assert tracker.done
    assert np.array_equal(got.obs, batch.obs)


def test_weights_pub_sub_and_snapshot(zmq_ctx, endpoint_factory):
    pub = sockets.weights_pub(zmq_ctx, endpoint_factory())
    router = sockets.snapshot_router(zmq_ctx, endpoint_factory())
    sub = sockets.weights_sub(zmq_ctx, sockets.bound_endpoint(pub))
    dealer = sockets.snapshot_dealer(zmq_ctx, sockets.bound_endpoint(router))
    blob = samples.blob(version=5, sizes=((512, 512), (512,)))
    # A late joiner asks the snapshot socket (the subscription may not be live yet).
    deadline = time.monotonic() + 5
    while not sockets.send_message(dealer, WeightRequest("default", -1, "actor-0")):
        assert time.monotonic() < deadline, "snapshot dealer never connected"
        time.sleep(0.01)
    identity, *request = sockets.recv_frames(router, TIMEOUT_MS)
    assert decode(request).requester == "actor-0"
    assert sockets.send_message(router, blob, identity=bytes(identity))
    snap = recv_message(dealer)
    snap.verify_checksum()
    assert snap.version == 5
    # Then the PUB path: publish until the subscription is live.
    newer = samples.blob(version=6, sizes=((512, 512), (512,)))
    got = None
    while got is None and time.monotonic() < deadline + 5:
        sockets.send_message(pub, newer)
        frames = sockets.recv_frames(sub, 50)
        got = decode(frames) if frames else None
    assert isinstance(got, WeightBlob) and got.version == 6
    got.verify_checksum()


def test_a_frame_over_max_message_size_drops_that_sender_only(zmq_ctx, endpoint_factory):
    opts = SocketOptions(max_message_bytes=64 * 1024)
    pull = sockets.transitions_pull(zmq_ctx, endpoint_factory(), opts)
    endpoint = sockets.bound_endpoint(pull)
    bad = sockets.transitions_push(zmq_ctx, endpoint)
    good = sockets.transitions_push(zmq_ctx, endpoint)
    huge = samples.unroll(steps=64, envs=8, obs_shape=(84,), seq=99)  # ~170 KB of observations
    deadline = time.monotonic() + 5
    while not sockets.send_message(bad, huge):
        assert time.monotonic() < deadline
        time.sleep(0.01)
    for i in range(3):
        assert sockets.send_message(good, samples.unroll(steps=2, envs=2, seq=i + 1), timeout_ms=TIMEOUT_MS)
    seqs = []
    while len(seqs) < 3:
        frames = sockets.recv_frames(pull, 2000)
        assert frames is not None, f"receiver stopped working after the oversized frame; got {seqs}"
        seqs.append(decode(frames).seq)
    assert seqs == [1, 2, 3]
    assert sockets.recv_frames(pull, 300) is None  # the oversized message never arrives


def test_close_with_a_dead_peer_returns_within_linger(short_tmp):
    ctx = sockets.new_context()
    opts = SocketOptions(linger_ms=200)
    pull = sockets.transitions_pull(ctx, "tcp://127.0.0.1:*", opts)
    endpoint = sockets.bound_endpoint(pull)
    pub = sockets.weights_pub(ctx, f"ipc://{short_tmp}/w", opts)
    push = sockets.transitions_push(ctx, endpoint, opts)
    deadline = time.monotonic() + 5
    while not sockets.send_message(push, samples.unroll(seq=0)):
        assert time.monotonic() < deadline
        time.sleep(0.01)
    sockets.close(pull, linger_ms=0)  # the peer goes away with messages still queued toward it
    for i in range(3):
        sockets.send_message(push, samples.unroll(seq=i + 1))
    sockets.send_message(pub, samples.blob())
    started = time.monotonic()
    sockets.close_context(ctx, linger_ms=200)
    assert time.monotonic() - started < 1.5


def test_push_without_a_learner_does_not_block(zmq_ctx):
    push = sockets.transitions_push(zmq_ctx, "tcp://127.0.0.1:1")  # nothing listens there
    started = time.monotonic()
    assert sockets.send_message(push, samples.unroll()) is False
    assert time.monotonic() - started < 0.5


def test_transport_errors_are_ours(zmq_ctx, short_tmp):
    pull = sockets.transitions_pull(zmq_ctx, "tcp://127.0.0.1:*")
    with pytest.raises(TransportError, match="cannot bind"):
        sockets.transitions_pull(zmq_ctx, sockets.bound_endpoint(pull))
    with pytest.raises(TransportError, match="ipc paths"):
        sockets.weights_pub(zmq_ctx, f"ipc://{short_tmp}/" + "x" * 200)
    with pytest.raises(TransportError, match="cannot connect"):
        sockets.transitions_push(zmq_ctx, "bogus://nowhere")


def test_garbage_on_the_wire_is_a_protocol_error_not_a_crash(zmq_ctx, endpoint_factory):
    pull = sockets.transitions_pull(zmq_ctx, endpoint_factory())
    push = sockets.transitions_push(zmq_ctx, sockets.bound_endpoint(pull))
    assert sockets.send_frames(push, [b"\x00garbage", b"more"], timeout_ms=TIMEOUT_MS)
    assert sockets.send_message(push, samples.unroll(seq=42), timeout_ms=TIMEOUT_MS)
    with pytest.raises(ProtocolError):
        decode(sockets.recv_frames(pull, TIMEOUT_MS))
    assert recv_message(pull).seq == 42
