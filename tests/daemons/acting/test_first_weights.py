"""An actor's first weights arrive in a fraction of a second: before the learner binds, and during an update."""

from __future__ import annotations

import socket
import threading
import time

import numpy as np
import pytest

from tandem.daemons.acting.weights_client import RETRY_S, WeightsClient
from tandem.daemons.config import load_config
from tandem.daemons.learner.snapshots import SnapshotServer
from tandem.protocol import WeightBlob, sockets
from tests.system.harness import ROOT

REFRESH_S = 30.0  # far longer than any wait below: a test that waits for a refresh fails
FIRST_WEIGHTS_S = 2.0


def free_tcp_endpoint() -> str:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return f"tcp://127.0.0.1:{probe.getsockname()[1]}"


def wait_for_weights(client: WeightsClient, deadline_s: float) -> WeightBlob | None:
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        blob = client.poll()
        if blob is not None:
            return blob
        time.sleep(0.005)
    return None


def test_a_request_that_could_not_be_sent_is_asked_again_soon_not_after_a_refresh(zmq_ctx):
    # Nothing listens: the IMMEDIATE snapshot dealer refuses the request, as it does before a handshake ends.
    client = WeightsClient(zmq_ctx, "default", free_tcp_endpoint(), free_tcp_endpoint(), "actor-0", REFRESH_S)
    try:
        client.poll(now=100.0)
        assert client.counters["snapshot_requests"] == 0
        assert client.counters["snapshot_requests_unsent"] == 1
        assert client.request_due <= 100.0 + RETRY_S
    finally:
        client.close()


@pytest.mark.parametrize("attempt", range(8))
def test_an_actor_started_before_its_learner_binds_gets_the_first_weights_at_once(zmq_ctx, short_tmp, attempt):
    weights_ep, snapshot_ep = f"ipc://{short_tmp}/w{attempt}", f"ipc://{short_tmp}/s{attempt}"
    client = WeightsClient(zmq_ctx, "default", weights_ep, snapshot_ep, "actor-0", REFRESH_S)
    server = SnapshotServer("default", {"snapshots_served": 0, "snapshot_requests_refused": 0})
    try:
        assert wait_for_weights(client, 0.05 * (attempt % 4)) is None  # asks while nobody is there
        pub = sockets.weights_pub(zmq_ctx, weights_ep)
        router = sockets.snapshot_router(zmq_ctx, snapshot_ep)
        blob = WeightBlob.build("default", 0, 0, {"w": np.arange(4, dtype=np.float32)})
        server.offer(0, blob.to_frames())
        server.start(router)
        sockets.send_frames(pub, blob.to_frames())  # the learner's first publish: lost to a slow joiner
        got = wait_for_weights(client, FIRST_WEIGHTS_S)
        assert got is not None and got.version == 0, (
            f"no weights within {FIRST_WEIGHTS_S} s; counters {client.counters}"
        )
        assert client.counters["snapshot_requests"] + client.counters["blobs_received"] >= 1
    finally:
        assert server.stop()
        client.close()
        if "pub" in locals():
            sockets.close(pub, linger_ms=0)


@pytest.fixture
def learner(tmp_path, built_learner):
    """The example's learner, built, bound and publishing its first weights."""
    learner = built_learner(load_config(ROOT / "examples" / "cartpole.toml", [f"run.dir='{tmp_path}'"]))
    learner.publish()
    return learner


def test_a_late_joiner_is_served_while_the_learner_is_in_the_middle_of_an_update(learner, zmq_ctx):
    update_s = 3.0
    in_update = threading.Event()

    def long_update() -> bool:  # one slow update (a Nature CNN on a CPU takes 2-3 s), then the stop
        in_update.set()
        time.sleep(update_s)
        learner.stop.requested = True
        return True

    learner.train_step = long_update
    loop = threading.Thread(target=learner.loop, name="learner-loop", daemon=True)
    loop.start()
    client = WeightsClient(
        zmq_ctx,
        "default",
        learner.binding.endpoints["weights"],
        learner.binding.endpoints["snapshot"],
        "actor-9",
        REFRESH_S,
    )
    try:
        assert in_update.wait(FIRST_WEIGHTS_S)
        started = time.monotonic()
        got = wait_for_weights(client, update_s - 0.5)
        waited = time.monotonic() - started
        assert got is not None and got.version == learner.progress.version, (
            f"not served during the update (waited {waited:.2f} s); counters {client.counters}"
        )
    finally:
        client.close()
        learner.stop.requested = True
        loop.join(update_s + 5.0)
        assert not loop.is_alive()
